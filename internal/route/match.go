package route

import "strings"

// Match returns the action for a request: the first matching route rule
// (by priority) or the longest matching path rule of the host's path
// matcher, else that matcher's default, else the URL map default. It never
// returns nil and, for requests whose rules use no regular expression and
// no ":path" header match, does not allocate.
func (t *Table) Match(r *Request) *Action {
	pm := t.matcher(r.Host)
	if pm == nil {
		return t.def
	}
	return pm.match(r)
}

// matcher finds the path matcher for a host (see the package doc for the
// precedence), or nil.
func (t *Table) matcher(host string) *pathMatcher {
	name, port, hasPort := splitPort(host)
	name = strings.TrimSuffix(name, ".")
	if hasPort && t.hasPorts {
		var buf [256]byte
		if pm := t.exactHost(name, port, buf[:0]); pm != nil {
			return pm
		}
		for _, w := range t.wildPort {
			if len(host) > len(w.suffix) && hasSuffixFold(host, w.suffix) {
				return w.pm
			}
		}
	}
	var buf [256]byte
	if pm := t.exactHost(name, "", buf[:0]); pm != nil {
		return pm
	}
	for _, w := range t.wild {
		if len(name) > len(w.suffix) && hasSuffixFold(name, w.suffix) {
			return w.pm
		}
	}
	return t.star
}

// exactHost looks up "name" or "name:port" lower-cased, using buf to avoid
// allocating.
func (t *Table) exactHost(name, port string, buf []byte) *pathMatcher {
	if port == "" && !hasUpper(name) {
		return t.exact[name]
	}
	for i := 0; i < len(name); i++ {
		buf = append(buf, lower(name[i]))
	}
	if port != "" {
		buf = append(buf, ':')
		buf = append(buf, port...)
	}
	return t.exact[string(buf)] // the compiler does not allocate for this conversion
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// hasSuffixFold reports whether s ends with the lower-case suffix,
// ignoring ASCII case in s.
func hasSuffixFold(s, suffix string) bool {
	if len(s) < len(suffix) {
		return false
	}
	s = s[len(s)-len(suffix):]
	for i := 0; i < len(s); i++ {
		if lower(s[i]) != suffix[i] {
			return false
		}
	}
	return true
}

// splitPort splits "host:port" or "[v6]:port". A bare IPv6 address has no
// port.
func splitPort(h string) (name, port string, ok bool) {
	i := strings.LastIndexByte(h, ':')
	if i < 0 {
		return h, "", false
	}
	if strings.HasPrefix(h, "[") {
		if h[i-1] != ']' {
			return h, "", false
		}
		return h[:i], h[i+1:], true
	}
	if strings.IndexByte(h[:i], ':') >= 0 {
		return h, "", false // bare IPv6
	}
	return h[:i], h[i+1:], true
}

func (pm *pathMatcher) match(r *Request) *Action {
	path := r.path()
	if pm.routes != nil {
		for i := range pm.routes {
			if mr := &pm.routes[i]; mr.matches(r, path) {
				return mr.action
			}
		}
		return pm.def
	}
	if a := pm.exact[path]; a != nil {
		return a
	}
	for _, p := range pm.prefixes {
		if strings.HasPrefix(path, p.prefix) {
			return p.action
		}
	}
	return pm.def
}

// matches reports whether every predicate of the match rule holds.
func (m *matchRule) matches(r *Request, path string) bool {
	switch m.kind {
	case pathPrefix:
		if len(path) < len(m.value) {
			return false
		}
		if m.ignoreCase {
			if !strings.EqualFold(path[:len(m.value)], m.value) {
				return false
			}
		} else if path[:len(m.value)] != m.value {
			return false
		}
	case pathFull:
		if m.ignoreCase {
			if !strings.EqualFold(path, m.value) {
				return false
			}
		} else if path != m.value {
			return false
		}
	case pathRegex:
		if !m.re.MatchString(path) {
			return false
		}
	case pathTmpl:
		if !m.tmpl.match(path, nil) {
			return false
		}
	}
	for i := range m.headers {
		if !m.headers[i].matches(r) {
			return false
		}
	}
	for i := range m.queries {
		if !m.queries[i].matches(r.RawQuery) {
			return false
		}
	}
	return true
}
