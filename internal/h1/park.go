package h1

import (
	"time"

	"github.com/spillwaylb/spillway/internal/park"
)

// A cleartext keep-alive connection that has waited Server.ParkAfter for
// its next request is parked: its goroutine ends and its socket waits in
// the server's park.Lot, which starts a goroutine for it again (resume)
// once the socket is readable, its idle deadline passes or the server
// closes. The lot's goroutine looks for connections to park twice per
// ParkAfter (parkIdle): one waiting that long is nudged with a read
// deadline in the past, and parks itself when its wait ends on it.

// Where a connection's goroutine is (h1conn.waitState).
const (
	waitBusy   = iota // not in readIdle
	waitIdle          // in readIdle: parkIdle may nudge it
	waitNudged        // parkIdle set a past read deadline to make it park
)

// waitResult is what waiting for the next request came to.
type waitResult uint8

const (
	waitClosed  waitResult = iota // the connection ends
	waitRequest                   // a request's first byte is buffered
	waitParked                    // parked: the goroutine ends
)

// parkingLot returns the server's lot, starting it with the first
// connection that can park; nil when ParkAfter is off or the system has
// no epoll.
func (s *Server) parkingLot() *park.Lot {
	if s.ParkAfter <= 0 {
		return nil
	}
	s.lotOnce.Do(func() {
		lot, err := park.New(s.ParkAfter/2, s.parkIdle)
		if err != nil {
			s.Logger.Debug("http1: idle connections are not parked", "err", err)
			return
		}
		s.lot.Store(lot)
	})
	return s.lot.Load()
}

// Parked returns how many of the server's connections are parked now.
func (s *Server) Parked() int {
	if lot := s.lot.Load(); lot != nil {
		return lot.Parked()
	}
	return 0
}

// closeLot closes the lot, waking what is parked in it to end, and
// keeps a new one from starting.
func (s *Server) closeLot() {
	s.lotOnce.Do(func() {})
	if lot := s.lot.Load(); lot != nil {
		lot.Close()
	}
}

// parkIdle nudges the connections that have waited ParkAfter in their
// goroutines (the lot's tick).
func (s *Server) parkIdle(now time.Time) {
	cut := now.Add(-s.ParkAfter).UnixNano()
	s.mu.Lock()
	for c := range s.conns {
		if c.waitState.Load() == waitIdle && c.idleSince.Load() <= cut {
			s.nudges = append(s.nudges, c)
		}
	}
	s.mu.Unlock()
	for _, c := range s.nudges {
		c.nudge()
	}
	clear(s.nudges)
	s.nudges = s.nudges[:0]
}

// nudge ends c's wait in readIdle with a read deadline in the past, if
// it is still there; readIdle takes c.mu before it looks, so that it
// never sees the state changed without the deadline.
func (c *h1conn) nudge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waitState.CompareAndSwap(waitIdle, waitNudged) {
		c.rwc.SetReadDeadline(aLongTimeAgo)
	}
}

// park puts c in the lot with its idle deadline, reporting false when it
// could not (the lot is closed or refused the socket).
func (c *h1conn) park() bool {
	deadline := c.rdl
	c.rdl = aLongTimeAgo // what the nudge left on the socket
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.spot = c.lot.Park(c.raw, deadline, c.wake); c.spot == nil {
		c.rdl = deadline
		return false
	}
	return true
}

// wake is called by the lot: c's socket is readable, or (timedOut) its
// idle deadline passed or the server closes.
func (c *h1conn) wake(timedOut bool) { go c.resume(timedOut) }

// resume continues a parked connection on a new goroutine.
func (c *h1conn) resume(timedOut bool) {
	c.s.mu.Lock() // after park's, so what park wrote is seen
	c.spot = nil
	c.s.mu.Unlock()
	if timedOut {
		c.end(false)
		return
	}
	c.run(false)
}

// close closes c for Shutdown or Close (s.mu held). A parked connection
// leaves the lot first, and a goroutine ends it.
func (c *h1conn) close() {
	if c.spot != nil && c.lot.Unpark(c.spot) {
		c.spot = nil
		go c.resume(true)
	}
	c.rwc.Close()
}
