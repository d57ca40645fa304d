package h1_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/h1/h1test"
)

// countingServer starts a test backend that counts the connections it
// accepts.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	conns := new(atomic.Int32)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, conns
}

func TestFastTransport(t *testing.T) {
	t.Parallel()
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
			w.Write([]byte("b"))
		case "/early-hints":
			w.Header().Set("Link", "</x.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Write([]byte("final"))
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		default:
			w.Write([]byte("ok " + r.Method))
		}
	})
	rt := h1.NewTransport(nil)
	get := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), method, srv.URL+path, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/", "ok GET"},
		{"GET", "/chunked", "ab"},
		{"GET", "/early-hints", "final"},
		{"HEAD", "/", ""},
		{"GET", "/", "ok GET"},
	} {
		if code, body := get(tc.method, tc.path); code != 200 || body != tc.want {
			t.Errorf("%s %s: %d %q, want 200 %q", tc.method, tc.path, code, body, tc.want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d backend connections for 5 sequential requests, want 1 (keep-alive reuse)", n)
	}
	// Connection: close is honoured: the next request dials again.
	get("GET", "/close")
	get("GET", "/")
	if n := conns.Load(); n != 2 {
		t.Errorf("after Connection: close: %d connections, want 2", n)
	}
	// The backend drops idle connections: the next request is retried
	// on a fresh connection, invisibly.
	srv.CloseClientConnections()
	time.Sleep(50 * time.Millisecond)
	if code, body := get("GET", "/"); code != 200 || body != "ok GET" {
		t.Errorf("after the backend closed idle connections: %d %q", code, body)
	}
	// A cancelled context aborts a request in flight.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // until the aborted request's connection closes
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	defer slow.Close()
	req, _ := http.NewRequestWithContext(ctx, "GET", slow.URL, nil)
	start := time.Now()
	if _, err := rt.RoundTrip(req); err == nil {
		t.Error("a request past its deadline succeeded")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("50 ms deadline not honoured: %v (the backend holds 30 s)", d)
	}
}

// Review findings, each on a real backend.
func TestFastTransportSafety(t *testing.T) {
	t.Parallel()
	// A backend that sends a body after a 204 (unsolicited bytes): the
	// idle connection must not hand them to the next request.
	var posts atomic.Int32
	junkSent := make(chan struct{}, 1)
	addr := h1test.RawBackend(t, func(c net.Conn, req *http.Request) bool {
		switch req.URL.Path {
		case "/204-then-junk":
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nSECRET")
			junkSent <- struct{}{}
		case "/post-then-die":
			posts.Add(1)
			return false // processed, then the connection dies
		case "/early-hints":
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n")
			time.Sleep(300 * time.Millisecond)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")
		default:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		return true
	})
	rt := h1.NewTransport(nil)
	base := "http://" + addr
	do := func(method, path string) (string, error) {
		req, _ := http.NewRequestWithContext(context.Background(), method, base+path, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b), nil
	}
	if _, err := do("GET", "/204-then-junk"); err != nil {
		t.Fatal(err)
	}
	select { // the unsolicited bytes are on the idle connection
	case <-junkSent:
	case <-time.After(30 * time.Second):
		t.Fatal("the backend did not send its unsolicited bytes in 30 s")
	}
	if body, err := do("GET", "/b"); err != nil || body != "ok" {
		t.Errorf("after a backend sent unsolicited bytes: %q %v, want \"ok\" from a fresh connection", body, err)
	}
	// A body-less POST that reached the backend is not sent again when
	// the pooled connection dies under it.
	do("GET", "/warm")
	if _, err := do("POST", "/post-then-die"); err == nil {
		t.Error("a POST on a connection that died got an answer")
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("the backend saw the POST %d times, want 1", n)
	}
	// 103 Early Hints, then the final response 300 ms later: not a timeout.
	req, _ := http.NewRequestWithContext(context.Background(), "GET", base+"/early-hints", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("early hints: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "final" {
		t.Errorf("early hints: %q", b)
	}
}

// A pooled connection whose probe deadline expired while it sat idle is
// still reused: the idle check does not trip over the old deadline.
func TestFastTransportReusesAfterIdleDeadline(t *testing.T) {
	t.Parallel()
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	})
	rt := h1.NewTransport(nil)
	ctx, cancel := context.WithCancel(context.Background()) // watched: probe deadlines
	defer cancel()
	for i := range 3 {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		time.Sleep(250 * time.Millisecond) // past the 100 ms probe deadline
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d backend connections for 3 requests with idle pauses, want 1", n)
	}
}

// Response heads of every shape the fast transport now waits for whole:
// split over writes, bare LF line ends, around its 16 KiB buffer, and
// the body arriving with or after the head.
func TestFastTransportResponseHeadShapes(t *testing.T) {
	t.Parallel()
	fill := func(n int) string { // header fields of about n bytes
		var b strings.Builder
		for b.Len() < n {
			b.WriteString("X-F: " + strings.Repeat("f", 90) + "\r\n")
		}
		return b.String()
	}
	cases := map[string][]string{
		"split":        {"HTTP/1.1 200 OK\r\nContent-Le", "ngth: 2\r\n", "\r", "\nok"},
		"bare-lf":      {"HTTP/1.1 200 OK\nContent-Length: 2\nX-A: b\n\nok"},
		"lf-then-crlf": {"HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nok"},
		"16k-minus":    {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + fill(16<<10-200) + "\r\nok"},
		"16k-plus":     {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + fill(16<<10+10) + "\r\nok"},
		"body-later":   {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + fill(20<<10) + "\r\n", "o", "k"},
		"chunked-big":  {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" + fill(40<<10) + "\r\n1\r\no\r\n1\r\nk\r\n0\r\n\r\n"},
	}
	for name, parts := range cases {
		t.Run(name, func(t *testing.T) {
			addr := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
				for _, p := range parts {
					io.WriteString(c, p)
					time.Sleep(5 * time.Millisecond)
				}
				return true
			})
			rt := h1.NewTransport(nil)
			for i := range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					cancel()
					t.Fatalf("request %d: %v", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				cancel()
				if err != nil || string(b) != "ok" || resp.StatusCode != 200 {
					t.Errorf("request %d: %d %q %v, want 200 \"ok\"", i, resp.StatusCode, b, err)
				}
			}
		})
	}
}
