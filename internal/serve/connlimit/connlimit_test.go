package connlimit

import (
	"context"
	"errors"
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

// TryAcquire shares the slots of the listeners' connections without
// waiting; a release gives the slot back once, however often it is
// called; ConnContext releases when the connection's context ends.
func TestTryAcquire(t *testing.T) {
	l := New(2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lln := l.Wrap(ln)
	defer lln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := lln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	release, err := l.TryAcquire()
	if err != nil {
		t.Fatalf("second slot of 2: %v", err)
	}
	if _, err := l.TryAcquire(); !errors.Is(err, ErrFull) {
		t.Fatalf("third slot of 2: %v, want ErrFull", err)
	}
	release()
	release()
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := l.ConnContext(ctx); err != nil {
		t.Fatalf("slot after a release: %v", err)
	}
	if _, err := l.ConnContext(context.Background()); !errors.Is(err, ErrFull) {
		t.Fatalf("ConnContext past the limit: %v, want ErrFull (released twice must free one slot)", err)
	}
	if l.Active() != 2 || l.Accepted() != 3 {
		t.Errorf("active %d accepted %d, want 2 and 3", l.Active(), l.Accepted())
	}
	cancel()
	sc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for l.Active() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l.Active() != 0 {
		t.Fatalf("active %d after every connection ended, want 0", l.Active())
	}
	var none *Limiter
	if r, err := none.TryAcquire(); err != nil || r == nil {
		t.Errorf("nil Limiter TryAcquire: %v", err)
	}
}
