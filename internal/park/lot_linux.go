//go:build linux

package park

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Lot is an epoll set of parked sockets served by one goroutine; see the
// package documentation.
type Lot struct {
	ep       int
	interval time.Duration
	tick     func(now time.Time)
	mu       sync.Mutex
	spots    map[int32]*Spot
	closed   bool
	// parks counts Park calls since the memory was last released, and
	// lastParks the count at the previous tick (see release).
	parks, lastParks int
	released         time.Time
}

// Memory release after a burst of parking (see release).
const (
	releaseAfter = 1024             // parks since the last release
	releaseEvery = 30 * time.Second // at most this often
)

// Spot is one parked socket.
type Spot struct {
	fd       int32
	deadline time.Time // zero: none
	wake     func(timedOut bool)
}

// New starts a Lot whose goroutine wakes at least once per interval to
// time out parked sockets and to call tick (which may be nil) with the
// time: the owner's chance to park more.
func New(interval time.Duration, tick func(now time.Time)) (*Lot, error) {
	if interval <= 0 {
		return nil, errors.New("park: interval must be positive")
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("park: epoll_create1: %w", err)
	}
	l := &Lot{ep: ep, interval: interval, tick: tick, spots: map[int32]*Spot{}}
	go l.run()
	return l, nil
}

// Park adds the socket rc to the lot: wake is called, on the lot's
// goroutine (so it should only start one), with timedOut false once the
// socket is readable (data, end of stream or an error: the woken
// connection reads it and finds out), or true once deadline (zero: none)
// has passed or the lot closes. Until then the socket must not be closed
// except after Unpark. Park returns nil when it could not park (the lot
// is closed, or epoll refused the socket): the caller keeps waiting
// itself.
func (l *Lot) Park(rc syscall.RawConn, deadline time.Time, wake func(timedOut bool)) *Spot {
	sp := &Spot{fd: -1, deadline: deadline, wake: wake}
	if err := rc.Control(func(fd uintptr) { sp.fd = int32(fd) }); err != nil || sp.fd < 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: sp.fd}
	if unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, int(sp.fd), &ev) != nil {
		return nil
	}
	l.spots[sp.fd] = sp
	l.parks++
	return sp
}

// Unpark takes sp out of the lot before its socket is closed, reporting
// whether it was still parked: if so its wake will never be called and
// the caller owns the connection again; if not, wake has been or is
// being called.
func (l *Lot) Unpark(sp *Spot) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takeLocked(sp)
}

// takeLocked removes sp from the set (l.mu held), reporting whether it
// was there.
func (l *Lot) takeLocked(sp *Spot) bool {
	if l.spots[sp.fd] != sp {
		return false
	}
	delete(l.spots, sp.fd)
	// The socket is still open (it is closed only after Unpark), so
	// its number is still its own.
	unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, int(sp.fd), nil)
	return true
}

// Parked returns how many sockets are parked.
func (l *Lot) Parked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spots)
}

// Close stops the lot: every parked socket's wake is called with
// timedOut true, and the lot parks nothing more.
func (l *Lot) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	var woken []*Spot
	for _, sp := range l.spots {
		l.takeLocked(sp)
		woken = append(woken, sp)
	}
	l.mu.Unlock()
	for _, sp := range woken {
		sp.wake(true)
	}
}

// releaseDueLocked reports whether a burst of parking has just ended
// (releaseAfter sockets or more parked since the last release, none
// since the previous tick) and the memory was not released in the last
// releaseEvery (l.mu held). The goroutines those sockets left freed
// their stacks, a few KiB each, but Go's runtime hands freed memory back
// to the system only slowly (not at all while no collection runs, as on
// a server whose clients sit idle), so without a release the process
// keeps the burst's peak.
func (l *Lot) releaseDueLocked(now time.Time) bool {
	quiet := l.parks == l.lastParks
	l.lastParks = l.parks
	if !quiet || l.parks < releaseAfter || now.Sub(l.released) < releaseEvery {
		return false
	}
	l.parks, l.lastParks, l.released = 0, 0, now
	return true
}

// run waits for parked sockets until the lot closes, then closes the
// epoll set (here, so that no wait can outlive the descriptor and find
// its number reused).
func (l *Lot) run() {
	defer unix.Close(l.ep)
	events := make([]unix.EpollEvent, 256)
	ms := max(1, int(l.interval/time.Millisecond))
	next := time.Now().Add(l.interval)
	var ready, expired []*Spot
	for {
		n, err := unix.EpollWait(l.ep, events, ms)
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.Close()
			return
		}
		now := time.Now()
		due := !now.Before(next)
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return
		}
		for _, ev := range events[:max(n, 0)] {
			if sp := l.spots[ev.Fd]; sp != nil && l.takeLocked(sp) {
				ready = append(ready, sp)
			}
		}
		release := false
		if due {
			for _, sp := range l.spots {
				if !sp.deadline.IsZero() && !now.Before(sp.deadline) && l.takeLocked(sp) {
					expired = append(expired, sp)
				}
			}
			release = l.releaseDueLocked(now)
		}
		l.mu.Unlock()
		if release {
			go debug.FreeOSMemory()
		}
		for _, sp := range ready {
			sp.wake(false)
		}
		for _, sp := range expired {
			sp.wake(true)
		}
		clear(ready)
		clear(expired)
		ready, expired = ready[:0], expired[:0]
		if due {
			next = now.Add(l.interval)
			if l.tick != nil {
				l.tick(now)
			}
		}
	}
}
