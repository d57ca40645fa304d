package probe_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/probe"
)

// waitFor polls cond every 5ms until it holds or 30s pass. Timing never
// decides pass/fail beyond that generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listen returns a TCP listener on 127.0.0.1 that is closed at cleanup.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// tcpServer serves each accepted connection with handle (which need not
// close it) and returns the listener's address. Cleanup closes the listener
// and waits for the handlers.
func tcpServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln := listen(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				handle(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// quiet silences the "http: TLS handshake error" lines that probes which
// hang up on purpose make an unstarted httptest server log.
func quiet(srv *httptest.Server) *httptest.Server {
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	return srv
}

// refusedAddr returns a 127.0.0.1 address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// proxyV1Listener wraps a listener and requires every connection to start
// with the PROXY v1 header a PROXY_V1 probe sends, stripping it before the
// server sees the stream. Connections without it are closed and counted.
type proxyV1Listener struct {
	net.Listener
	missing atomic.Int32
}

func (l *proxyV1Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		_ = c.SetReadDeadline(time.Time{})
		if err != nil || line != "PROXY UNKNOWN\r\n" {
			l.missing.Add(1)
			c.Close()
			continue
		}
		return &bufferedConn{Conn: c, r: br}, nil
	}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// recorder collects reported Results; its record method is a valid report
// function (fast and goroutine-safe).
type recorder struct {
	mu      sync.Mutex
	results []probe.Result
}

func (r *recorder) record(res probe.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
}

func (r *recorder) snapshot() []probe.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]probe.Result(nil), r.results...)
}

// count returns how many results for target satisfy keep (nil: all).
func (r *recorder) count(target probe.Target, keep func(probe.Result) bool) int {
	n := 0
	for _, res := range r.snapshot() {
		if res.Target == target && (keep == nil || keep(res)) {
			n++
		}
	}
	return n
}

// startRun runs p in the background; the returned stop cancels Run, waits
// for it (5s at most) and fails the test if it returned an error.
func startRun(t *testing.T, p *probe.Prober) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("Run() = %v, want nil", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("Run did not return within 5s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// hasAll reports whether s contains every one of subs; for error messages
// it returns a description of the first missing one.
func hasAll(s string, subs ...string) error {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return fmt.Errorf("%q does not contain %q", s, sub)
		}
	}
	return nil
}
