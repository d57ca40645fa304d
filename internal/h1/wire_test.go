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
		// Issue 17: what an HTTP/2 client can put in :method, :path and
		// :authority must not rewrite the HTTP/1.1 request line.
		{"method with request line", Request{Method: "GET /admin HTTP/1.1", Host: "h", Path: "/public", Header: http.Header{}}, errInvalidMethod},
		{"method with space", Request{Method: "PO ST", Host: "h", Path: "/", Header: http.Header{}}, errInvalidMethod},
		{"method forwarded", Request{Method: "G\x00T", Host: "h", Path: "/", Forward: Forward{Header: http.Header{}}}, errInvalidMethod},
		{"query with space", Request{Host: "h", Path: "/x", RawQuery: "a b", Header: http.Header{}}, errSpaceInURI},
		{"query with tab", Request{Host: "h", Path: "/x", RawQuery: "a\tb", Header: http.Header{}}, errCTLInURI},
		{"host CRLF", Request{Host: "h\r\nX-Evil: 1", Addr: "h:80", Path: "/", Header: http.Header{}}, errInvalidHost},
		{"host with quote", Request{Host: `pub"lic.example.com`, Path: "/", Header: http.Header{}}, errInvalidHost},
		{"host with slash", Request{Host: "a/x", Path: "/", Header: http.Header{}}, errInvalidHost},
		{"host with userinfo", Request{Host: "u@a", Path: "/", Header: http.Header{}}, errInvalidHost},
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
	// Every refusal is the request's fault, not the backend's.
	for _, err := range []error{errCTLInURI, errSpaceInURI, errInvalidHeader, errInvalidMethod, errInvalidHost} {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%v does not wrap ErrInvalidRequest", err)
		}
	}
}

// TestCheckRequest: CheckRequest refuses what Request.Write refuses, for
// requests that go to net/http's transport instead.
func TestCheckRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		url    string
		host   string
		header http.Header
		ok     bool
	}{
		{"plain", "POST", "http://b/x?a=1", "a.example", http.Header{"X-A": {"1"}}, true},
		{"IDNA host", "GET", "http://b/", "ü.example", nil, true},
		{"method", "GET /admin HTTP/1.1", "http://b/", "a", nil, false},
		{"query space", "GET", "http://b/x?a%20b", "a", nil, true},
		{"host", "GET", "http://b/", "a b", nil, false},
		{"header value", "GET", "http://b/", "a", http.Header{"X-A": {"1\r\n"}}, false},
		{"header name", "GET", "http://b/", "a", http.Header{"X A": {"1"}}, false},
	} {
		r, err := http.NewRequest("GET", tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Method, r.Host, r.Header = tc.method, tc.host, tc.header
		err = CheckRequest(r)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: CheckRequest = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	r, _ := http.NewRequest("GET", "http://b/", nil)
	r.URL.RawQuery = "a b"
	if err := CheckRequest(r); !errors.Is(err, errSpaceInURI) {
		t.Errorf("raw query with a space: %v", err)
	}
}

// FuzzWriteRequest: whatever an HTTP/2 client can put in :method, :path
// (query) and :authority, and in one header field, Request.Write either
// refuses (ErrInvalidRequest) or writes a head that http.ReadRequest
// parses back to the same method, target, Host and field: nothing the
// request holds can change where the request line or a field ends.
// Where net/http's own writer accepts the request too, the backend sees
// the same request line and Host from both (issue 17's differential
// rule).
func FuzzWriteRequest(f *testing.F) {
	f.Add("GET", "a.example", "/p", "x=1", "X-A", "v")
	f.Add("GET /admin HTTP/1.1", "a.example", "/public", "", "X-A", "v")
	f.Add("GET", "a.example", "/x", "a b", "X-A", "v")
	f.Add("PO ST", "pub\"lic", "/", "", "X-A", "v\r\nX-B: 1")
	f.Add("OPTIONS", "h:1", "*", "", "Accept", "*/*")
	f.Add("GET", "h", "*", "q", "X", "v") // asterisk-form takes no query
	f.Add("GET", "!", "x", "q", "X", "v") // neither origin- nor asterisk-form, slow path
	f.Fuzz(func(t *testing.T, method, host, path, query, name, value string) {
		wr := Request{Method: method, Host: host, Addr: "192.0.2.1:80", Path: path, RawQuery: query, Header: http.Header{name: {value}}}
		var out bytes.Buffer
		bw := bufio.NewWriter(&out)
		err := wr.Write(bw)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("refusal %v does not wrap ErrInvalidRequest", err)
			}
			return
		}
		bw.Flush()
		got, perr := http.ReadRequest(bufio.NewReader(bytes.NewReader(out.Bytes())))
		if perr != nil {
			t.Fatalf("written head does not parse: %v\n%q", perr, out.Bytes())
		}
		if method == "" {
			method = "GET"
		}
		if got.Method != method {
			t.Fatalf("method %q came back as %q\n%q", method, got.Method, out.Bytes())
		}
		wantTarget := (&url.URL{Path: path}).EscapedPath()
		if wantTarget == "" {
			wantTarget = "/"
		}
		if path == "*" {
			wantTarget = "*"
		}
		if query != "" {
			wantTarget += "?" + query
		}
		if got.RequestURI != wantTarget {
			t.Fatalf("target %q came back as %q\n%q", wantTarget, got.RequestURI, out.Bytes())
		}
		if isASCII(host) && host != "" && got.Host != host {
			t.Fatalf("Host %q came back as %q", host, got.Host)
		}
		if !reqWriteExclude(http.CanonicalHeaderKey(name)) && name != "" {
			if vv := got.Header[http.CanonicalHeaderKey(name)]; len(vv) != 1 || vv[0] != trimOWS(value) {
				t.Fatalf("field %q: %q came back as %q", name, value, vv)
			}
		}
		ref := &http.Request{Method: method, URL: &url.URL{Scheme: "http", Host: wr.Addr, Path: path, RawQuery: query}, Header: wr.Header, Host: host}
		var want bytes.Buffer
		if ref.Write(&want) != nil {
			return
		}
		w, werr := http.ReadRequest(bufio.NewReader(bytes.NewReader(want.Bytes())))
		if werr != nil {
			return // net/http wrote what it cannot read back; Write did better
		}
		if w.Method != got.Method || w.RequestURI != got.RequestURI || w.Host != got.Host {
			t.Fatalf("got %s %s Host %q, net/http writes %s %s Host %q", got.Method, got.RequestURI, got.Host, w.Method, w.RequestURI, w.Host)
		}
	})
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
