package proxy_test

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1/h1test"
)

// send sends method / (with a body when body is not empty: that takes
// the fallback transport) and returns the status and body.
func (l *lab) send1(method, body string, hdr map[string]string) (*http.Response, string) {
	l.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, l.url+"/", rd)
	if err != nil {
		l.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return l.do(req)
}

// transports are the two ways to a backend: a body-less GET takes the
// fast transport, a POST with a body net/http's Transport.
var transports = []struct{ name, method, body string }{
	{"fast", "GET", ""},
	{"fallback", "POST", "payload"},
}

// A backend's response head is capped (128 KiB over all of a response's
// heads, 1xx included) and so is the number of 1xx responses: past
// either, the client gets 502 and the attempt is a backend fault, long
// before the request timeout.
func TestHostileResponseHeadsAre502(t *testing.T) {
	t.Parallel()
	bigHead := func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Big: " + strings.Repeat("a", 1000) + "\r\n"
		for range 1024 { // 1 MB of header fields
			if _, err := io.WriteString(c, line); err != nil {
				return false
			}
		}
		io.WriteString(c, "Content-Length: 2\r\n\r\nok")
		return false
	}
	bigLine := func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: ")
		chunk := strings.Repeat("b", 64<<10)
		for range 16 { // one 1 MB field
			if _, err := io.WriteString(c, chunk); err != nil {
				return false
			}
		}
		io.WriteString(c, "\r\nContent-Length: 2\r\n\r\nok")
		return false
	}
	flood := func(c net.Conn, r *http.Request) bool {
		for range 20000 { // 600 KB of 103s, then nothing
			if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\n\r\n"); err != nil {
				return false
			}
		}
		time.Sleep(5 * time.Second)
		return false
	}
	// Nine 1xx responses of 15 KiB each: every head is under the limit,
	// together they are over it (net/http's Transport counts all heads
	// of a response against one budget, and so does the fast path).
	interims := func(c net.Conn, r *http.Request) bool {
		for range 9 {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: <"+strings.Repeat("a", 15<<10)+">\r\n\r\n")
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	}
	for _, tc := range []struct {
		name   string
		answer func(net.Conn, *http.Request) bool
		only   string // transport the case applies to, "" for both
	}{
		{"1MB-of-fields", bigHead, ""},
		{"1MB-field", bigLine, ""},
		{"1xx-flood", flood, ""},
		{"1xx-over-budget", interims, ""},
	} {
		for _, tr := range transports {
			if tc.only != "" && tc.only != tr.name {
				continue
			}
			t.Run(tc.name+"/"+tr.name, func(t *testing.T) {
				be := h1test.RawBackend(t, tc.answer)
				l := newLab(t, basic("  timeoutSec: 4\n", "", be), nil)
				resp, body := l.send1(tr.method, tr.body, nil)
				if resp.StatusCode != http.StatusBadGateway {
					t.Fatalf("status %d (%d header fields), want 502", resp.StatusCode, len(resp.Header))
				}
				if !strings.Contains(body, "backend_response_corrupted") || strings.Contains(body, be) {
					t.Errorf("body %q: want the backend_response_corrupted token and no backend address", body)
				}
				for _, o := range l.observed() {
					if o.Status != 0 || o.Err == nil || o.Timeout {
						t.Errorf("outcome status %d err %v timeout %v, want a failure that is not a timeout", o.Status, o.Err, o.Timeout)
					}
				}
			})
		}
	}
}

// Early hints within the caps still work on both transports.
func TestResponseHeadsWithinCaps(t *testing.T) {
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		for range 50 { // many small interim responses: no count cap, only the byte budget
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n")
		}
		// A 100 KiB head split over several writes.
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n")
		for range 100 {
			io.WriteString(c, "X-Fill: "+strings.Repeat("f", 1000)+"\r\n")
		}
		io.WriteString(c, "\r\nok")
		return true
	})
	l := newLab(t, basic("  timeoutSec: 4\n", "", be), nil)
	for _, tr := range transports {
		for range 2 {
			resp, body := l.send1(tr.method, tr.body, nil)
			if resp.StatusCode != 200 || body != "ok" || len(resp.Header.Values("X-Fill")) != 100 {
				t.Errorf("%s: %d %q with %d X-Fill fields, want 200 \"ok\" with 100", tr.name, resp.StatusCode, body, len(resp.Header.Values("X-Fill")))
			}
		}
	}
}

