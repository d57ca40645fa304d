package route

// Request is what matching needs from an HTTP request. The proxy adapts
// *http.Request to it; the simulator and URL map tests build it directly.
type Request struct {
	// Host is the Host header or :authority, possibly with ":port".
	Host string
	// Path is the path only, without the query.
	Path string
	// RawQuery is the query string without the leading '?'.
	RawQuery string
	// Method is the request method, e.g. "GET".
	Method string
	// Header looks a header up by name. Match calls it with the canonical
	// MIME form of the configured name ("X-Canary"); implementations must
	// also accept lower-case names. Several values of one header should be
	// returned joined with ",". Nil means the request has no headers.
	Header func(name string) (value string, ok bool)
}

// header returns the value of a compiled header name, resolving the
// pseudo-headers :authority, :method and :path.
func (r *Request) header(h *headerMatch) (string, bool) {
	switch h.pseudo {
	case pseudoAuthority:
		return r.Host, true
	case pseudoMethod:
		return r.Method, r.Method != ""
	case pseudoPath:
		if r.RawQuery == "" {
			return r.path(), true
		}
		return r.path() + "?" + r.RawQuery, true
	}
	if r.Header == nil {
		return "", false
	}
	return r.Header(h.canonical)
}

// path returns r.Path, or "/" when it is empty.
func (r *Request) path() string {
	if r.Path == "" {
		return "/"
	}
	return r.Path
}

// canonicalHeaderKey returns the canonical MIME form of a header name
// ("x-canary" → "X-Canary"), like net/textproto does, without importing net.
func canonicalHeaderKey(s string) string {
	b := []byte(s)
	upper := true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		} else if !upper && 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
	return string(b)
}
