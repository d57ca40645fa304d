package h1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// replayConn is a connection whose first bytes were already read: a
// copy of them, so that the connection's buffers go back to the pool at
// the hand-off rather than live as long as the HTTP/2 connection.
type replayConn struct {
	net.Conn
	pend   []byte
	opened time.Time // when its first-request header timeout started, if known
}

// newReplayConn returns rwc with br's buffered bytes (copied) in front.
func newReplayConn(rwc net.Conn, br *bufio.Reader, opened time.Time) *replayConn {
	pend, _ := br.Peek(br.Buffered())
	return &replayConn{Conn: rwc, pend: bytes.Clone(pend), opened: opened}
}

// h2Opened tells WatchH2 when the connection's first request began to
// be awaited.
func (c *replayConn) h2Opened() time.Time { return c.opened }

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pend) > 0 {
		n := copy(p, c.pend)
		if c.pend = c.pend[n:]; len(c.pend) == 0 {
			c.pend = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// chanListener is a net.Listener fed with connections by push: it hands
// h2c connections to an *http.Server.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), closed: make(chan struct{})}
}

// push hands c to Accept, or closes it if the listener is closed.
func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// Compile-time interface checks.
var (
	_ http.Flusher  = (*h1response)(nil)
	_ http.Hijacker = (*h1response)(nil)
	_ io.Reader     = (*h1source)(nil)
)
