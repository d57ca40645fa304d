package h1_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
)

// runningServer is an h1.Server on 127.0.0.1 with a test handler.
type runningServer struct {
	srv  *h1.Server
	addr string
	done chan error
}

// startH1 serves h with an h1.Server (HTTP/2 going to h2cServer) (adjusted by opts) on 127.0.0.1.
func startH1(t *testing.T, h http.Handler, opts ...func(*h1.Server)) *runningServer {
	t.Helper()
	s := h1.NewServer(h)
	s.Logger = slog.New(slog.DiscardHandler)
	s.H2C = h2cServer(h)
	for _, o := range opts {
		o(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ht := &runningServer{srv: s, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { ht.done <- s.Serve(ln) }()
	t.Cleanup(func() { s.Close() })
	return ht
}

// dial opens a raw connection with a reader.
func (ht *runningServer) dial(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", ht.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// readResp reads one response to a request with method.
func readResp(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(b)
}

// echoHandler answers with method, path and the request body.
var echoHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/204":
		w.WriteHeader(http.StatusNoContent)
		return
	case "/304":
		w.WriteHeader(http.StatusNotModified)
		return
	case "/cl":
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "fixed")
		return
	case "/big":
		w.Write([]byte(strings.Repeat("x", 10000)))
		return
	case "/close":
		w.Header().Set("Connection", "close")
	}
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
})

