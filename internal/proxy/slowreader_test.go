package proxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestSlowReadersDoNotOutliveTheTimeout: clients that ask for a large
// response and never read it are cut off when the exchange timeout
// (timeoutSec) expires, as it does while reading from the backend: their
// connections are closed, the backend connections released, and the
// goroutines serving them end. (Writing to the client had no deadline, so
// they stayed until the client left.)
func TestSlowReadersDoNotOutliveTheTimeout(t *testing.T) {
	// Not parallel, nor its subtests: it counts the process's goroutines.
	forBothLoopsInTurn(t, testSlowReaders)
}

// serverLoops are the frontend's HTTP/1.1 server loops: h1.Server, and
// net/http's server (what SPILLWAY_TEST_HTTP1_SERVER=NET_HTTP selects
// for the labs of the other tests).
var serverLoops = []struct {
	name string
	ls   labServer
}{{"SPILLWAY", labServer{}}, {"NET_HTTP", labServer{netHTTP: true}}}

// forBothLoops runs test with labs on each server loop, in parallel
// subtests; test makes its labs with ls.
func forBothLoops(t *testing.T, test func(t *testing.T, ls labServer)) {
	for _, loop := range serverLoops {
		t.Run(loop.name, func(t *testing.T) {
			t.Parallel()
			test(t, loop.ls)
		})
	}
}

// forBothLoopsInTurn is forBothLoops for a test that must run alone.
func forBothLoopsInTurn(t *testing.T, test func(t *testing.T, ls labServer)) {
	for _, loop := range serverLoops {
		t.Run(loop.name, func(t *testing.T) { test(t, loop.ls) })
	}
}

func testSlowReaders(t *testing.T, ls labServer) {
	const clients, size = 10, 50 << 20
	released := make(chan struct{}, clients)
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		buf := make([]byte, 32<<10)
		for n := 0; n < size; n += len(buf) {
			if _, err := w.Write(buf); err != nil {
				released <- struct{}{} // the proxy let go of this connection
				return
			}
		}
	})
	l := newLabServer(t, basic("  timeoutSec: 1\n", "", be.addr()), nil, ls)
	before := settledGoroutines()

	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	// The backend connections are released soon after the 1 s timeout.
	deadline := time.After(15 * time.Second)
	for i := range clients {
		select {
		case <-released:
		case <-deadline:
			t.Fatalf("%d of %d backend connections still busy 15 s after a 1 s timeout", clients-i, clients)
		}
	}
	// The client connections were closed part way: reading them now ends
	// (EOF or reset) well short of the body.
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := io.Copy(io.Discard, c)
		if errors.Is(err, os.ErrDeadlineExceeded) || n >= size {
			t.Fatalf("client %d: read %d bytes, err %v; want the connection closed short of %d bytes", i, n, err, size)
		}
	}
	// And the goroutines that served them are gone.
	var n int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= before+2 {
			return
		}
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("%d goroutines, %d before the slow readers\n%s", n, before, buf[:runtime.Stack(buf, true)])
}

// TestWriteDeadlineEndsWithTheResponse: the exchange deadline that bounds
// writing a response does not carry over to the next request on the
// connection, which may come after it has passed: neither to a proxied
// one nor to one the server answers itself (a 400).
func TestWriteDeadlineEndsWithTheResponse(t *testing.T) {
	t.Parallel()
	forBothLoops(t, func(t *testing.T, ls labServer) {
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok "+r.URL.Path) })
		l := newLabServer(t, basic("  timeoutSec: 1\n", "", be.addr()), nil, ls)
		c, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(c)
		for i, path := range []string{"/1", "/2", "/no-host"} {
			if i > 0 {
				time.Sleep(1500 * time.Millisecond) // past the previous exchange's deadline
			}
			host, want, wantBody := "Host: x\r\n", 200, "ok "+path
			if path == "/no-host" {
				host, want, wantBody = "", 400, ""
			}
			io.WriteString(c, "GET "+path+" HTTP/1.1\r\n"+host+"\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != want || (wantBody != "" && string(b) != wantBody) {
				t.Fatalf("%s: %d %q %v, want %d %q", path, resp.StatusCode, b, err, want, wantBody)
			}
		}
	})
}
