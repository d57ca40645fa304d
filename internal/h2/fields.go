package h2

import (
	"net/http"
	"strings"
)

// commonFields are header names whose wire (lower-case) and canonical
// spellings are looked up rather than computed (no allocation).
var commonFields = [...]string{
	"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Accept-Ranges",
	"Access-Control-Allow-Credentials", "Access-Control-Allow-Headers", "Access-Control-Allow-Methods",
	"Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Access-Control-Max-Age",
	"Access-Control-Request-Headers", "Access-Control-Request-Method", "Age", "Allow", "Alt-Svc",
	"Authorization", "Cache-Control", "Connection", "Content-Disposition", "Content-Encoding",
	"Content-Language", "Content-Length", "Content-Location", "Content-Range", "Content-Type",
	"Cookie", "Date", "Etag", "Expect", "Expires", "Forwarded", "From", "Host", "If-Match",
	"If-Modified-Since", "If-None-Match", "If-Range", "If-Unmodified-Since", "Keep-Alive",
	"Last-Modified", "Link", "Location", "Max-Forwards", "Origin", "Pragma", "Priority",
	"Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Range", "Referer",
	"Refresh", "Retry-After", "Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site", "Sec-Fetch-User",
	"Server", "Set-Cookie", "Strict-Transport-Security", "Te", "Trailer", "Traceparent", "Tracestate",
	"Transfer-Encoding", "Upgrade", "Upgrade-Insecure-Requests", "User-Agent", "Vary", "Via",
	"Www-Authenticate", "X-Cloud-Trace-Context", "X-Content-Type-Options", "X-Forwarded-For",
	"X-Forwarded-Host", "X-Forwarded-Proto", "X-Frame-Options", "X-Request-Id", "X-Xss-Protection",
}

// fieldTables maps the common names both ways.
type fieldTables struct {
	lower map[string]string // canonical -> lower-case
	canon map[string]string // lower-case -> canonical
}

func newFieldTables() *fieldTables {
	t := &fieldTables{lower: make(map[string]string, len(commonFields)), canon: make(map[string]string, len(commonFields))}
	for _, k := range commonFields {
		l := strings.ToLower(k)
		t.lower[k] = l
		t.canon[l] = k
	}
	return t
}

// lowerKey returns the wire name of header key k, "" when k is not
// ASCII (such a field is not sent, as x/net does).
func (t *fieldTables) lowerKey(k string) string {
	if l, ok := t.lower[k]; ok {
		return l
	}
	for i := 0; i < len(k); i++ {
		if k[i] >= 0x80 {
			return ""
		}
	}
	return strings.ToLower(k)
}

// canonicalKey returns the canonical form of a wire name.
func (t *fieldTables) canonicalKey(name string) string {
	if k, ok := t.canon[name]; ok {
		return k
	}
	return http.CanonicalHeaderKey(name)
}
