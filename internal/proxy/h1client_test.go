package proxy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/proxy"
)

func TestFastTransport(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	rt := proxy.NewFastTransport(nil)
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
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Second) }))
	defer slow.Close()
	req, _ := http.NewRequestWithContext(ctx, "GET", slow.URL, nil)
	start := time.Now()
	if _, err := rt.RoundTrip(req); err == nil {
		t.Error("a request past its deadline succeeded")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("deadline not honoured: %v", d)
	}
}
