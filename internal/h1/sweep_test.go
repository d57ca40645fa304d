package h1

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1/h1test"
)

// A sweep closes connections idle past BackendIdleTimeout and forgets
// pools unused that long (a backend removed by a reload), and the
// transport keeps working after it.
func TestSweepClosesIdleAndForgetsPools(t *testing.T) {
	closed := make(chan struct{}, 4)
	addr := h1test.RawBackend(t, func(c net.Conn, _ *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	}, h1test.WithDeadline(0), h1test.OnReadError(func(error) {
		closed <- struct{}{} // the proxy side closed (EOF)
	}))
	tr := NewTransport(nil)
	get := func() {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+addr+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	get()
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
