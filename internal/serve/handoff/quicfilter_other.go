//go:build !linux

package handoff

import (
	"errors"
	"net"
)

// RefuseNewQUIC needs a Linux socket filter: elsewhere an HTTP/3
// handover refuses the handshakes in flight when the old listener closes.
func RefuseNewQUIC(*net.UDPConn) error { return errors.ErrUnsupported }

// AcceptNewQUIC has nothing to remove where RefuseNewQUIC adds nothing.
func AcceptNewQUIC(*net.UDPConn) error { return nil }
