package h1

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// parkServer serves the request path on a Server that parks connections
// idle for 50 ms, with idle timeout idle and the header timeout given
// (0: the default).
func parkServer(t *testing.T, idle, header time.Duration) (*Server, string) {
	t.Helper()
	s := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path)
	}))
	s.ParkAfter, s.IdleTimeout = 50*time.Millisecond, idle
	if header > 0 {
		s.ReadHeaderTimeout = header
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

// roundTrip sends GET path on c and checks the answer.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, path string) {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	expectBody(t, br, path)
}

// dialKeepAlive opens a client connection to addr, closed when the test
// ends, with a 30 s deadline.
func dialKeepAlive(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

// expectBody reads a response from br and checks its body.
func expectBody(t *testing.T, br *bufio.Reader, want string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
}

// waitUntil polls cond every millisecond for up to 20 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after 20 s: %s", what)
		}
	}
}

func (s *Server) tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Keep-alive connections idle for ParkAfter hold no goroutine, and carry
// their next requests (one, then two pipelined) as before.
func TestIdleConnectionsPark(t *testing.T) {
	s, addr := parkServer(t, time.Minute, 0)
	const n = 20
	before := runtime.NumGoroutine()
	conns := make([]net.Conn, n)
	brs := make([]*bufio.Reader, n)
	for i := range conns {
		conns[i], brs[i] = dialKeepAlive(t, addr)
		roundTrip(t, conns[i], brs[i], fmt.Sprintf("/first/%d", i))
	}
	waitUntil(t, "not every connection parked", func() bool { return s.Parked() == n })
	// The lot's goroutine is the only one added; each connection's ended.
	if g := runtime.NumGoroutine(); g > before+3 {
		t.Errorf("%d goroutines with %d connections parked, %d before they opened", g, n, before)
	}
	for i, c := range conns {
		roundTrip(t, c, brs[i], fmt.Sprintf("/second/%d", i))
	}
	waitUntil(t, "not every connection parked again", func() bool { return s.Parked() == n })
	c, br := conns[0], brs[0]
	io.WriteString(c, "GET /p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\n\r\n")
	expectBody(t, br, "/p1")
	expectBody(t, br, "/p2")
	if s.tracked() != n {
		t.Errorf("server tracks %d connections, want %d", s.tracked(), n)
	}
}

// A parked connection is closed at its idle deadline, and one whose
// client closes it is woken and forgotten.
func TestParkedConnectionsEnd(t *testing.T) {
	s, addr := parkServer(t, 400*time.Millisecond, 0)
	idle, idleBR := dialKeepAlive(t, addr)
	roundTrip(t, idle, idleBR, "/idle")
	gone, goneBR := dialKeepAlive(t, addr)
	roundTrip(t, gone, goneBR, "/gone")
	waitUntil(t, "the connections did not park", func() bool { return s.Parked() == 2 })
	gone.Close()
	waitUntil(t, "the closed connection is still tracked", func() bool { return s.tracked() <= 1 })
	// The idle one: the server closes it (EOF) once its 400 ms are up.
	if n, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on the idle connection: %d, %v; want EOF from the idle timeout", n, err)
	}
	waitUntil(t, "the timed-out connection is still tracked", func() bool { return s.tracked() == 0 })
	if p := s.Parked(); p != 0 {
		t.Errorf("%d still parked", p)
	}
}

// Shutdown closes parked connections (they are idle) and returns.
func TestShutdownClosesParkedConnections(t *testing.T) {
	s, addr := parkServer(t, time.Minute, 0)
	c, br := dialKeepAlive(t, addr)
	roundTrip(t, c, br, "/a")
	waitUntil(t, "the connection did not park", func() bool { return s.Parked() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after Shutdown: %d, %v; want EOF", n, err)
	}
}

// A new connection that sends nothing holds no buffers and, after
// ParkAfter, no goroutine, and is closed at the header timeout.
func TestSilentConnectionParks(t *testing.T) {
	// pooled looks into the pool, which a collection empties.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	s, addr := parkServer(t, time.Minute, 2*time.Second)
	c, _ := dialKeepAlive(t, addr)
	waitUntil(t, "the silent connection did not park", func() bool { return s.Parked() == 1 })
	if !raceEnabled {
		// A set put back by another P may take a few tries to see.
		waitUntil(t, "the silent connection holds its buffers", s.pooled)
	}
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on the silent connection: %d, %v; want EOF from the header timeout", n, err)
	}
}
