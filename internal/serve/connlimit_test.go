package serve_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// MaxConnections bounds the client connections of all frontends
// together: past the limit a connection waits in the kernel's accept
// queue until another closes, on both HTTP/1.1 server loops.
func TestMaxConnections(t *testing.T) {
	for _, loop := range []string{"SPILLWAY", "NET_HTTP"} {
		t.Run(loop, func(t *testing.T) {
			be := startBackend(t, "A")
			fe := `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`
			y := oneServiceYAML(be.addr, fe, "") + "spillway: {http1Server: " + loop + "}\n"
			s := servetest.Run(t, servetest.Parse(t, y), serve.Options{WatchInterval: -1, MaxConnections: 3})
			addr := s.FrontendAddr("fe")
			var held []net.Conn
			for range 3 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				held = append(held, c)
			}
			// Make sure all three were accepted: each answers a request.
			for i, c := range held {
				if got := get(t, c, 5*time.Second); got != "A" {
					t.Fatalf("held connection %d: %q", i, got)
				}
			}
			extra, err := net.Dial("tcp", addr) // the kernel completes the handshake
			if err != nil {
				t.Fatal(err)
			}
			defer extra.Close()
			io.WriteString(extra, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			extra.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if n, err := extra.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Fatalf("a fourth connection was served past MaxConnections 3 (read %d, %v)", n, err)
			}
			held[0].Close()
			extra.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
			if err != nil {
				t.Fatalf("fourth connection after one closed: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("fourth connection: status %d", resp.StatusCode)
			}
		})
	}
}

// get sends one GET on c and returns the body.
func get(t *testing.T, c net.Conn, timeout time.Duration) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