func TestH1KeepAliveAndPipelining(t *testing.T) {
	ht := startH1(t, echoHandler)
	// Many requests, one at a time, on one connection.
	c, br := ht.dial(t)
	for i := range 50 {
		fmt.Fprintf(c, "GET /n%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		resp, body := readResp(t, br, "GET")
		if want := fmt.Sprintf("GET /n%d ", i); body != want || resp.Close {
			t.Fatalf("request %d: %q close=%v, want %q", i, body, resp.Close, want)
		}
		if resp.ContentLength != int64(len(body)) || resp.Header.Get("Date") == "" {
			t.Fatalf("request %d: Content-Length %d, Date %q", i, resp.ContentLength, resp.Header.Get("Date"))
		}
	}
	// Pipelined: all requests written at once, answers in order.
	c2, br2 := ht.dial(t)
	var all strings.Builder
	for i := range 10 {
		fmt.Fprintf(&all, "POST /p%d HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n%d", i, i)
	}
	io.WriteString(c2, all.String())
	for i := range 10 {
		_, body := readResp(t, br2, "POST")
		if want := fmt.Sprintf("POST /p%d %d", i, i); body != want {
			t.Fatalf("pipelined %d: %q, want %q", i, body, want)
		}
	}
}

func TestH1Framing(t *testing.T) {
	ht := startH1(t, echoHandler)
	tests := []struct {
		name, req, method string
		wantStatus        int
		wantBody          string
		wantCL            int64 // -1: none
		wantChunked       bool
		wantClose         bool
	}{
		{"1.0 no keep-alive", "GET /a HTTP/1.0\r\n\r\n", "GET", 200, "GET /a ", 7, false, true},
		{"1.0 keep-alive", "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET", 200, "GET /a ", 7, false, false},
		{"1.0 big keep-alive", "GET /big HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET", 200, strings.Repeat("x", 10000), -1, false, true},
		{"HEAD", "HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD", 200, "", 8, false, false},
		{"HEAD fixed", "HEAD /cl HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD", 200, "", 5, false, false},
		{"204", "GET /204 HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 204, "", 0, false, false},
		{"304", "GET /304 HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 304, "", 0, false, false},
		{"Content-Length", "GET /cl HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 200, "fixed", 5, false, false},
		{"chunked over 2 KiB", "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 200, strings.Repeat("x", 10000), -1, true, false},
		{"client close", "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "GET", 200, "GET /a ", 7, false, true},
		{"handler close", "GET /close HTTP/1.1\r\nHost: x\r\n\r\n", "GET", 200, "GET /close ", 11, false, true},
		{"chunked request body", "POST /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "POST", 200, "POST /e abcde", 13, false, false},
		{"CL request body", "PUT /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nwxyz", "PUT", 200, "PUT /e wxyz", 11, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, br := ht.dial(t)
			io.WriteString(c, tc.req)
			resp, body := readResp(t, br, tc.method)
			chunked := len(resp.TransferEncoding) > 0
			if resp.StatusCode != tc.wantStatus || body != tc.wantBody || resp.ContentLength != tc.wantCL || chunked != tc.wantChunked || resp.Close != tc.wantClose {
				t.Fatalf("got %d %q CL=%d chunked=%v close=%v, want %d %q CL=%d chunked=%v close=%v",
					resp.StatusCode, body, resp.ContentLength, chunked, resp.Close,
					tc.wantStatus, tc.wantBody, tc.wantCL, tc.wantChunked, tc.wantClose)
			}
			// A kept connection answers again; a closed one reads EOF.
			io.WriteString(c, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
			if tc.wantClose {
				if _, err := br.ReadByte(); err == nil {
					t.Fatal("connection not closed")
				}
				return
			}
			if _, body := readResp(t, br, "GET"); body != "GET /again " {
				t.Fatalf("next request: %q", body)
			}
		})
	}
}

func TestH1FlushStreamsChunks(t *testing.T) {
	next := make(chan struct{})
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "part%d;", i)
			w.(http.Flusher).Flush()
			<-next
		}
	}))
	c, br := ht.dial(t)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.TransferEncoding) == 0 {
		t.Fatalf("not chunked: %v", resp.Header)
	}
	for i := range 3 {
		buf := make([]byte, 6)
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != fmt.Sprintf("part%d;", i) {
			t.Fatalf("chunk %d: %q %v", i, buf, err)
		}
		next <- struct{}{}
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("rest %q %v", rest, err)
	}
}

func TestH1ExpectContinue(t *testing.T) {
	ht := startH1(t, echoHandler)
	c, br := ht.dial(t)
	io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("interim %q %v", line, err)
	}
	if l, _ := br.ReadString('\n'); l != "\r\n" {
		t.Fatalf("after 100: %q", l)
	}
	io.WriteString(c, "abc")
	if _, body := readResp(t, br, "POST"); body != "POST /x abc" {
		t.Fatalf("body %q", body)
	}
	// Unknown expectations are refused.
	c2, br2 := ht.dial(t)
	io.WriteString(c2, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: magic\r\n\r\nabc")
	if resp, _ := readResp(t, br2, "POST"); resp.StatusCode != http.StatusExpectationFailed {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestH1BadRequests(t *testing.T) {
	ht := startH1(t, echoHandler)
	tests := []struct {
		name, req string
		want      int
		wantText  string
	}{
		{"header block over 60 KiB", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", 431, "431 Request Header Fields Too Large: request line and headers exceed 60 KiB\n"},
		{"malformed request line", "GET /\r\nHost: x\r\n\r\n", 400, "400 Bad Request: malformed request\n"},
		{"garbage", "\x00\x01\x02 nonsense\r\n\r\n", 400, ""},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", 400, "400 Bad Request: missing required Host header\n"},
		// RFC 9112 §3.2: an absolute-form target does not stand in for
		// the Host field (net/http's server checks the field too).
		{"absolute-form without Host", "GET http://example.com/p HTTP/1.1\r\n\r\n", 400, "400 Bad Request: missing required Host header\n"},
		// httpguts.ValidHostHeader has no '@': userinfo is not a host.
		{"Host with userinfo", "GET / HTTP/1.1\r\nHost: u@x\r\n\r\n", 400, "400 Bad Request: malformed Host header\n"},
		{"Host with userinfo, slow path", "GET / HTTP/1.1\r\nHost: u@x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "400 Bad Request: malformed Host header\n"},
		{"absolute-form with a Host with userinfo", "GET http://example.com/p HTTP/1.1\r\nHost: u@x\r\n\r\n", 400, "400 Bad Request: malformed Host header\n"},
		{"two Content-Lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400, ""},
		{"unsupported Transfer-Encoding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, ""},
		{"HTTP/2 request line", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, ""},
		{"space in a header name", "GET / HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n", 400, "400 Bad Request: invalid header name\n"},
		{"space before the colon", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length : 3\r\n\r\nabc", 400, "400 Bad Request: invalid header name\n"},
		{"non-token byte in a header name", "GET / HTTP/1.1\r\nHost: x\r\nX(A): b\r\n\r\n", 400, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, br := ht.dial(t)
			go io.WriteString(c, tc.req)
			resp, body := readResp(t, br, "GET")
			if resp.StatusCode != tc.want || (tc.wantText != "" && body != tc.wantText) || !resp.Close {
				t.Fatalf("got %d %q close=%v, want %d %q", resp.StatusCode, body, resp.Close, tc.want, tc.wantText)
			}
		})
	}
}

// TestH1AmbiguousFramingIsRefused: a request with both Content-Length
// and Transfer-Encoding, or an HTTP/1.0 request with Transfer-Encoding
// (RFC 9112 §6.1, §6.3), is answered 400 and the connection closed, so
// that the bytes after it are never read as a request; the handler does
// not run. The framing headers are found however the head arrives: whole,
// in pieces, or larger than the connection's read buffer.
func TestH1AmbiguousFramingIsRefused(t *testing.T) {
	ran := make(chan string, 16)
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran <- r.URL.Path
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ran")
	}))
	const next = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	big := "X-Pad: " + strings.Repeat("p", 20<<10) + "\r\n"
	tests := []struct {
		name  string
		parts []string // written 20 ms apart
	}{
		{"CL then TE", []string{"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + next}},
		{"TE then CL", []string{"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + next}},
		{"lower case", []string{"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n" + next}},
		{"bare LF", []string{"POST /a HTTP/1.1\nHost: x\nContent-Length: 5\nTransfer-Encoding: chunked\n\n0\r\n\r\n" + next}},
		{"head in pieces", []string{"POST /a HTTP/1.1\r\nHost: x\r\nContent-Le", "ngth: 5\r\nTransfer-Enc", "oding: chunked\r\n\r\n0\r\n\r\n" + next}},
		{"head over the read buffer", []string{"POST /a HTTP/1.1\r\nHost: x\r\n" + big + "Transfer-Encoding: chunked\r\n" + big + "Content-Length: 5\r\n\r\n0\r\n\r\n" + next}},
		{"HTTP/1.0 TE and CL", []string{"POST /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + next}},
		{"HTTP/1.0 TE", []string{"POST /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + next}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, br := ht.dial(t)
			go func() {
				for i, p := range tc.parts {
					if i > 0 {
						time.Sleep(20 * time.Millisecond)
					}
					io.WriteString(c, p)
				}
			}()
			resp, body := readResp(t, br, "POST")
			if resp.StatusCode != http.StatusBadRequest || !resp.Close || !strings.Contains(body, "Transfer-Encoding") {
				t.Fatalf("got %d close=%v %q, want 400 and close", resp.StatusCode, resp.Close, body)
			}
			if b, err := br.ReadByte(); err == nil {
				t.Fatalf("connection not closed: read %q", b)
			}
			select {
			case p := <-ran:
				t.Fatalf("the handler ran for %s", p)
			default:
			}
		})
	}
	// Chunked alone is fine, and what follows it is the next request.
	c, br := ht.dial(t)
	io.WriteString(c, "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+next)
	for _, want := range []string{"/a", "/smuggled"} {
		if resp, body := readResp(t, br, "POST"); resp.StatusCode != 200 || body != "ran" || <-ran != want {
			t.Fatalf("%s: %d %q", want, resp.StatusCode, body)
		}
	}
}

func TestH1HijackEcho(t *testing.T) {
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw) // buffered bytes first, then the connection
	}))
	c, br := ht.dial(t)
	// "early" arrives with the request, before the upgrade answer.
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nearly")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(c, "-late")
	buf := make([]byte, len("early-late"))
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "early-late" {
		t.Fatalf("echo %q %v", buf, err)
	}
}

func TestH1H2CPriorKnowledge(t *testing.T) {
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Proto, r.URL.Path)
	}))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i := range 3 {
		resp, err := client.Get("http://" + ht.addr + "/h2")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "HTTP/2.0 /h2" {
			t.Fatalf("request %d: %q", i, b)
		}
	}
	// A short HTTP/1.0 request that starts like the preface is still
	// HTTP/1.
	c, br := ht.dial(t)
	io.WriteString(c, "PRI / HTTP/1.0\r\n\r\n")
	if _, body := readResp(t, br, "PRI"); body != "HTTP/1.0 /" {
		t.Fatalf("PRI as HTTP/1.0: %q", body)
	}
}

func TestH1PanicClosesConnection(t *testing.T) {
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		io.WriteString(w, "ok")
	}))
	c, br := ht.dial(t)
	io.WriteString(c, "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("got a response after a panic")
	}
	c2, br2 := ht.dial(t)
	io.WriteString(c2, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, body := readResp(t, br2, "GET"); body != "ok" {
		t.Fatalf("after panic: %q", body)
	}
}

func TestH1TimeoutsCloseConnections(t *testing.T) {
	t.Parallel()
	ht := startH1(t, echoHandler, func(s *h1.Server) {
		s.IdleTimeout = 100 * time.Millisecond
		s.ReadHeaderTimeout = 100 * time.Millisecond
	})
	for name, req := range map[string]string{
		"idle after a request": "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"slow headers":         "GET / HTTP/1.1\r\nHost: x\r\n",
	} {
		c, br := ht.dial(t)
		io.WriteString(c, req)
		start := time.Now()
		if !strings.HasSuffix(req, "\r\n\r\n") {
			if _, err := br.ReadByte(); err == nil {
				t.Fatalf("%s: got a response", name)
			}
		} else {
			readResp(t, br, "GET")
			if _, err := br.ReadByte(); err == nil {
				t.Fatalf("%s: got more", name)
			}
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s: closed after %v", name, d)
		}
	}
}

func TestH1ClientGoneCancelsContext(t *testing.T) {
	t.Parallel()
	cancelled, started := make(chan struct{}), make(chan struct{})
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(time.Minute):
		}
	}))
	c, _ := ht.dial(t)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	select { // the client leaves while the handler runs
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("handler not started after 30 s")
	}
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("request context not cancelled 30 s after the client left")
	}
}

