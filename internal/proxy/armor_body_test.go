package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// wafPolicy is a backend policy "waf" denying SQL injection (the
// preconfigured WAF at sensitivity 1) with an 8KB body inspection size.
const wafPolicy = `securityPolicies:
- name: waf
  rules:
  - {priority: 1000, action: deny(403), match: {expr: {expression: "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})"}}}
  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
`

// plainPolicy is a backend policy "waf" without WAF rules: a source
// range and an expression.
const plainPolicy = `securityPolicies:
- name: waf
  rules:
  - {priority: 100, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['198.51.100.0/24']}}}
  - {priority: 200, action: deny(404), match: {expr: {expression: "request.path.startsWith('/admin')"}}}
  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
`

// armorLab is a lab whose service bs, over the endpoints addrs, has the
// security policy "waf" of policies and timeoutSec (urlMap as for
// basic); the lab compiles policies with the preconfigured WAF as
// spillway serve does.
func armorLab(t testing.TB, ls labServer, timeoutSec int, urlMap, policies string, addrs ...string) *lab {
	t.Helper()
	return newLabServer(t, basic(fmt.Sprintf("  securityPolicy: waf\n  timeoutSec: %d\n", timeoutSec), urlMap, addrs...)+policies, nil, ls)
}

// bodySeen is what a backend received of a request body.
type bodySeen struct {
	sum           [32]byte
	n             int
	contentLength int64
	chunked       bool
}

// recordingBackend records the bodies it receives.
func recordingBackend(t *testing.T) (*backend, func() []bodySeen) {
	var mu sync.Mutex
	var seen []bodySeen
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen = append(seen, bodySeen{sha256.Sum256(b), len(b), r.ContentLength, len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked"})
		mu.Unlock()
	})
	return be, func() []bodySeen {
		mu.Lock()
		defer mu.Unlock()
		return append([]bodySeen(nil), seen...)
	}
}

// ordinaryText is n bytes of numbered lines of plain words, which no
// SQL injection signature matches; the numbers make any reordering or
// loss visible in a hash.
func ordinaryText(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %d of the quick brown fox jumps over the lazy dog\n", i)
	}
	return b.Bytes()[:n]
}

// onlyReader hides a reader's type, so that the client does not know
// the length and sends the body chunked.
type onlyReader struct{ io.Reader }

// TestWAFInspectsRequestBody: with a policy that calls the
// preconfigured WAF, a SQL injection in a form body is denied before
// any backend sees it, and ordinary bodies, shorter and longer than
// what is inspected, reach the backend byte for byte with their framing
// (Content-Length or chunked) on both frontend loops and over HTTP/2.
// Before bodies were inspected the injection was forwarded.
func TestWAFInspectsRequestBody(t *testing.T) {
	forBothLoops(t, func(t *testing.T, ls labServer) {
		be, seen := recordingBackend(t)
		l := armorLab(t, ls, 30, "", wafPolicy, be.addr())
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		h2 := &http.Client{Transport: &http.Transport{Protocols: &p}}
		t.Cleanup(h2.CloseIdleConnections)
		for _, tc := range []struct {
			name    string
			client  *http.Client
			body    []byte
			ctype   string
			chunked bool
			want    int
		}{
			{"sqli form", l.client, []byte("user=alice&id=1%27%20OR%20%271%27%3D%271"), "application/x-www-form-urlencoded", false, 403},
			{"sqli form, chunked", l.client, []byte("user=alice&id=1%27%20OR%20%271%27%3D%271"), "application/x-www-form-urlencoded", true, 403},
			{"sqli form, HTTP/2", h2, []byte("user=alice&id=1%27%20OR%20%271%27%3D%271"), "application/x-www-form-urlencoded", false, 403},
			{"20 KB", l.client, ordinaryText(20 << 10), "text/plain", false, 200},
			{"20 KB, chunked", l.client, ordinaryText(20 << 10), "text/plain", true, 200},
			{"20 KB, HTTP/2", h2, ordinaryText(20 << 10), "text/plain", false, 200},
			{"100 B", l.client, ordinaryText(100), "text/plain", false, 200},
			{"100 B, chunked", l.client, ordinaryText(100), "text/plain", true, 200},
			{"8 KiB exactly", l.client, ordinaryText(8 << 10), "text/plain", false, 200},
		} {
			before, outcomes := len(seen()), len(l.observed())
			var body io.Reader = bytes.NewReader(tc.body)
			if tc.chunked {
				body = onlyReader{body}
			}
			req, _ := http.NewRequest("POST", l.url+"/upload", body)
			req.Header.Set("Content-Type", tc.ctype)
			resp, err := tc.client.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := seen()[before:]
			switch {
			case resp.StatusCode != tc.want:
				t.Errorf("%s: status %d (%s), want %d", tc.name, resp.StatusCode, resp.Header.Get("X-Spillway-Status-Details"), tc.want)
			case tc.want == 403 && (len(got) != 0 || len(l.observed()) != outcomes || resp.Header.Get("X-Spillway-Status-Details") != "denied_by_security_policy"):
				t.Errorf("%s: denied with %q, but %d backend requests, %d attempts", tc.name, resp.Header.Get("X-Spillway-Status-Details"), len(got), len(l.observed())-outcomes)
			case tc.want == 200 && len(got) != 1:
				t.Errorf("%s: the backend got %d requests, want 1", tc.name, len(got))
			case tc.want == 200 && (got[0].sum != sha256.Sum256(tc.body) || got[0].n != len(tc.body)):
				t.Errorf("%s: the backend got %d bytes, not the %d sent", tc.name, got[0].n, len(tc.body))
			case tc.want == 200 && tc.client == l.client && (got[0].chunked != tc.chunked || !tc.chunked && got[0].contentLength != int64(len(tc.body))):
				t.Errorf("%s: the backend got Content-Length %d, chunked %v; want the client's framing", tc.name, got[0].contentLength, got[0].chunked)
			}
		}
	})
}