// TestLarge1xxHeadThenFinalResponse: a 1xx head larger than the
// connection's read buffer is read through a larger reader, which has
// buffered the final response too: that response is the one served (it
// used to be lost, and the client got 504 at the timeout), and the
// connection is not reused.
func TestLarge1xxHeadThenFinalResponse(t *testing.T) {
	link := strings.Repeat("Link: </static/asset-0123456789.css>; rel=preload; as=style\r\n", 400) // ~24 KiB
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\n"+link+"\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	l := newLab(t, basic("  timeoutSec: 4\n", "", be), nil)
	for _, tr := range transports {
		for range 2 {
			resp, body := l.send1(tr.method, tr.body, nil)
			if resp.StatusCode != 200 || body != "ok" {
				t.Errorf("%s: %d %q, want 200 \"ok\"", tr.name, resp.StatusCode, body)
			}
		}
	}
}

// rawExchange sends a raw request to the proxy and reads one response.
func rawExchange(t *testing.T, l *lab, request string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, string(b)
}

// "Upgrade: h2c" (RFC 7540 §3.2, removed by RFC 9113) is not tunnelled:
// the request is answered as plain HTTP/1.1, as net/http does, and
// neither Upgrade nor HTTP2-Settings reaches the backend.
func TestH2CUpgradeIsNotForwarded(t *testing.T) {
	var leaked atomic.Value
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		if r.Header.Get("Upgrade") != "" || r.Header.Get("Http2-Settings") != "" {
			leaked.Store(r.Header.Clone())
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
			return false
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain")
		return true
	})
	l := newLab(t, basic("", "", be), nil)
	for _, tc := range []struct{ name, req string }{
		{"listed", "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"},
		{"settings-not-listed", "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"},
		{"h2c-among-others", "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: H2C, websocket\r\n\r\n"},
	} {
		resp, body := rawExchange(t, l, tc.req)
		if resp.StatusCode != 200 || body != "plain" {
			t.Errorf("%s: %d %q, want 200 \"plain\"", tc.name, resp.StatusCode, body)
		}
		if h := leaked.Swap(http.Header{}); h != nil && len(h.(http.Header)) > 0 {
			t.Errorf("%s: the backend got an upgrade request: %v", tc.name, h)
		}
	}
}

// A 101 the client did not ask for, or for another protocol than the one
// asked for, is answered 502: it is never relayed.
func TestUnsolicited101Is502(t *testing.T) {
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: evil\r\n\r\nRAW BYTES")
		time.Sleep(100 * time.Millisecond)
		return false
	})
	l := newLab(t, basic("", "", be), nil)
	for _, tr := range transports {
		resp, body := l.send1(tr.method, tr.body, nil)
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "RAW") {
			t.Errorf("%s: %d %q, want 502", tr.name, resp.StatusCode, body)
		}
	}
	resp, body := rawExchange(t, l, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "RAW") {
		t.Errorf("websocket asked, evil given: %d %q, want 502", resp.StatusCode, body)
	}
}

// Headers a response's Connection header lists are hop-by-hop, also when
// it says "close" too (net/http drops such a Connection header while
// parsing, which lost the list).
func TestResponseConnectionListedWithClose(t *testing.T) {
	for _, head := range []string{
		"HTTP/1.1 200 OK\r\nConnection: X-Internal, close\r\nX-Internal: secret\r\nX-Kept: 1\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: X-Internal\r\nX-Internal: secret\r\nX-Kept: 1\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nconnection: CLOSE , x-internal\r\nX-Internal: secret\r\nX-Kept: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: X-Internal, close\r\nX-Internal: secret\r\nX-Kept: 1\r\n\r\nok", // close-delimited
		"HTTP/1.0 200 OK\r\nConnection: X-Internal\r\nX-Internal: secret\r\nX-Kept: 1\r\nContent-Length: 2\r\n\r\nok",
	} {
		answer := func(c net.Conn, r *http.Request) bool {
			io.WriteString(c, "HTTP/1.1 100 Continue\r\nConnection: X-Kept\r\n\r\n") // a 1xx's list is its own
			io.WriteString(c, head)
			return false
		}
		be := h1test.RawBackend(t, answer)
		l := newLab(t, basic("", "", be), nil)
		// An HTTPS backend service takes net/http's Transport for every
		// request, over TLS.
		tbe := h1test.RawBackend(t, answer, h1test.WithTLS(selfSigned(t)))
		tl := newLab(t, basic("  protocol: HTTPS\n", "", tbe), nil)
		for _, tr := range append(transports, struct{ name, method, body string }{"https", "GET", ""}) {
			l := l
			if tr.name == "https" {
				l = tl
			}
			for i := range 2 { // a fresh connection each time (the backend closes)
				resp, body := l.send1(tr.method, tr.body, nil)
				if resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-Kept") != "1" {
					t.Errorf("%s #%d %q: %d %q X-Kept=%q", tr.name, i, head, resp.StatusCode, body, resp.Header.Get("X-Kept"))
				}
				if v := resp.Header.Get("X-Internal"); v != "" {
					t.Errorf("%s #%d %q: X-Internal: %s reached the client", tr.name, i, head, v)
				}
			}
		}
	}
}