func TestH1GracefulShutdown(t *testing.T) {
	before := runtime.NumGoroutine()
	started := make(chan struct{})
	release := make(chan struct{})
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "done")
	}))
	// An idle keep-alive connection and one with a request in flight.
	idle, ibr := ht.dial(t)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	readResp(t, ibr, "GET")
	busy, bbr := ht.dial(t)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- ht.srv.Shutdown(ctx)
	}()
	if _, err := ibr.ReadByte(); err == nil {
		t.Fatal("idle connection not closed by Shutdown")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	resp, body := readResp(t, bbr, "GET")
	if body != "done" || !resp.Close {
		t.Fatalf("in-flight request: %q close=%v", body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-ht.done; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := net.Dial("tcp", ht.addr); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
	idle.Close()
	busy.Close()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Shutdown, %d before\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// The header timeout bounds the request head only: a handler that runs
// longer, and a body that arrives slower, are not cut by it.
func TestH1HeaderTimeoutCoversOnlyTheHead(t *testing.T) {
	t.Parallel()
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		select {
		case <-time.After(600 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "done "+string(b))
	}), func(s *h1.Server) { s.ReadHeaderTimeout = 200 * time.Millisecond })
	c, br := ht.dial(t)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
	time.Sleep(400 * time.Millisecond) // the body trickles in past the header timeout
	io.WriteString(c, "cd")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "done abcd" {
		t.Fatalf("got %d %q, want 200 \"done abcd\"", resp.StatusCode, body)
	}
}

// The keep-alive deadline does not carry over into a request: a second
// request on a connection may run longer than IdleTimeout (its client
// watch must not time out and cancel it).
func TestH1IdleTimeoutDoesNotCutRequests(t *testing.T) {
	t.Parallel()
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-time.After(600 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "done")
	}), func(s *h1.Server) { s.IdleTimeout = 200 * time.Millisecond })
	c, br := ht.dial(t)
	for _, path := range []string{"/", "/slow", "/"} {
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, body := readResp(t, br, "GET"); body != "done" {
			t.Fatalf("%s: got %q, want \"done\"", path, body)
		}
	}
	// Then the idle timeout closes it (not the 30 s header timeout).
	start := time.Now()
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("got more")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("idle connection closed after %v", d)
	}
}

