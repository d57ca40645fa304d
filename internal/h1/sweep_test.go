package h1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A sweep closes connections idle past BackendIdleTimeout and forgets
// pools unused that long (a backend removed by a reload), and the
// transport keeps working after it.
func TestSweepClosesIdleAndForgetsPools(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						closed <- struct{}{} // the proxy side closed (EOF)
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	tr := NewTransport(nil)
	get := func() {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+ln.Addr().String()+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	get()
	addr := ln.Addr().String()
	if _, ok := tr.pools.Load(addr); !ok {
		t.Fatal("no pool after a request")
	}
	tr.sweep(time.Now()) // nothing is old yet
	if _, ok := tr.pools.Load(addr); !ok {
		t.Fatal("a fresh pool was swept")
	}
	tr.sweep(time.Now().Add(BackendIdleTimeout + time.Second))
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection was not closed by the sweep")
	}
	if _, ok := tr.pools.Load(addr); ok {
		t.Fatal("the unused pool was kept")
	}
	get() // a new pool and connection
	if _, ok := tr.pools.Load(addr); !ok {
		t.Fatal("no pool after the sweep and a new request")
	}
}