// The same for requests: what the client's Connection header lists does
// not reach the backend, with or without "close".
func TestRequestConnectionListedWithClose(t *testing.T) {
	seen := make(chan http.Header, 8)
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		seen <- r.Header.Clone()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	l := newLab(t, basic("", "", be), nil)
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Secret, close\r\nX-Secret: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nConnection: X-Secret\r\nX-Secret: 1\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nConnection: X-Secret, close\r\nX-Secret: 1\r\nContent-Length: 4\r\n\r\nbody",
		"POST / HTTP/1.1\r\nHost: a\r\nConnection: X-Secret, close\r\nX-Secret: 1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n",
	} {
		resp, body := rawExchange(t, l, req)
		if resp.StatusCode != 200 || body != "ok" {
			t.Errorf("%q: %d %q", req, resp.StatusCode, body)
			continue
		}
		if h := <-seen; h.Get("X-Secret") != "" {
			t.Errorf("%q: the backend got X-Secret", req)
		}
	}
}

// "Expect: 100-continue" is answered by the proxy (100 Continue once the
// body is forwarded) and not sent on: a backend that never sends 100 does
// not cost the upload net/http's one-second ExpectContinueTimeout.
func TestExpectContinueAnsweredByProxy(t *testing.T) {
	var expects atomic.Int32
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		if r.Header.Get("Expect") != "" {
			expects.Add(1)
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	l := newLab(t, basic("", "", be), nil)
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	const uploads = 4
	start := time.Now()
	for i := range uploads {
		io.WriteString(c, "PUT /up HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusContinue {
			t.Fatalf("upload %d: %v %v, want 100 Continue first", i, resp, err)
		}
		io.WriteString(c, "hello")
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("upload %d: %d %q", i, resp.StatusCode, b)
		}
	}
	if n := expects.Load(); n != 0 {
		t.Errorf("the backend got Expect on %d of %d uploads, want none", n, uploads)
	}
	// Deterministic above; generous here: the old behaviour took 1 s each.
	if el := time.Since(start); el > uploads*700*time.Millisecond {
		t.Errorf("%d uploads took %v, want well under %v", uploads, el, uploads*time.Second)
	}
}

// Status codes below 100 are not HTTP (RFC 9110 §15): 502, on both
// transports.
func TestBackendStatusBelow100Is502(t *testing.T) {
	for _, code := range []string{"000", "042", "099"} {
		be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
			io.WriteString(c, "HTTP/1.1 "+code+" Odd\r\nContent-Length: 2\r\n\r\nok")
			return true
		})
		l := newLab(t, basic("", "", be), nil)
		for _, tr := range transports {
			resp, body := l.send1(tr.method, tr.body, nil)
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("%s %s: %d %q, want 502", code, tr.name, resp.StatusCode, body)
			}
		}
	}
}