// Over TLS, h1.Server serves HTTP/1.1 itself (requests carry the TLS
// state) and closes a connection whose handshake does not arrive within
// ReadHeaderTimeout.
func TestH1ServerTLS(t *testing.T) {
	t.Parallel()
	cfg := selfSigned(t)
	cfg.NextProtos = []string{"h2", "http/1.1"}
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || !r.TLS.HandshakeComplete {
			http.Error(w, "no TLS state", 500)
			return
		}
		io.WriteString(w, r.Proto)
	}), func(s *h1.Server) {
		s.TLSConfig = cfg
		s.ReadHeaderTimeout = 200 * time.Millisecond
	})
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.CloseIdleConnections()
	for range 2 { // the second reuses the connection
		resp, err := (&http.Client{Transport: tr}).Get("https://" + ht.addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "HTTP/1.1" || resp.TLS == nil {
			t.Fatalf("got %d %q", resp.StatusCode, b)
		}
	}
	c, _ := ht.dial(t) // TCP only, no handshake
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("got bytes without a handshake")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("silent connection closed after %v", d)
	}
}

// A connection that never sends a request is closed after
// ReadHeaderTimeout, not kept for IdleTimeout (the keep-alive timeout
// applies between requests only), as net/http does: over cleartext, and
// over TLS after the handshake.
func TestH1SilentConnectionGetsTheHeaderTimeout(t *testing.T) {
	t.Parallel()
	cfg := selfSigned(t)
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			ht := startH1(t, echoHandler, func(s *h1.Server) {
				s.ReadHeaderTimeout = 200 * time.Millisecond
				s.IdleTimeout = time.Hour
				if useTLS {
					s.TLSConfig = cfg
				}
			})
			c, _ := ht.dial(t)
			if useTLS {
				tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
				if err := tc.Handshake(); err != nil {
					t.Fatal(err)
				}
				c = tc
			}
			start := time.Now()
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatal("got bytes without a request")
			} else if isTimeoutErr(err) {
				t.Fatalf("silent connection still open after %v", time.Since(start))
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("silent connection closed after %v", d)
			}
		})
	}
}

