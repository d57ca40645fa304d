package h2

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"
)

// goroutineID is the current goroutine's number, from its stack
// header ("goroutine 42 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	if len(f) < 2 {
		return ""
	}
	return string(f[1])
}

// startH2C serves h with s on a loopback listener and returns an h2c
// client for it.
func startH2C(t *testing.T, s *Server, h http.Handler) (*http.Client, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.ServeConn(c, ServeConnOpts{Handler: h})
		}
	}()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}, "http://" + ln.Addr().String()
}

// Streams served one after another run on the same goroutine (its
// stack already grown), a panicking handler does not take its worker's
// successors down, and parked workers end after workerIdleTimeout.
func TestWorkersAreReused(t *testing.T) {
	s := &Server{}
	var mu sync.Mutex
	seen := map[string]int{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[goroutineID()]++
		mu.Unlock()
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, "ok")
	})
	client, base := startH2C(t, s, h)
	get := func(path string) error {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	const n = 20
	for i := range n {
		path := "/"
		if i == n/2 {
			path = "/panic"
		}
		if err := get(path); err != nil && path == "/" {
			t.Fatalf("request %d: %v", i, err)
		}
		// The worker parks after its handler returns, a moment after
		// the answer: wait for it (bounded) so the next stream finds it.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			s.workers.mu.Lock()
			parked := len(s.workers.idle)
			s.workers.mu.Unlock()
			if parked > 0 {
				break
			}
		}
	}
	mu.Lock()
	goroutines := len(seen)
	mu.Unlock()
	if goroutines != 1 {
		t.Fatalf("%d sequential streams ran on %d goroutines, want 1: %v", n, goroutines, seen)
	}
	deadline := time.Now().Add(workerIdleTimeout + 10*time.Second)
	for {
		s.workers.mu.Lock()
		parked := len(s.workers.idle)
		s.workers.mu.Unlock()
		if parked == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still parked %v after the last stream", parked, workerIdleTimeout+10*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The pool keeps at most maxIdleWorkers parked: the workers of a burst
// beyond that end when their streams do.
func TestWorkersBounded(t *testing.T) {
	var p workerPool
	var ws []*worker
	for range maxIdleWorkers + 5 {
		w := &worker{next: make(chan *stream, 1)}
		if p.park(w) {
			ws = append(ws, w)
		}
	}
	if len(ws) != maxIdleWorkers || len(p.idle) != maxIdleWorkers {
		t.Fatalf("parked %d (idle %d), want %d", len(ws), len(p.idle), maxIdleWorkers)
	}
	// Reaping ends every one of them (they were all parked long ago).
	for _, w := range ws {
		w.parked = time.Now().Add(-workerIdleTimeout)
	}
	p.reapIdle()
	for i, w := range ws {
		select {
		case st := <-w.next:
			if st != nil {
				t.Fatalf("worker %d got a stream", i)
			}
		default:
			t.Fatalf("worker %d not told to end", i)
		}
	}
	if len(p.idle) != 0 {
		t.Fatalf("%d idle after reaping", len(p.idle))
	}
	p.reap.Stop()
}
