package gslb

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// drainListener is a TCP DNS listener that knows which of the
// connections it accepted have not delivered their first query yet, so
// that a shutdown (or a binary upgrade's handoff) stops accepting, lets
// those queries arrive, and only then cuts the connections: cutting one
// whose query is on its way resets it, which its client counts as a
// failure.
type drainListener struct {
	net.Listener
	mu      sync.Mutex
	waiting map[*firstQueryConn]struct{}
	changed chan struct{} // closed and replaced when waiting shrinks
}

func newDrainListener(ln net.Listener) *drainListener {
	return &drainListener{Listener: ln, waiting: map[*firstQueryConn]struct{}{}, changed: make(chan struct{})}
}

// Accept implements net.Listener.
func (l *drainListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err //nolint:wrapcheck // miekg/dns inspects the listener's errors
	}
	fc := &firstQueryConn{Conn: c, l: l}
	l.mu.Lock()
	l.waiting[fc] = struct{}{}
	l.mu.Unlock()
	return fc, nil
}

// File returns a duplicate of the listening socket (Front.Files).
func (l *drainListener) File() (*os.File, error) {
	f, ok := l.Listener.(interface{ File() (*os.File, error) })
	if !ok {
		return nil, errors.New("gslb: the TCP listener has no file descriptor")
	}
	return f.File() //nolint:wrapcheck
}

// drain closes the listener and waits until every connection it
// accepted has read its first query or closed, or until ctx ends.
func (l *drainListener) drain(ctx context.Context) {
	_ = l.Listener.Close()
	for {
		l.mu.Lock()
		n, ch := len(l.waiting), l.changed
		l.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// firstQueryConn is a connection of a drainListener; firstQueryRead is
// called by the TCP reader once a whole query has been read, and Close.
type firstQueryConn struct {
	net.Conn
	l    *drainListener
	once sync.Once
}

func (c *firstQueryConn) firstQueryRead() {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.waiting, c)
		close(c.l.changed)
		c.l.changed = make(chan struct{})
		c.l.mu.Unlock()
	})
}

// Close implements net.Conn.
func (c *firstQueryConn) Close() error {
	c.firstQueryRead()
	return c.Conn.Close() //nolint:wrapcheck
}

// drainWait bounds how long Serve waits for accepted TCP connections'
// first queries before it shuts down.
const drainWait = 2 * time.Second
