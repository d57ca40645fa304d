package proxy_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientGoneCancelsBackendRequest: a client that disconnects while
// the backend is still working has its backend request aborted (the
// backend sees its connection close), not held until the timeout.
func TestClientGoneCancelsBackendRequest(t *testing.T) {
	t.Parallel()
	aborted := make(chan time.Duration, 1)
	var started atomic.Int32
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		start := time.Now()
		select {
		case <-r.Context().Done():
			aborted <- time.Since(start)
		case <-time.After(10 * time.Second):
			aborted <- -1
		}
	})
	l := newLab(t, basic("", "", be.addr()), nil)
	for _, wait := range []time.Duration{20 * time.Millisecond, 300 * time.Millisecond} {
		before := started.Load()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		req, _ := http.NewRequestWithContext(ctx, "GET", l.url+"/slow", nil)
		if resp, err := l.client.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("client gone after %v: got a response", wait)
		}
		cancel()
		select {
		case d := <-aborted:
			if d < 0 {
				t.Fatalf("client gone after %v: backend request not aborted", wait)
			}
		case <-time.After(5 * time.Second):
			// On a loaded machine the client may be gone before the
			// proxy forwarded the request: nothing reached the backend,
			// so there is nothing to abort. A request that did reach it
			// must be aborted.
			if started.Load() == before {
				continue
			}
			select {
			case d := <-aborted:
				if d < 0 {
					t.Fatalf("client gone after %v: backend request not aborted", wait)
				}
			case <-time.After(25 * time.Second):
				t.Fatalf("client gone after %v: backend request not aborted after 30 s", wait)
			}
		}
	}
}

// TestBodylessResponsesKeepTheConnection: HEAD, 204, 304 and
// Content-Length responses are framed correctly, so one backend
// connection carries them all in sequence.
func TestBodylessResponsesKeepTheConnection(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{} // client addresses seen by the backend
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.Header().Set("ETag", `"x"`)
			w.WriteHeader(http.StatusNotModified)
		case "/chunked":
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
			w.Write([]byte("b"))
		default:
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		}
	})
	l := newLab(t, basic("", "", be.addr()), nil)
	for i, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"HEAD", "/", 200, ""},
		{"GET", "/204", 204, ""},
		{"GET", "/304", 304, ""},
		{"GET", "/", 200, "hello"},
		{"HEAD", "/chunked", 200, ""},
		{"GET", "/chunked", 200, "ab"},
		{"DELETE", "/", 200, "hello"},
		{"GET", "/", 200, "hello"},
	} {
		req, _ := http.NewRequest(tc.method, l.url+tc.path, nil)
		resp, body := l.do(req)
		if resp.StatusCode != tc.code || body != tc.body {
			t.Errorf("%d: %s %s: %d %q, want %d %q", i, tc.method, tc.path, resp.StatusCode, body, tc.code, tc.body)
		}
		if tc.method == "HEAD" && tc.path == "/" && resp.ContentLength != 5 {
			t.Errorf("HEAD: Content-Length %d, want 5", resp.ContentLength)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(conns); n != 1 {
		t.Errorf("%d backend connections, want 1", n)
	}
}
