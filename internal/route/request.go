package route

// Request is what matching needs from an HTTP request. The proxy adapts
// *http.Request to it; the simulator and URL map tests build it directly.
type Request struct {
	// Host is the Host header or :authority, possibly with ":port".
	Host string
	// Path is the path only, without the query, percent-decoded.
	Path string
	// EscapedPath is Path as sent, percent-encoded, when the caller has
	// it (RedirectURL builds Location from it). "" means RedirectURL
	// escapes Path itself.
	EscapedPath string
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

// escapedPath returns the percent-encoded path: EscapedPath, else Path
// escaped.
func (r *Request) escapedPath() string {
	if r.EscapedPath != "" {
		return r.EscapedPath
	}
	return escapePath(r.path())
}

// escapePath percent-encodes the bytes of a decoded path that may not
// appear raw in a URL path (RFC 3986 pchar and '/'): controls, space,
// '%', '?', '#', non-ASCII and the like. It allocates only when there is
// something to encode.
func escapePath(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !pathByte(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if pathByte(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	return string(b)
}

// pathByte reports a byte allowed raw in a URL path: unreserved,
// sub-delims, ':', '@' and '/'.
func pathByte(c byte) bool {
	if unreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@', '/':
		return true
	}
	return false
}
