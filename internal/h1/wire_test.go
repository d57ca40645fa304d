package h1

import (
	"bufio"
	"bytes"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// readBack parses a written request head.
func readBack(t *testing.T, b []byte) *http.Request {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatalf("written head does not parse: %v\n%s", err, b)
	}
	return req
}

// TestWriteRequestHeadMatchesNetHTTP compares Request.Write with
// http.Request.Write on the same requests, as a backend parses them.
func TestWriteRequestHeadMatchesNetHTTP(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h[kv[i]] = append(h[kv[i]], kv[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		name string
		wr   Request
	}{
		{"get", Request{Method: "GET", Host: "www.example.com", Path: "/a/b", RawQuery: "x=1&y=%20", Header: hdr("Accept", "*/*", "User-Agent", "curl/8")}},
		{"raw path kept", Request{Method: "GET", Host: "h:8080", Path: "/p/a/b", RawPath: "/p/a%2Fb", Header: hdr()}},
		{"path escaped", Request{Method: "GET", Host: "h", Path: "/a b/ü", Header: hdr()}},
		{"invalid raw path ignored", Request{Method: "GET", Host: "h", Path: "/a b", RawPath: "/x", Header: hdr()}},
		{"empty path", Request{Method: "GET", Host: "h", Header: hdr()}},
		{"options star", Request{Method: "OPTIONS", Host: "h", Path: "*", Header: hdr()}},
		{"head", Request{Method: "HEAD", Host: "h", Path: "/", Header: hdr()}},
		{"delete", Request{Method: "DELETE", Host: "h", Path: "/", Header: hdr()}},
		{"post empty", Request{Method: "POST", Host: "h", Path: "/", Header: hdr("Content-Length", "0")}},
		{"put empty", Request{Method: "PUT", Host: "h", Path: "/", Header: hdr()}},
		{"patch empty", Request{Method: "PATCH", Host: "h", Path: "/", Header: hdr()}},
		{"no method", Request{Host: "h", Path: "/", Header: hdr()}},
		{"no user agent", Request{Method: "GET", Host: "h", Path: "/", Header: hdr()}},
		{"empty user agent", Request{Method: "GET", Host: "h", Path: "/", Header: hdr("User-Agent", "")}},
		{"two user agents", Request{Method: "GET", Host: "h", Path: "/", Header: hdr("User-Agent", "a", "User-Agent", "b")}},
		{"excluded headers", Request{Method: "GET", Host: "h", Path: "/", Header: hdr("Host", "evil", "Transfer-Encoding", "chunked", "Trailer", "X", "Content-Length", "5")}},
		{"values trimmed, repeated", Request{Method: "GET", Host: "h", Path: "/", Header: hdr("X-A", " 1 ", "X-A", "\t2", "X-B", "")}},
		{"ipv6 host", Request{Method: "GET", Host: "[::1]:80", Path: "/", Header: hdr()}},
		{"idn host (slow path)", Request{Method: "GET", Host: "bücher.example", Path: "/", Header: hdr()}},
		{"zone host (slow path)", Request{Method: "GET", Host: "[fe80::1%en0]:80", Path: "/", Header: hdr()}},
		{"no host (slow path)", Request{Method: "GET", Addr: "10.0.0.1:80", Path: "/", Header: hdr()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got bytes.Buffer
			bw := bufio.NewWriter(&got)
			if err := tc.wr.Write(bw); err != nil {
				t.Fatal(err)
			}
			bw.Flush()
			ref := &http.Request{
				Method: tc.wr.Method,
				URL:    &url.URL{Scheme: "http", Host: tc.wr.Addr, Path: tc.wr.Path, RawPath: tc.wr.RawPath, RawQuery: tc.wr.RawQuery},
				Header: tc.wr.Header, Host: tc.wr.Host,
			}
			var want bytes.Buffer
			if err := ref.Write(&want); err != nil {
				t.Fatal(err)
			}
			g, w := readBack(t, got.Bytes()), readBack(t, want.Bytes())
			if g.Method != w.Method || g.RequestURI != w.RequestURI || g.Host != w.Host || g.ContentLength != w.ContentLength {
				t.Errorf("got %s %s Host %q CL %d, want %s %s Host %q CL %d",
					g.Method, g.RequestURI, g.Host, g.ContentLength, w.Method, w.RequestURI, w.Host, w.ContentLength)
			}
			if !maps.EqualFunc(g.Header, w.Header, slices.Equal) {
				t.Errorf("headers\n got %v\nwant %v", g.Header, w.Header)
			}
			if !bytes.HasSuffix(got.Bytes(), []byte("\r\n\r\n")) {
				t.Errorf("head does not end with an empty line: %q", got.Bytes())
			}
		})
	}
}

// TestWriteRequestHeadRefusesInjection checks that CR/LF and other control
// characters never reach the wire.
func TestWriteRequestHeadRefusesInjection(t *testing.T) {
	for _, tc := range []struct {
		name string
		wr   Request
		want error
	}{
		{"value CRLF", Request{Host: "h", Path: "/", Header: http.Header{"X-A": {"1\r\nX-Evil: 1"}}}, errInvalidHeader},
		{"value LF", Request{Host: "h", Path: "/", Header: http.Header{"X-A": {"1\nX-Evil: 1"}}}, errInvalidHeader},
		{"value NUL", Request{Host: "h", Path: "/", Header: http.Header{"X-A": {"a\x00"}}}, errInvalidHeader},
		{"user agent CRLF", Request{Host: "h", Path: "/", Header: http.Header{"User-Agent": {"a\r\nX-Evil: 1"}}}, errInvalidHeader},
		{"name with colon", Request{Host: "h", Path: "/", Header: http.Header{"X-A: b\r\nX": {"1"}}}, errInvalidHeader},
		{"name with space", Request{Host: "h", Path: "/", Header: http.Header{"X A": {"1"}}}, errInvalidHeader},
		{"empty name", Request{Host: "h", Path: "/", Header: http.Header{"": {"1"}}}, errInvalidHeader},
		{"query CRLF", Request{Host: "h", Path: "/", RawQuery: "a\r\nX-Evil: 1", Header: http.Header{}}, errCTLInURI},
		{"slow path value CRLF", Request{Host: "ü", Path: "/", Header: http.Header{"X-A": {"1\r\nX-Evil: 1"}}}, errInvalidHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			bw := bufio.NewWriter(&out)
			err := tc.wr.Write(bw)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// A host with CR/LF is not plain: net/http's writer drops it.
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	wr := Request{Host: "h\r\nX-Evil: 1", Addr: "h:80", Path: "/", Header: http.Header{}}
	if err := wr.Write(bw); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	if bytes.Contains(out.Bytes(), []byte("X-Evil")) {
		t.Errorf("host injected a header: %q", out.Bytes())
	}
}

// AllowedTrailer refuses what net/http's servers refuse in trailers and
// more (RFC 9110 §6.5.1), whatever the case of the name.
func TestAllowedTrailer(t *testing.T) {
	for name, want := range map[string]bool{
		"X-Checksum": true, "Grpc-Status": true, "Server-Timing": true, "grpc-message": true,
		"Content-Length": false, "transfer-encoding": false, "Host": false, "X-Forwarded-For": false,
		"Authorization": false, "WWW-Authenticate": false, "Set-Cookie": false, "If-None-Match": false,
		"Location": false, "Keep-Alive": false, "Proxy-Connection": false, "X-Spillway-Status-Details": false,
		":status": false, ":path": false,
	} {
		if got := AllowedTrailer(name); got != want {
			t.Errorf("AllowedTrailer(%q) = %v, want %v", name, got, want)
		}
	}
}
