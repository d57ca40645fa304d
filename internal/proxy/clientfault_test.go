package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientBodyErrorClosesConnection: after a request body the client
// failed to deliver (malformed chunking), the proxy answers 400 with
// "Connection: close" and reads nothing more from the connection, on
// both frontend loops: the bytes after the bad chunk are not a request
// (RFC 9112 §7.1, §8). net/http's server with EnableFullDuplex used to
// read on and forward "GET /smuggled".
func TestClientBodyErrorClosesConnection(t *testing.T) {
	t.Parallel()
	forBothLoops(t, func(t *testing.T, ls labServer) {
		var smuggled atomic.Int32
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/smuggled" {
				smuggled.Add(1)
			}
			io.Copy(io.Discard, r.Body)
		})
		l := newLabServer(t, basic("", "", be.addr()), nil, ls)
		c, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 400 || !resp.Close {
			t.Errorf("status %d close=%v, want 400 with Connection: close", resp.StatusCode, resp.Close)
		}
		if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
			t.Errorf("after the 400: %q, %v; want the connection closed", rest, err)
		}
		if n := smuggled.Load(); n != 0 {
			t.Errorf("the backend got %d smuggled requests", n)
		}
	})
}

// TestCutUploadGetsNoSuccess: a client that half-closes inside its
// upload gets 400 (or no answer), never a success, on both frontend
// loops. On net/http's server the request context ends with the
// half-close; the handler used to write nothing then, and net/http
// answered an implicit 200 (RFC 9112 §8: an incomplete request is not
// treated as complete).
func TestCutUploadGetsNoSuccess(t *testing.T) {
	t.Parallel()
	forBothLoops(t, func(t *testing.T, ls labServer) {
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
		l := newLabServer(t, basic("", "", be.addr()), nil, ls)
		for _, req := range []string{
			"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabcde",
			"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
		} {
			c, err := net.Dial("tcp", l.addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, req)
			time.Sleep(50 * time.Millisecond) // the proxy is forwarding the body
			c.(*net.TCPConn).CloseWrite()
			raw, _ := io.ReadAll(c)
			c.Close()
			if len(raw) > 0 && !strings.HasPrefix(string(raw), "HTTP/1.1 400 ") {
				t.Errorf("%q: got %q, want 400 or nothing", req, raw)
			}
		}
	})
}

// TestStalledUploadIsClientFault: a client that sends part of its body
// and then stalls makes the attempt time out while the proxy waits for
// the client, not the backend: the client gets 408, and the attempt is
// the client's fault (outlier detection and passive health never see
// it), on both frontend loops. The proxy used to answer 504 and count a
// backend timeout.
func TestStalledUploadIsClientFault(t *testing.T) {
	t.Parallel()
	forBothLoops(t, func(t *testing.T, ls labServer) {
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
		l := newLabServer(t, basic("  timeoutSec: 1\n", "", be.addr()), nil, ls)
		c, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nonly ten b")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("status %d, want 408", resp.StatusCode)
		}
		for _, o := range l.observed() {
			if o.BackendSignal() {
				t.Errorf("the stalled upload counted against the backend: %+v", o)
			}
		}
	})
}

// TestUploadDeadlineEndsWithExchange: the read deadline an upload gets
// (the exchange's) does not outlive it: the keep-alive connection takes
// a next request after that deadline has passed, on both loops.
func TestUploadDeadlineEndsWithExchange(t *testing.T) {
	t.Parallel()
	forBothLoops(t, func(t *testing.T, ls labServer) {
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
		l := newLabServer(t, basic("  timeoutSec: 1\n", "", be.addr()), nil, ls)
		c, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		for i, req := range []string{
			"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
			"GET /next HTTP/1.1\r\nHost: x\r\n\r\n",
		} {
			if i == 1 {
				time.Sleep(1500 * time.Millisecond) // past the upload's deadline
			}
			io.WriteString(c, req)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("request %d: status %d", i, resp.StatusCode)
			}
		}
	})
}
