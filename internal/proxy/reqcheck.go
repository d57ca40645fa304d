package proxy

import (
	"net/http"

	"github.com/spillwaylb/spillway/internal/h1"
)

// badH2Request returns why an HTTP/2 (or later) request cannot be
// forwarded as it is, "" when it can. Its pseudo-header fields arrive as
// arbitrary strings, and net/http's HTTP/2 server checks only some of
// them: forwarded as HTTP/1.1, a :method of "GET /admin HTTP/1.1" or a
// :path of "/x?a b" would rewrite the request line after the URL map has
// matched, and an :authority the backend transport rewrites (IDNA) or
// drops (invalid bytes) would route on one Host and deliver another. An
// HTTP/1.1 request with the same content is refused by the request
// parsers of both server loops; this gives HTTP/2 the same rules (RFC
// 9113 §8.3.1, RFC 9110 §9.1 and §7.2):
//
//   - :method is a token;
//   - :path is origin-form ("/…") or, for OPTIONS, "*", with neither
//     whitespace nor control bytes;
//   - :authority (or Host) is present and made of the bytes an HTTP/1.1
//     Host may have (h1.ValidHost: ASCII, no userinfo), and a Host field
//     sent with it says the same.
//
// A refused request is answered 400 before routing, so it never reaches
// a backend or counts against one.
func badH2Request(r *http.Request) string {
	if !h1.ValidMethod(r.Method) {
		return "malformed :method"
	}
	switch t := r.RequestURI; {
	case t == "*":
		if r.Method != http.MethodOptions {
			return `":path: *" is only for OPTIONS`
		}
	case t == "" || t[0] != '/':
		return ":path is not origin-form"
	case !h1.ValidTarget(t):
		return ":path has whitespace or control characters"
	}
	switch {
	case r.Host == "":
		return "missing :authority"
	case !h1.ValidHost(r.Host):
		return "malformed :authority"
	}
	if vv, ok := r.Header["Host"]; ok && (len(vv) != 1 || vv[0] != r.Host) {
		return "Host differs from :authority"
	}
	return ""
}
