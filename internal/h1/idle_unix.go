//go:build unix

package h1

import (
	"net"
	"syscall"
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