// A backend that answers HEAD with a body, or sends bytes nobody asked
// for, does not poison the next request on a pooled connection.
func TestHeadWithBodyDoesNotPoisonPool(t *testing.T) {
	t.Parallel()
	poisoned := make(chan struct{}, 1)
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		if r.Method == http.MethodHead {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\n")
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPOISON")
			poisoned <- struct{}{}
			return true
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nclean")
		return true
	})
	l := newLab(t, basic("", "", be), nil)
	for i := range 3 {
		req, _ := http.NewRequest("HEAD", l.url+"/", nil)
		if resp, _ := l.do(req); resp.StatusCode != 200 {
			t.Fatalf("HEAD %d: %d", i, resp.StatusCode)
		}
		select { // the unsolicited bytes are on the pooled connection
		case <-poisoned:
		case <-time.After(30 * time.Second):
			t.Fatalf("HEAD %d: the backend did not send its unsolicited bytes in 30 s", i)
		}
		if resp, body := l.get("/", ""); resp.StatusCode != 200 || body != "clean" {
			t.Errorf("GET after HEAD %d: %d %q, want 200 \"clean\"", i, resp.StatusCode, body)
		}
	}
}

// Broken framing from the backend is a bad response: 502 on both
// transports, not 503 (which means the backend could not be reached).
func TestBackendBadFramingIs502(t *testing.T) {
	for _, head := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\nok",
	} {
		be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
			io.WriteString(c, head)
			return false
		})
		l := newLab(t, basic("", "", be), nil)
		for _, tr := range transports {
			resp, body := l.send1(tr.method, tr.body, nil)
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("%q %s: %d %q, want 502", head, tr.name, resp.StatusCode, body)
			}
		}
	}
}

// Hostile chunked framing after the head: a 1 MB chunk-size line, and a
// 1 MB trailer. net/http's chunked reader bounds both (4 KiB lines,
// trailers to the reader's buffer): the stream is aborted well before the
// timeout, on both transports.
func TestHostileChunkedBodyIsAborted(t *testing.T) {
	t.Parallel()
	for name, tail := range map[string]string{
		"chunk-size-line": strings.Repeat("0", 1<<20) + "1\r\nx\r\n0\r\n\r\n",
		"trailer":         "2\r\nok\r\n0\r\nX-T: " + strings.Repeat("t", 1<<20) + "\r\n\r\n",
	} {
		be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			io.WriteString(c, tail)
			return true
		})
		l := newLab(t, basic("  timeoutSec: 60\n", "", be), nil)
		for _, tr := range transports {
			var rd io.Reader
			if tr.body != "" {
				rd = strings.NewReader(tr.body)
			}
			req, _ := http.NewRequest(tr.method, l.url+"/", rd)
			within(t, 20*time.Second, name+"/"+tr.name, func() {
				resp, err := l.client.Do(req)
				if err != nil {
					return // aborted before the head: fine too
				}
				defer resp.Body.Close()
				if b, err := io.ReadAll(resp.Body); err == nil {
					t.Errorf("%s/%s: body %q read to a clean end", name, tr.name, b)
				}
			})
		}
	}
}

// The same caps hold for HTTP/2 backends (net/http's HTTP/2 client:
// header lists over 128 KiB, 1xx floods): 502, a backend fault.
func TestHostileH2CBackendIs502(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			for i := range 1024 {
				w.Header().Set("X-Big-"+strconv.Itoa(i), strings.Repeat("a", 1000))
			}
		case "/flood":
			// Set once: net/http's HTTP/2 server reads the map of a 1xx
			// asynchronously.
			w.Header().Set("Link", "</"+strings.Repeat("l", 200)+".css>; rel=preload")
			for range 5000 {
				w.WriteHeader(http.StatusEarlyHints)
			}
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	l := newLab(t, basic("  protocol: H2C\n  timeoutSec: 4\n", "", srv.Listener.Addr().String()), nil)
	if resp, body := l.get("/", ""); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("plain h2c request: %d %q", resp.StatusCode, body)
	}
	for _, path := range []string{"/big", "/flood"} {
		resp, body := l.get(path, "")
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: %d %q, want 502", path, resp.StatusCode, body)
		}
	}
}

