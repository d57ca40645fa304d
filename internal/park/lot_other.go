//go:build !linux

package park

import (
	"errors"
	"syscall"
	"time"
)

// Lot parks nothing on this system: New fails (see the package
// documentation).
type Lot struct{}

// Spot is one parked socket.
type Spot struct{}

// New reports that parking needs epoll.
func New(time.Duration, func(time.Time)) (*Lot, error) {
	return nil, errors.New("park: needs epoll (Linux)")
}

// Park parks nothing.
func (*Lot) Park(syscall.RawConn, time.Time, func(bool)) *Spot { return nil }

// Unpark reports that nothing was parked.
func (*Lot) Unpark(*Spot) bool { return false }

// Parked returns 0.
func (*Lot) Parked() int { return 0 }

// Close does nothing.
func (*Lot) Close() {}
