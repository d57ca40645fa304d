//go:build !linux

package gslb

import (
	"errors"
	"net"
	"os"
)

// dupFile is not used off Linux (no socket is served by raw threads).
func dupFile(int) (*os.File, error) { return nil, errors.New("gslb: no raw UDP descriptors off Linux") }

// serveUDPRaw is Linux only: elsewhere every socket is served through
// Go's network poller (serveUDPConn).
func (f *Front) serveUDPRaw(*net.UDPConn, bool, <-chan struct{}) (bool, error) {
	return false, nil
}
