//go:build unix

package proxy

import (
	"net"
	"syscall"
)

// rawConn returns c's syscall.RawConn for idleUsable, nil when it has none.
func rawConn(c net.Conn) syscall.RawConn {
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rc
		}
	}
	return nil
}

// idleUsable reports whether an idle pooled backend connection may carry
// the next request: the backend has neither closed it nor sent bytes
// nobody asked for (a body after a 204 or a HEAD answer, say), which would
// otherwise be read as the next request's response. It costs one
// non-blocking MSG_PEEK receive. It uses Control, not Read, so that a
// deadline that expired while the connection was idle does not count.
func idleUsable(rc syscall.RawConn) bool {
	if rc == nil {
		return true
	}
	usable := false
	var b [1]byte
	err := rc.Control(func(fd uintptr) {
		// Nothing to read (EAGAIN) is the only good answer: 0 bytes means
		// the backend closed, any byte is unsolicited.
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		usable = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
	})
	return err == nil && usable
}
