//go:build !unix

package h1

import "net"

// idleCheck cannot look into the socket on this platform; a dead idle
// connection is caught when the request on it fails (see do).
type idleCheck struct{}

func (*idleCheck) init(net.Conn) {}

func (*idleCheck) usableNow() bool { return true }
