package proxy

import (
	"bufio"
	"bytes"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/spillwaylb/spillway/internal/h1"
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

// TestWriteForwardedMatchesOutHeader: writing the client's headers
// directly (h1.Request.Forward) sends what handler.outHeader's map would.
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
				wr := h1.Request{Method: method, Host: "www.example.com", Path: "/a", RawQuery: "b=c",
					Forward: h1.Forward{Header: r.Header, ClientIP: hostOnly(r.RemoteAddr), LBIP: localIP(r), Proto: h.scheme(r), Via: h.via[0]}}
				if got, want := wr.OutHeader(), h.outHeader(r, "", nil); !maps.EqualFunc(got, want, slices.Equal) {
					t.Fatalf("h1.Request.OutHeader\n got %v\nwant %v", got, want)
				}
				var direct, viaMap bytes.Buffer
				bw := bufio.NewWriter(&direct)
				if err := wr.Write(bw); err != nil {
					t.Fatal(err)
				}
				bw.Flush()
				wm := wr
				wm.Header = h.outHeader(r, "", nil)
				bw = bufio.NewWriter(&viaMap)
				if err := wm.Write(bw); err != nil {
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
		wr := h1.Request{Method: "GET", Host: "h", Path: "/", Forward: h1.Forward{Header: bad, ClientIP: "192.0.2.7", Proto: "http", Via: "1.1 spillway"}}
		if err := wr.Write(bw); err == nil || err.Error() != "net/http: invalid header field" {
			t.Errorf("%v: err = %v, want net/http: invalid header field", bad, err)
		}
		bw.Flush()
		if bytes.Contains(out.Bytes(), []byte("X-Evil")) {
			t.Errorf("%v: injected: %q", bad, out.Bytes())
		}
	}
}
