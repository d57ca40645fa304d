//go:build !unix

package h1

import (
	"net"
	"syscall"
)

// idleCheck cannot look into the socket on this platform; a dead idle
// connection is caught when the request on it fails (see do).
type idleCheck struct{}

func (*idleCheck) init(net.Conn) {}

func (*idleCheck) usableNow() bool { return true }

// rawConn: waiting on the socket without buffers is for unix only.
func rawConn(net.Conn) syscall.RawConn { return nil }

func (c *h1conn) readIdle() (got, nudged bool) { return false, false }

func (c *h1conn) readIdleFD(uintptr) bool { return true }