// isTimeoutErr reports a net.Error timeout (the test's own deadline).
func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A handler that returns while a goroutine it started still reads the
// request body (as a transport copying it to a backend does when the
// backend answers early) does not leave the connection waiting on the
// client for ever: the unread rest of the body gets the header timeout,
// like any drain, and the connection is closed when it does not come.
func TestH1BodyReaderLeftBehindIsBounded(t *testing.T) {
	t.Parallel()
	reading := make(chan struct{})
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		go func() {
			buf := make([]byte, 4)
			io.ReadFull(r.Body, buf)
			close(reading)
			io.Copy(io.Discard, r.Body) // blocks: the client stalls
		}()
		<-reading
		io.WriteString(w, "early")
	}), func(s *h1.Server) { s.ReadHeaderTimeout = 300 * time.Millisecond })
	c, br := ht.dial(t)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nabcd")
	if _, body := readResp(t, br, "POST"); body != "early" {
		t.Fatalf("body %q", body)
	}
	start := time.Now()
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("got more")
	} else if isTimeoutErr(err) {
		t.Fatalf("connection still open after %v", time.Since(start))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("connection closed after %v", d)
	}
}

// TestH1NilContentTypeSuppressesSniffing: as with net/http, a handler
// that sets Content-Type to nil gets no sniffed Content-Type and no
// Content-Type line; without the entry the first write is sniffed.
func TestH1NilContentTypeSuppressesSniffing(t *testing.T) {
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/nil" {
			w.Header()["Content-Type"] = nil
		}
		io.WriteString(w, "<html></html>")
	}))
	for path, want := range map[string][]string{"/nil": nil, "/sniff": {"text/html; charset=utf-8"}} {
		c, br := ht.dial(t)
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := readResp(t, br, "GET")
		if got := resp.Header["Content-Type"]; body != "<html></html>" || !slices.Equal(got, want) {
			t.Errorf("%s: Content-Type %q body %q, want %q", path, got, body, want)
		}
	}
}

