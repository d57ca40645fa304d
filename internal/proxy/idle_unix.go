//go:build unix

package proxy

import (
	"net"
	"syscall"
)

// idleUsable reports whether an idle pooled backend connection may carry
// the next request: the backend has neither closed it nor sent bytes
// nobody asked for (a body after a 204 or a HEAD answer, say), which would
// otherwise be read as the next request's response. It costs one
// non-blocking MSG_PEEK receive.
func idleUsable(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	usable := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		// Nothing to read (EAGAIN) is the only good answer: 0 bytes means
		// the backend closed, any byte is unsolicited.
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		usable = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && usable
}
