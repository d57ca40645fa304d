//go:build unix

package h1

import (
	"net"
	"syscall"
	"time"
)

// idleCheck looks into an idle pooled backend connection's socket.
type idleCheck struct {
	rc     syscall.RawConn  // nil: cannot look
	peek   func(fd uintptr) // bound once, so a check does not allocate
	usable bool
	buf    [1]byte
}

// init prepares the check for c.
func (k *idleCheck) init(c net.Conn) {
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			k.rc = rc
			k.peek = k.peekFD
		}
	}
}

// usableNow reports whether an idle pooled backend connection may carry
// the next request: the backend has neither closed it nor sent bytes
// nobody asked for (a body after a 204 or a HEAD answer, say), which would
// otherwise be read as the next request's response. It costs one
// non-blocking MSG_PEEK receive. It uses Control, not Read, so that a
// deadline that expired while the connection was idle does not count.
func (k *idleCheck) usableNow() bool {
	if k.rc == nil {
		return true
	}
	k.usable = false
	return k.rc.Control(k.peek) == nil && k.usable
}

func (k *idleCheck) peekFD(fd uintptr) {
	// Nothing to read (EAGAIN) is the only good answer: 0 bytes means the
	// backend closed, any byte is unsolicited.
	_, _, err := syscall.Recvfrom(int(fd), k.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	k.usable = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
}

// rawConn returns c's socket when c reads it directly (a *net.TCPConn,
// or a wrapper embedding one that leaves Read alone: see Server), else
// nil.
func rawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// readIdle reads the next bytes from c's socket into c.src.pend,
// taking a chunk from the pool only while a read can succeed: between
// tries the goroutine waits in the poller holding nothing. It reports
// whether bytes came and, when none did, whether the wait ended only
// because parkIdle nudged it (the connection should park).
func (c *h1conn) readIdle() (got, nudged bool) {
	c.src.pend, c.idleErr = nil, nil
	if c.lot != nil {
		c.idleSince.Store(time.Now().UnixNano())
		c.waitState.Store(waitIdle)
	}
	err := c.raw.Read(c.idleFn)
	got = err == nil && c.idleErr == nil && c.src.pend != nil
	if c.lot == nil || c.waitState.Swap(waitBusy) != waitNudged {
		return got, false
	}
	c.mu.Lock() // nudge has set its deadline once this is free
	c.mu.Unlock()
	if got {
		c.rwc.SetReadDeadline(c.rdl) // the nudge undone
		return true, false
	}
	return false, isTimeout(err)
}

// readIdleFD is readIdle's try at reading fd (bound once per
// connection as c.idleFn, so that a wait does not allocate); false
// waits for the socket to be readable.
func (c *h1conn) readIdleFD(fd uintptr) bool {
	p := c.s.bufs.chunk()
	for {
		n, err := syscall.Read(int(fd), *p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
			c.s.bufs.chunks.Put(p)
			return false
		case err != nil:
			c.idleErr = err
		case n > 0:
			c.src.chunk, c.src.pend = p, (*p)[:n]
			return true
		}
		c.s.bufs.chunks.Put(p)
		return true
	}
}
