//go:build !unix

package proxy

import (
	"net"
	"syscall"
)

// rawConn has nothing to offer idleUsable on this platform.
func rawConn(net.Conn) syscall.RawConn { return nil }

// idleUsable cannot look into the socket on this platform; a dead idle
// connection is caught when the request on it fails (see do).
func idleUsable(syscall.RawConn) bool { return true }
