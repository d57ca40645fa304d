package h1

import (
	"net"
	"sync"
	"sync/atomic"
)

// SniffConn wraps an HTTP/1.1 connection that a net/http Transport
// dials (in its DialContext or DialTLSContext, above TLS) so that a
// Transport using that net/http Transport as its fallback can read a
// response's Connection header even after http.ReadResponse deleted it
// (net/http deletes "Connection: close"), and strip what it lists. Unarmed,
// its Read costs one atomic load more than c's.
func SniffConn(c net.Conn) net.Conn { return &sniffConn{Conn: c} }

// sniffConn is an HTTP/1.1 backend connection of a net/http Transport
// that keeps a copy of the head of the response it is armed for (arm, in
// a GotConn trace hook), so that the response's Connection header can be
// read even after http.ReadResponse deleted it. The copy stops at the
// first final (non-1xx) head, or at MaxResponseHeaderBytes (where the
// Transport gives up on the response anyway). Unarmed, Read costs one
// atomic load.
type sniffConn struct {
	net.Conn
	armed atomic.Bool
	mu    sync.Mutex
	buf   []byte   // the heads read since arm, 1xx ones dropped
	from  int      // where headLen resumes in buf (see headLen)
	conn  []string // the final head's Connection values
	te10  bool     // the final head is HTTP/1.0 with Transfer-Encoding
	done  bool     // the final head is complete
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.armed.Load() {
		c.capture(p[:n])
	}
	return n, err
}

// arm starts a copy of the next response head.
func (c *sniffConn) arm() {
	c.mu.Lock()
	c.buf = c.buf[:0]
	if cap(c.buf) > 16<<10 {
		c.buf = nil // do not keep a large head's buffer on an idle connection
	}
	c.from, c.conn, c.te10, c.done = 0, nil, false, false
	c.mu.Unlock()
	c.armed.Store(true)
}

func (c *sniffConn) capture(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	if room := MaxResponseHeaderBytes - len(c.buf); len(b) > room {
		b = b[:room]
	}
	c.buf = append(c.buf, b...)
	for {
		n := headLen(c.buf, c.from)
		if n == 0 {
			if len(c.buf) >= MaxResponseHeaderBytes {
				c.stopLocked()
			}
			// The next bytes resume the search (a head trickled a byte
			// at a time must not be rescanned from its start each time).
			c.from = max(len(c.buf)-len(crlfEnd), 0)
			return
		}
		head := c.buf[:n]
		if len(head) >= 12 && head[9] == '1' && string(head[9:12]) != "101" {
			// A 1xx informational head: the final one follows.
			c.buf = append(c.buf[:0], c.buf[n:]...)
			c.from = 0
			continue
		}
		c.conn, c.te10 = connectionValues(head), http10TE(head)
		c.stopLocked()
		return
	}
}

func (c *sniffConn) stopLocked() {
	c.done = true
	c.buf = c.buf[:0]
	c.armed.Store(false)
}

// connection returns the Connection values of the response head copied
// since arm, nil when there were none or the head is not complete.
func (c *sniffConn) connection() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		return nil
	}
	return c.conn
}

// http10TE reports whether the response head copied since arm is HTTP/1.0
// with a Transfer-Encoding field (see http10TE).
func (c *sniffConn) http10TE() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done && c.te10
}
