//go:build !linux

package gslb

import "net"

// serveUDPRaw is Linux only: elsewhere every socket is served through
// Go's network poller (serveUDPConn).
func (f *Front) serveUDPRaw(*net.UDPConn, bool, <-chan struct{}) (bool, error) {
	return false, nil
}
