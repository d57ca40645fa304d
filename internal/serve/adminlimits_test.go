package serve_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/admin"
)

// healthzOn sends GET /healthz on c and returns the status, or an error
// when no response arrives within timeout.
func healthzOn(c net.Conn, timeout time.Duration) (int, error) {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// readUntilClosed reads c until the server closes it and returns what it
// read; an error means c was still open after wait.
func readUntilClosed(c net.Conn, wait time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(wait))
	var b strings.Builder
	_, err := io.Copy(&b, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return b.String(), err
	}
	return b.String(), nil // EOF or a reset: closed
}

// The admin listener closes connections that sit idle, that never finish
// their request head, or that never finish a request body (issue 17,
// defect 8: it kept idle connections forever).
func TestAdminConnectionTimeouts(t *testing.T) {
	s := adminServer(t, serve.Options{Admin: "127.0.0.1:0", AdminLimits: admin.Limits{
		IdleTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
	}})
	addr := strings.TrimPrefix(adminURL(s), "http://")
	tests := []struct {
		name, send, wantPrefix string
	}{
		{"idle after a response", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "HTTP/1.1 200"},
		{"head never finished", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", ""},
		{"body never finished", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc", ""},
		{"nothing sent", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tt.send)
			got, err := readUntilClosed(c, 5*time.Second)
			if err != nil {
				t.Fatalf("the admin connection is still open 5 s later (timeouts 300 ms); read %q", got)
			}
			if !strings.HasPrefix(got, tt.wantPrefix) {
				t.Fatalf("read %q before the close, want it to start with %q", got, tt.wantPrefix)
			}
		})
	}
}

// The admin listener has a connection budget of its own: past it, new
// admin connections wait in the accept queue; a saturated data plane does
// not keep operators out, and the admin connections do not count against
// --max-connections.
func TestAdminConnectionCap(t *testing.T) {
	s := adminServer(t, serve.Options{Admin: "127.0.0.1:0", MaxConnections: 1, AdminLimits: admin.Limits{MaxConnections: 2}})
	admin := strings.TrimPrefix(adminURL(s), "http://")
	dial := func(addr string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The data plane's one slot is taken; a second data connection waits.
	data := dial(s.FrontendAddr("fe"))
	if got := get(t, data, 5*time.Second); got != "A" {
		t.Fatalf("data connection: %q", got)
	}
	waiting := dial(s.FrontendAddr("fe"))
	io.WriteString(waiting, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	waiting.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := waiting.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("a second data connection was served past MaxConnections 1 (read %d, %v)", n, err)
	}
	// The admin API still answers, on two connections.
	var held []net.Conn
	for i := range 2 {
		c := dial(admin)
		if code, err := healthzOn(c, 5*time.Second); err != nil || code != 200 {
			t.Fatalf("admin connection %d with the data plane full: %d, %v", i, code, err)
		}
		held = append(held, c)
	}
	// A third admin connection waits until one of the two closes.
	extra := dial(admin)
	if code, err := healthzOn(extra, 300*time.Millisecond); err == nil {
		t.Fatalf("a third admin connection was served past the admin cap of 2 (status %d)", code)
	}
	held[0].Close()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil {
		t.Fatalf("third admin connection after one closed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("third admin connection: status %d", resp.StatusCode)
	}
}

// pprof's profile and trace outlast the admin read and write timeouts by
// their duration; a duration over an hour is refused.
func TestAdminPprofOutlastsTimeouts(t *testing.T) {
	s := adminServer(t, serve.Options{Admin: "127.0.0.1:0", Pprof: true, AdminLimits: admin.Limits{
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond,
	}})
	cl := &http.Client{Timeout: 20 * time.Second}
	tests := []struct {
		path    string
		want    int
		minTime time.Duration
	}{
		{"/debug/pprof/profile?seconds=1", 200, 900 * time.Millisecond},
		{"/debug/pprof/trace?seconds=1", 200, 900 * time.Millisecond},
		{"/debug/pprof/heap", 200, 0},
		{"/debug/pprof/profile?seconds=7200", 400, 0},
		{"/debug/pprof/trace?seconds=3601", 400, 0},
	}
	for _, tt := range tests {
		start := time.Now()
		resp, err := cl.Get(adminURL(s) + tt.path)
		if err != nil {
			t.Errorf("GET %s: %v", tt.path, err)
			continue
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		switch {
		case err != nil:
			t.Errorf("GET %s: body after %d bytes: %v", tt.path, n, err)
		case resp.StatusCode != tt.want:
			t.Errorf("GET %s: status %d, want %d", tt.path, resp.StatusCode, tt.want)
		case tt.want == 200 && n == 0:
			t.Errorf("GET %s: empty body", tt.path)
		case took < tt.minTime:
			t.Errorf("GET %s: done in %v, want at least %v (cut short by a timeout?)", tt.path, took, tt.minTime)
		}
	}
}

// The admin listener refuses request heads over 32 KiB with 431 (net/http's
// default would take 1 MiB), and GET /healthz tells only liveness.
func TestAdminHeadLimitAndHealthz(t *testing.T) {
	s := adminServer(t, serve.Options{Admin: "0.0.0.0:0", AdminToken: testToken})
	req, err := http.NewRequest("GET", adminURL(s)+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 64 KiB header: status %d, want 431", resp.StatusCode)
	}
	resp, err = http.Get(adminURL(s) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok\n" {
		t.Errorf("GET /healthz without a token on a non-loopback listener: %d %q, want 200 \"ok\\n\"", resp.StatusCode, b)
	}
	for k := range resp.Header {
		if k != "Content-Type" && k != "Content-Length" && k != "Date" {
			t.Errorf("GET /healthz answered header %s: %q; it should tell liveness only", k, resp.Header.Get(k))
		}
	}
}
