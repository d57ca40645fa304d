//go:build !unix

package proxy

import "net"

// idleUsable cannot look into the socket on this platform; a dead idle
// connection is caught when the request on it fails (see do).
func idleUsable(net.Conn) bool { return true }
