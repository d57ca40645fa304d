package proxy

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

// TestWriteRequestHeadMatchesNetHTTP compares writeRequestHead with
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
		wr   wireRequest
	}{
		{"get", wireRequest{method: "GET", host: "www.example.com", path: "/a/b", rawQuery: "x=1&y=%20", header: hdr("Accept", "*/*", "User-Agent", "curl/8")}},
		{"raw path kept", wireRequest{method: "GET", host: "h:8080", path: "/p/a/b", rawPath: "/p/a%2Fb", header: hdr()}},
		{"path escaped", wireRequest{method: "GET", host: "h", path: "/a b/ü", header: hdr()}},
		{"invalid raw path ignored", wireRequest{method: "GET", host: "h", path: "/a b", rawPath: "/x", header: hdr()}},
		{"empty path", wireRequest{method: "GET", host: "h", header: hdr()}},
		{"options star", wireRequest{method: "OPTIONS", host: "h", path: "*", header: hdr()}},
		{"head", wireRequest{method: "HEAD", host: "h", path: "/", header: hdr()}},
		{"delete", wireRequest{method: "DELETE", host: "h", path: "/", header: hdr()}},
		{"post empty", wireRequest{method: "POST", host: "h", path: "/", header: hdr("Content-Length", "0")}},
		{"put empty", wireRequest{method: "PUT", host: "h", path: "/", header: hdr()}},
		{"patch empty", wireRequest{method: "PATCH", host: "h", path: "/", header: hdr()}},
		{"no method", wireRequest{host: "h", path: "/", header: hdr()}},
		{"no user agent", wireRequest{method: "GET", host: "h", path: "/", header: hdr()}},
		{"empty user agent", wireRequest{method: "GET", host: "h", path: "/", header: hdr("User-Agent", "")}},
		{"two user agents", wireRequest{method: "GET", host: "h", path: "/", header: hdr("User-Agent", "a", "User-Agent", "b")}},
		{"excluded headers", wireRequest{method: "GET", host: "h", path: "/", header: hdr("Host", "evil", "Transfer-Encoding", "chunked", "Trailer", "X", "Content-Length", "5")}},
		{"values trimmed, repeated", wireRequest{method: "GET", host: "h", path: "/", header: hdr("X-A", " 1 ", "X-A", "\t2", "X-B", "")}},
		{"ipv6 host", wireRequest{method: "GET", host: "[::1]:80", path: "/", header: hdr()}},
		{"idn host (slow path)", wireRequest{method: "GET", host: "bücher.example", path: "/", header: hdr()}},
		{"zone host (slow path)", wireRequest{method: "GET", host: "[fe80::1%en0]:80", path: "/", header: hdr()}},
		{"no host (slow path)", wireRequest{method: "GET", addr: "10.0.0.1:80", path: "/", header: hdr()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got bytes.Buffer
			bw := bufio.NewWriter(&got)
			if err := writeRequestHead(bw, &tc.wr); err != nil {
				t.Fatal(err)
			}
			bw.Flush()
			ref := &http.Request{
				Method: tc.wr.method,
				URL:    &url.URL{Scheme: "http", Host: tc.wr.addr, Path: tc.wr.path, RawPath: tc.wr.rawPath, RawQuery: tc.wr.rawQuery},
				Header: tc.wr.header, Host: tc.wr.host,
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
		wr   wireRequest
		want error
	}{
		{"value CRLF", wireRequest{host: "h", path: "/", header: http.Header{"X-A": {"1\r\nX-Evil: 1"}}}, errInvalidHeader},
		{"value LF", wireRequest{host: "h", path: "/", header: http.Header{"X-A": {"1\nX-Evil: 1"}}}, errInvalidHeader},
		{"value NUL", wireRequest{host: "h", path: "/", header: http.Header{"X-A": {"a\x00"}}}, errInvalidHeader},
		{"user agent CRLF", wireRequest{host: "h", path: "/", header: http.Header{"User-Agent": {"a\r\nX-Evil: 1"}}}, errInvalidHeader},
		{"name with colon", wireRequest{host: "h", path: "/", header: http.Header{"X-A: b\r\nX": {"1"}}}, errInvalidHeader},
		{"name with space", wireRequest{host: "h", path: "/", header: http.Header{"X A": {"1"}}}, errInvalidHeader},
		{"empty name", wireRequest{host: "h", path: "/", header: http.Header{"": {"1"}}}, errInvalidHeader},
		{"query CRLF", wireRequest{host: "h", path: "/", rawQuery: "a\r\nX-Evil: 1", header: http.Header{}}, errCTLInURI},
		{"slow path value CRLF", wireRequest{host: "ü", path: "/", header: http.Header{"X-A": {"1\r\nX-Evil: 1"}}}, errInvalidHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			bw := bufio.NewWriter(&out)
			err := writeRequestHead(bw, &tc.wr)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// A host with CR/LF is not plain: net/http's writer drops it.
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	wr := wireRequest{host: "h\r\nX-Evil: 1", addr: "h:80", path: "/", header: http.Header{}}
	if err := writeRequestHead(bw, &wr); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	if bytes.Contains(out.Bytes(), []byte("X-Evil")) {
		t.Errorf("host injected a header: %q", out.Bytes())
	}
}

// TestWriteForwardedMatchesOutHeader: writing the client's headers
// directly sends what handler.outHeader's map would.
func TestWriteForwardedMatchesOutHeader(t *testing.T) {
	h := NewHandler(Config{}).(*handler)
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"plain", http.Header{"Accept": {"*/*"}, "User-Agent": {"curl/8"}}},
		{"no user agent", http.Header{"Accept": {"*/*"}}},
		{"empty user agent", http.Header{"User-Agent": {""}}},
		{"two user agents", http.Header{"User-Agent": {"a", "b"}}},
		{"user agent listed in Connection", http.Header{"User-Agent": {"a"}, "Connection": {"user-agent"}}},
		{"hop-by-hop", http.Header{
			"Connection": {"keep-alive, X-Hop"}, "X-Hop": {"secret"}, "Keep-Alive": {"timeout=5"},
			"Proxy-Authorization": {"Basic Zm9v"}, "Te": {"trailers, deflate"}, "Transfer-Encoding": {"chunked"},
			"Trailer": {"X"}, "Upgrade": {"h2c"}, "X-End-To-End": {"kept"}}},
		{"te without trailers", http.Header{"Te": {"deflate"}}},
		{"prior forwarding", http.Header{
			"X-Forwarded-For": {" 203.0.113.9", "198.51.100.1 "}, "X-Forwarded-Proto": {"https"},
			"Via": {"1.0 a ", " 1.1 b "}}},
		{"forwarding listed in Connection", http.Header{"Connection": {"X-Forwarded-For, Via"}, "X-Forwarded-For": {"1.2.3.4"}, "Via": {"1.0 a"}}},
		{"repeated values", http.Header{"Cookie": {"a=1", "b=2"}, "Accept": {" x ", "\ty"}, "Content-Length": {"0"}}},
	} {
		for _, method := range []string{"GET", "POST"} {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				r, _ := http.NewRequest(method, "http://www.example.com/a?b=c", nil)
				r.Header = tc.header
				r.RemoteAddr = "192.0.2.7:5555"
				wr := wireRequest{method: method, host: "www.example.com", path: "/a", rawQuery: "b=c",
					src: r.Header, clientIP: hostOnly(r.RemoteAddr), lbIP: localIP(r), proto: h.scheme(r), via: h.via[0]}
				if got, want := wr.outHeader(), h.outHeader(r, ""); !maps.EqualFunc(got, want, slices.Equal) {
					t.Fatalf("wireRequest.outHeader\n got %v\nwant %v", got, want)
				}
				var direct, viaMap bytes.Buffer
				bw := bufio.NewWriter(&direct)
				if err := writeRequestHead(bw, &wr); err != nil {
					t.Fatal(err)
				}
				bw.Flush()
				wm := wr
				wm.header = h.outHeader(r, "")
				bw = bufio.NewWriter(&viaMap)
				if err := writeRequestHead(bw, &wm); err != nil {
					t.Fatal(err)
				}
				bw.Flush()
				g, w := readBack(t, direct.Bytes()), readBack(t, viaMap.Bytes())
				if !maps.EqualFunc(g.Header, w.Header, slices.Equal) || g.ContentLength != w.ContentLength {
					t.Errorf("direct\n got %v\nwant %v", g.Header, w.Header)
				}
			})
		}
	}
	// Invalid client fields are refused, not written.
	for _, bad := range []http.Header{
		{"X-A": {"1\r\nX-Evil: 1"}},
		{"X A": {"1"}},
		{"User-Agent": {"a\nX-Evil: 1"}},
		{"X-Forwarded-For": {"1\r\nX-Evil: 1"}},
		{"Via": {"1.0 a\r\nX-Evil: 1"}},
	} {
		var out bytes.Buffer
		bw := bufio.NewWriter(&out)
		wr := wireRequest{method: "GET", host: "h", path: "/", src: bad, clientIP: "192.0.2.7", proto: "http", via: "1.1 spillway"}
		if err := writeRequestHead(bw, &wr); !errors.Is(err, errInvalidHeader) {
			t.Errorf("%v: err = %v, want errInvalidHeader", bad, err)
		}
		bw.Flush()
		if bytes.Contains(out.Bytes(), []byte("X-Evil")) {
			t.Errorf("%v: injected: %q", bad, out.Bytes())
		}
	}
}