// TestH1SetReadDeadline: http.ResponseController's SetReadDeadline bounds
// the handler's body reads. A read blocked at the deadline fails with
// os.ErrDeadlineExceeded, the handler's answer arrives and the
// connection closes at once (a broken body is not drained, which would
// wait the header timeout for the stalled client); cleared, it no longer
// bounds the reads after it.
func TestH1SetReadDeadline(t *testing.T) {
	cleared := make(chan time.Time, 1)
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		deadline := time.Now().Add(200 * time.Millisecond)
		if err := rc.SetReadDeadline(deadline); err != nil {
			t.Errorf("SetReadDeadline: %v", err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			t.Errorf("reading what the client sent: %v", err)
		}
		if r.URL.Path == "/clear" {
			rc.SetReadDeadline(time.Time{})
			cleared <- deadline
			b, err := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s%s %v", buf, b, err)
			return
		}
		_, err := io.ReadAll(r.Body)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
		}
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestTimeout)
	}), func(s *h1.Server) { s.ReadHeaderTimeout = 30 * time.Second })

	c, br := ht.dial(t)
	io.WriteString(c, "POST /stall HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabcd")
	if resp, _ := readResp(t, br, "POST"); resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	start := time.Now()
	if _, err := br.ReadByte(); err == nil || isTimeoutErr(err) {
		t.Fatalf("after the 408: %v after %v, want the connection closed", err, time.Since(start))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("connection closed %v after the 408, want at once (the header timeout is 30 s)", d)
	}

	c, br = ht.dial(t)
	io.WriteString(c, "POST /clear HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\nabcd")
	deadline := <-cleared
	time.Sleep(time.Until(deadline) + 200*time.Millisecond)
	io.WriteString(c, "efgh")
	if resp, body := readResp(t, br, "POST"); resp.StatusCode != 200 || body != "abcdefgh <nil>" {
		t.Fatalf("after clearing the deadline: %d %q, want 200 \"abcdefgh <nil>\"", resp.StatusCode, body)
	}
}

// A handler that answers 400 with Connection: close to a malformed
// chunked body leaves unread bytes behind; the server must linger so that
// its close does not turn into a reset that destroys the answer (RFC 9112
// §9.6), whether or not the handler asked to close.
func TestH1LingersAfterAnUnreadBody(t *testing.T) {
	ht := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "bad body")
			return
		}
		io.WriteString(w, "ok")
	}))
	for _, tail := range []int{0, 256 << 10} {
		c, br := ht.dial(t)
		req := "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;x\nabc\r\n0\r\n\r\n" + strings.Repeat("j", tail)
		go io.WriteString(c, req)
		resp, body := readResp(t, br, "POST")
		if resp.StatusCode != http.StatusBadRequest || body != "bad body" {
			t.Fatalf("tail %d: got %d %q, want 400", tail, resp.StatusCode, body)
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("tail %d: after the answer: %v, want a clean close (EOF), not a reset", tail, err)
		}
	}
}

// A connection accepted just before Shutdown, whose first request has not
// arrived yet, is not closed as idle: like net/http, Shutdown gives a new
// connection time (5 s) to send its first request, serves it and then
// closes. Closing it at once would reset a request already on its way
// (seen as a lost request in a binary upgrade under load).
func TestH1ShutdownServesANewConnectionsFirstRequest(t *testing.T) {
	accepted := make(chan struct{}, 1)
	ht := startH1(t, echoHandler, func(s *h1.Server) {
		s.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
			accepted <- struct{}{}
			return ctx
		}
	})
	c, br := ht.dial(t)
	<-accepted // the connection is being served before Shutdown runs
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- ht.srv.Shutdown(ctx)
	}()
	time.Sleep(50 * time.Millisecond) // Shutdown has looked at the connections
	io.WriteString(c, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, body := readResp(t, br, "GET")
	if body != "GET /first " || !resp.Close {
		t.Fatalf("first request after Shutdown began: %q close=%v, want it answered and the connection closed", body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
