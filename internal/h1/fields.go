package h1

import (
	"net/http"
	"strings"
)

// The forwarding rules Request.Forward applies as it writes a request
// head (hop-by-hop fields dropped, X-Forwarded-For and Via extended).
// They are exported so that a proxy building an outbound header as a map
// applies exactly the same ones.

// IsHopHeader reports whether a canonical header name is hop-by-hop
// (RFC 9110 §7.6.1 plus the legacy Keep-Alive and Proxy-* headers, and
// HTTP2-Settings, which belongs to an h2c upgrade, RFC 7540 §3.2.1): such
// headers describe one connection and are never forwarded.
func IsHopHeader(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Http2-Settings":
		return true
	}
	return strings.HasPrefix(k, "Proxy-")
}

// AllowedTrailer reports whether a proxy may pass on a trailer field
// (request or response) with this name, canonical or not. RFC 9110 §6.5.1:
// a sender must not put in a trailer a field whose definition does not
// permit it, and fields that are needed before the content cannot be
// processed there; §6.5.2: a recipient must not merge such a field into
// the header section, as a downstream recipient may. Refused:
//   - hop-by-hop fields (IsHopHeader: Connection, Keep-Alive, TE,
//     Trailer, Transfer-Encoding, Upgrade, Proxy-*, HTTP2-Settings) and
//     Content-Length: message framing (RFC 9112 §6, §7.1.2);
//   - routing: Host, Max-Forwards, Via, Forwarded, X-Forwarded-For,
//     -Proto, -Host, and Spillway's own X-Spillway-* fields;
//   - authentication and state: Authorization, WWW-Authenticate (and
//     Proxy-Authorization, Proxy-Authenticate), Cookie, Set-Cookie;
//   - request modifiers: Cache-Control, Expect, Pragma, Range, If-*;
//   - response controls: Age, Expires, Date, Location, Retry-After,
//     Vary, Warning;
//   - how to process the content: Content-Encoding, Content-Type,
//     Content-Range;
//   - HTTP/2 pseudo-header fields (":…", RFC 9113 §8.1: never in
//     trailers).
//
// It is net/http's list (httpguts.ValidTrailerHeader) and more.
func AllowedTrailer(k string) bool {
	if strings.HasPrefix(k, ":") {
		return false
	}
	k = http.CanonicalHeaderKey(k)
	if IsHopHeader(k) || strings.HasPrefix(k, "If-") || strings.HasPrefix(k, "X-Spillway-") {
		return false
	}
	switch k {
	case "Content-Length", "Host", "Max-Forwards", "Via", "Forwarded", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host",
		"Authorization", "Www-Authenticate", "Cookie", "Set-Cookie",
		"Cache-Control", "Expect", "Pragma", "Range",
		"Age", "Expires", "Date", "Location", "Retry-After", "Vary", "Warning",
		"Content-Encoding", "Content-Type", "Content-Range":
		return false
	}
	return true
}

// Listed reports whether name is one of the comma-separated tokens of the
// Connection header values conn (case-insensitive). It does not allocate.
func Listed(conn []string, name string) bool {
	for _, v := range conn {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(tok), name) {
				return true
			}
		}
	}
	return false
}

// CopyHeaders copies src into dst without hop-by-hop headers and without
// the headers src's Connection header lists. Value slices are shared, not
// copied: neither side is modified in place afterwards (adds go through
// append on slices whose capacity equals their length, which reallocates).
func CopyHeaders(dst, src http.Header) {
	conn := src["Connection"]
	for k, vv := range src {
		if IsHopHeader(k) || (len(conn) > 0 && Listed(conn, k)) {
			continue
		}
		dst[k] = vv
	}
}

// ForwardedFor returns the X-Forwarded-For value towards the backend:
// the existing values, then the client, then the load balancer address,
// separated by "," without spaces as Google's global load balancer does.
func ForwardedFor(prior []string, client, lb string) string {
	n := len(client) + 1 + len(lb)
	for _, p := range prior {
		n += len(p) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range prior {
		b.WriteString(p)
		b.WriteByte(',')
	}
	b.WriteString(client)
	if lb != "" {
		b.WriteByte(',')
		b.WriteString(lb)
	}
	return b.String()
}

// AppendVia returns the Via values with this proxy's hop added: fresh
// (shared, never modified) when there was none, else appended to the last.
func AppendVia(prior []string, via []string) []string {
	if len(prior) == 0 {
		return via
	}
	out := make([]string, len(prior))
	copy(out, prior)
	out[len(out)-1] += ", " + via[0]
	return out
}