// bodyExchange sends a request's raw bytes on a new connection, then
// half-closes it when halfClose is set, else leaves the client silent;
// it returns the answer (nil when the connection ended without one) and
// whether the connection was closed after it.
func bodyExchange(t *testing.T, addr, raw string, halfClose bool) (*http.Response, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, raw)
	if halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, true
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	return resp, err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestWAFBodyClientFaults: reading the body for the WAF is bounded by
// the exchange timeout, and a client that stalls its body or cuts it
// short is answered 408 or 400 malformed_request_body with the
// connection closed, while no backend sees the request and no attempt
// is counted against one. Before bodies were inspected a stalled body
// was forwarded and ended in 504 backend_timeout, an attempt counted
// against the backend.
func TestWAFBodyClientFaults(t *testing.T) {
	forBothLoops(t, func(t *testing.T, ls labServer) {
		be, seen := recordingBackend(t)
		l := armorLab(t, ls, 1, "", wafPolicy, be.addr())
		const head = "POST /upload HTTP/1.1\r\nHost: lb\r\nContent-Type: text/plain\r\n"
		for _, tc := range []struct {
			name, raw string
			halfClose bool
			want      int
		}{
			{"stalled Content-Length body", head + "Content-Length: 100\r\n\r\n0123456789", false, 408},
			{"stalled chunked body", head + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", false, 408},
			{"cut Content-Length body", head + "Content-Length: 100\r\n\r\n0123456789", true, 400},
			{"malformed chunked body", head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", false, 400},
		} {
			start := time.Now()
			resp, closed := bodyExchange(t, l.addr, tc.raw, tc.halfClose)
			switch {
			case resp == nil:
				t.Errorf("%s: no answer after %v", tc.name, time.Since(start))
			case resp.StatusCode != tc.want || resp.Header.Get("X-Spillway-Status-Details") != "malformed_request_body":
				t.Errorf("%s: %d %s, want %d malformed_request_body", tc.name, resp.StatusCode, resp.Header.Get("X-Spillway-Status-Details"), tc.want)
			case !closed:
				t.Errorf("%s: the connection stayed open after the answer", tc.name)
			}
			if n, o := len(seen()), len(l.observed()); n != 0 || be.hits.Load() != 0 || o != 0 {
				t.Fatalf("%s: %d backend requests, %d attempts; want none", tc.name, n, o)
			}
		}
	})
}

// TestWAFBodyStallOverHTTP2: over HTTP/2 a stalled body gets 408 too,
// and no backend sees it.
func TestWAFBodyStallOverHTTP2(t *testing.T) {
	be, _ := recordingBackend(t)
	l := armorLab(t, labServer{}, 1, "", wafPolicy, be.addr())
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("0123456789")) // then nothing, and no end
	req, _ := http.NewRequest("POST", l.url+"/upload", pr)
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 408 || resp.ProtoMajor != 2 || resp.Header.Get("X-Spillway-Status-Details") != "malformed_request_body" {
		t.Errorf("%s %d %s, want HTTP/2.0 408 malformed_request_body", resp.Proto, resp.StatusCode, resp.Header.Get("X-Spillway-Status-Details"))
	}
	if be.hits.Load() != 0 || len(l.observed()) != 0 {
		t.Errorf("%d backend requests, %d attempts; want none", be.hits.Load(), len(l.observed()))
	}
}

// TestPolicyWithoutWAFStreamsBody: a policy without WAF rules does not
// read the body before a backend is picked: the backend gets the request
// while the client is still sending its body.
func TestPolicyWithoutWAFStreamsBody(t *testing.T) {
	forBothLoops(t, func(t *testing.T, ls labServer) {
		arrived := make(chan struct{}, 1)
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			b, err := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%d %v", len(b), err)
		})
		l := armorLab(t, ls, 30, "", plainPolicy, be.addr())
		c, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: lb\r\nContent-Length: 20\r\n\r\n0123456789")
		select {
		case <-arrived:
		case <-time.After(20 * time.Second):
			t.Fatal("the backend did not get the request while the client was sending its body")
		}
		io.WriteString(c, "abcdefghij")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "20 <nil>" {
			t.Errorf("%d %q, want 200 \"20 <nil>\"", resp.StatusCode, b)
		}
	})
}