// A response header name that is not a token ("Content-Length : 5",
// "X A: b") is malformed (RFC 9112 §5): textproto accepts a space in
// a name, so without a check the first would not be taken as a length
// and the body would be read until the backend closes. 502, a backend
// fault, on both transports. An interim (1xx) head is discarded whatever
// its fields, as net/http's Transport does: it has no body to frame.
func TestBackendNonTokenHeaderNameIs502(t *testing.T) {
	interim := "HTTP/1.1 103 Early Hints\r\nLink : </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, interim)
		return false
	})
	for _, tr := range transports {
		l := newLab(t, basic("", "", be), nil)
		if resp, body := l.send1(tr.method, tr.body, nil); resp.StatusCode != http.StatusOK || body != "hello" {
			t.Errorf("%q %s: %d %q, want 200 hello", interim, tr.name, resp.StatusCode, body)
		}
	}
	for _, head := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX A: b\r\n\r\nhello",
	} {
		be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
			io.WriteString(c, head)
			return false
		})
		for _, tr := range transports {
			l := newLab(t, basic("", "", be), nil)
			resp, body := l.send1(tr.method, tr.body, nil)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "backend_response_corrupted") {
				t.Errorf("%q %s: %d %q, want 502 backend_response_corrupted", head, tr.name, resp.StatusCode, body)
			}
			for _, o := range l.observed() {
				if o.Status != 0 || o.Err == nil || o.Timeout {
					t.Errorf("%q %s: outcome status %d err %v timeout %v, want a backend failure", head, tr.name, o.Status, o.Err, o.Timeout)
				}
			}
		}
	}
}

// backendTrailerResponse is a chunked response whose trailer section has
// one field to pass on (X-Sum) and fields a trailer must not carry:
// hop-by-hop ones, which describe the backend's connection as in a head
// (RFC 9110 §7.6.1), and framing, routing, response control and the
// like (RFC 9110 §6.5.1).
var backendTrailerResponse = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum, Keep-Alive, Proxy-Connection, Upgrade, Set-Cookie, Location\r\n\r\n" +
	"2\r\nok\r\n0\r\nX-Sum: 42\r\nKeep-Alive: timeout=1\r\nProxy-Connection: close\r\nUpgrade: evil/1\r\n" +
	strings.Join(append(forbiddenTrailers, hop1Trailers...), "\r\n") + "\r\n\r\n"

// A backend's trailers reach the client without the fields a trailer
// must not carry, announced (in Trailer) or sent, on both transports.
func TestBackendTrailersLoseForbiddenFields(t *testing.T) {
	be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, backendTrailerResponse)
		return true
	})
	l := newLab(t, basic("", "", be), nil)
	for _, tr := range transports {
		resp, body := l.send1(tr.method, tr.body, nil)
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%s: %d %q", tr.name, resp.StatusCode, body)
		}
		if want := (http.Header{"X-Sum": {"42"}}); !reflect.DeepEqual(resp.Trailer, want) {
			t.Errorf("%s: trailers %v, want %v", tr.name, resp.Trailer, want)
		}
	}
}

// An HTTP/1.0 response with Transfer-Encoding has faulty framing (RFC
// 9112 §6.1: HTTP/1.0 has no transfer codings, so whoever sent it did not
// decode what it forwarded): 502 backend_response_corrupted, a backend
// fault, on both transports and over TLS. net/http ignores the field and
// would relay the chunk framing as the body.
func TestHTTP10ResponseWithTransferEncodingIs502(t *testing.T) {
	for _, head := range []string{
		"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 12\r\n\r\n2\r\nok\r\n0\r\n\r\n",
	} {
		answer := func(c net.Conn, r *http.Request) bool {
			io.WriteString(c, head)
			return false
		}
		l := newLab(t, basic("", "", h1test.RawBackend(t, answer)), nil)
		tl := newLab(t, basic("  protocol: HTTPS\n", "", h1test.RawBackend(t, answer, h1test.WithTLS(selfSigned(t)))), nil)
		for _, tr := range append(transports, struct{ name, method, body string }{"https", "GET", ""}) {
			l := l
			if tr.name == "https" {
				l = tl
			}
			resp, body := l.send1(tr.method, tr.body, nil)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "backend_response_corrupted") {
				t.Errorf("%q %s: %d %q, want 502 backend_response_corrupted", head, tr.name, resp.StatusCode, body)
			}
		}
		for _, o := range append(l.observed(), tl.observed()...) {
			if o.Status != 0 || o.Err == nil || o.Timeout || o.ClientFault {
				t.Errorf("%q: outcome status %d err %v, want a backend failure", head, o.Status, o.Err)
			}
		}
	}
}
