package connlimit

import (
	"net"
	"testing"
	"time"
)

// Past the limit, Accept waits until a connection closes; a nil Limiter
// does not wrap.
func TestLimiterQueuesPastLimit(t *testing.T) {
	if New(0) != nil {
		t.Fatal("New(0): want nil (no limit)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if New(0).Wrap(ln) != ln {
		t.Fatal("a nil Limiter wrapped the listener")
	}
	lln := New(1).Wrap(ln)
	defer lln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := lln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first := <-accepted
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted past the limit of 1")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting connection was not accepted after the first closed")
	}
}
