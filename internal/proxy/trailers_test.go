package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1/h1test"
)

// forbiddenTrailers are trailer fields a proxy must not pass on (RFC 9110
// §6.5.1: framing, routing, authentication, request modifiers, response
// control, content format; §7.6.1 hop-by-hop), as "Name: value" lines.
// None is in net/http's HTTP/2 server's list of trailers it refuses
// (httpguts.ValidTrailerHeader), so an HTTP/2 client can send them all.
var forbiddenTrailers = []string{
	"X-Forwarded-For: 6.6.6.6", "X-Forwarded-Proto: https", "X-Forwarded-Host: evil.example",
	"Forwarded: for=6.6.6.6", "Via: 1.1 evil", "Cookie: session=stolen", "Set-Cookie: a=b",
	"Location: http://evil.example/", "Age: 1", "Date: Thu, 01 Jan 2026 00:00:00 GMT",
	"Retry-After: 1", "Vary: *", "Expires: 0", "X-Spillway-Status-Details: forged",
}

// hop1Trailers are forbidden trailers net/http's HTTP/2 server refuses
// itself (it resets the stream): only an HTTP/1.1 client can send them.
var hop1Trailers = []string{
	"Host: evil.example", "Content-Length: 99", "Transfer-Encoding: chunked", "Authorization: Bearer stolen",
	"Proxy-Authorization: Basic eA==", "Cache-Control: no-cache", "Range: bytes=0-1", "If-Match: \"x\"", "Te: trailers", "Connection: close",
}

// trailerBackend is a backend that sends each request's trailers, as
// net/http parsed them (the names its Trailer field announced, with
// their values if sent, and the other fields of the trailer section), to
// got, and answers 200.
func trailerBackend(t *testing.T, got chan<- http.Header) string {
	return h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		got <- r.Trailer
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
}

// checkForwardedTrailers checks what the backend got: only X-Foo, with
// its value, announced or sent.
func checkForwardedTrailers(t *testing.T, name string, got <-chan http.Header) {
	t.Helper()
	select {
	case g := <-got:
		if want := (http.Header{"X-Foo": {"1"}}); !reflect.DeepEqual(g, want) {
			t.Errorf("%s: backend got trailers %v, want %v", name, g, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the backend got no request", name)
	}
}

// A client's request trailers reach the backend without the fields a
// trailer must not carry (RFC 9110 §6.5.1, §6.5.2): an HTTP/1.1 chunked
// request and an HTTP/2 request with a trailer block.
func TestRequestTrailersAreFiltered(t *testing.T) {
	got := make(chan http.Header, 1)
	be := trailerBackend(t, got)
	cfg := basic("", "", be)

	l := newLab(t, cfg, nil)
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	lines := append([]string{"X-Foo: 1"}, append(forbiddenTrailers, hop1Trailers...)...)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Foo, Set-Cookie, Cookie\r\n\r\n"+
		"2\r\nok\r\n0\r\n"+strings.Join(lines, "\r\n")+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTP/1.1: %v %v", resp, err)
	}
	checkForwardedTrailers(t, "HTTP/1.1", got)

	for _, e := range h2Entries {
		l := e.lab(t, cfg)
		h := dialH2(t, l.addr, e.tls)
		trailer := []string{"x-foo", "1"}
		for _, f := range forbiddenTrailers {
			k, v, _ := strings.Cut(f, ": ")
			trailer = append(trailer, strings.ToLower(k), v)
		}
		id := h.requestTrailers([]byte("ok"), trailer, ":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/",
			"trailer", "x-foo, set-cookie, cookie")
		if r := h.mustResponse(id); r.status != 200 {
			t.Fatalf("%s: %v", e.name, r)
		}
		checkForwardedTrailers(t, e.name, got)
	}
}

// A backend's trailers reach HTTP/2 clients without the fields a
// trailer must not carry (TestBackendTrailersLoseForbiddenFields has
// HTTP/1.1 clients).
func TestBackendTrailersToH2ClientsAreFiltered(t *testing.T) {
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, backendTrailerResponse)
		return true
	})
	for _, e := range h2Entries {
		l := e.lab(t, basic("", "", be))
		h := dialH2(t, l.addr, e.tls)
		r := h.mustResponse(h.get("GET", "x", "/"))
		if r.status != 200 || string(r.body) != "ok" {
			t.Fatalf("%s: %v %q", e.name, r, r.body)
		}
		if want := (http.Header{"X-Sum": {"42"}}); !reflect.DeepEqual(r.trailer, want) {
			t.Errorf("%s: trailers %v, want %v", e.name, r.trailer, want)
		}
	}
}