// TestWAFBodyRetriedAfterConnectFailure: a request whose body the WAF
// read is still retried after a connect failure (the transport had not
// read the body yet), and the endpoint that answers gets all of it.
func TestWAFBodyRetriedAfterConnectFailure(t *testing.T) {
	be, seen := recordingBackend(t)
	um := "  defaultRouteAction:\n    weightedBackendServices: [{backendService: bs, weight: 1}]\n" +
		"    retryPolicy:\n      retryConditions: [connect-failure]\n      numRetries: 3\n"
	l := armorLab(t, labServer{}, 30, um, wafPolicy, refusedAddr(t), be.addr())
	body := ordinaryText(20 << 10)
	retried := 0
	for i := 0; i < 20 && retried == 0; i++ {
		before := len(l.observed())
		resp, _ := l.do(must(http.NewRequest("POST", l.url+"/upload", bytes.NewReader(body))))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d (%s), want 200", resp.StatusCode, resp.Header.Get("X-Spillway-Status-Details"))
		}
		for _, o := range l.observed()[before:] {
			if o.ConnectFailure {
				retried++
			}
		}
	}
	if retried == 0 {
		t.Fatal("20 requests, none picked the refused endpoint first")
	}
	for _, s := range seen() {
		if s.sum != sha256.Sum256(body) || s.contentLength != int64(len(body)) {
			t.Fatalf("the backend got %d bytes (Content-Length %d), not the %d sent", s.n, s.contentLength, len(body))
		}
	}
}

func must(req *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return req
}

// TestWAFBodyKeepsTrailers: a chunked body the WAF read, whole (its end
// and trailer section read with it) or in part, reaches the backend with
// its trailers, on both frontend loops.
func TestWAFBodyKeepsTrailers(t *testing.T) {
	forBothLoops(t, func(t *testing.T, ls labServer) {
		got := make(chan http.Header, 1)
		l := armorLab(t, ls, 30, "", wafPolicy, trailerBackend(t, got))
		for _, size := range []int{2, 20 << 10} {
			c, err := net.Dial("tcp", l.addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: X-Foo\r\n\r\n%x\r\n%s\r\n0\r\nX-Foo: 1\r\n\r\n", size, ordinaryText(size))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			c.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%d-byte body: %v %v", size, resp, err)
			}
			checkForwardedTrailers(t, fmt.Sprintf("%d-byte body", size), got)
		}
	})
}
