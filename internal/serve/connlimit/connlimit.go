// Package connlimit bounds a listener's connections: past the limit,
// Accept waits until one closes and new connections queue in the
// kernel's accept backlog, as HAProxy's maxconn does, rather than being
// accepted and reset. QUIC connections, which have no kernel backlog to wait in,
// count against the same limit through TryAcquire (the HTTP/3 frontends
// refuse one past it).
package connlimit

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// Limiter bounds the connections of the listeners it wraps, together.
// It costs a channel send per accepted connection and a receive when it
// closes, nothing per request. A nil *Limiter has no limit.
type Limiter struct {
	sem chan struct{} // nil: no limit (Counted)
	// accepted and active count the connections (for metrics).
	accepted atomic.Uint64
	active   atomic.Int64
}

// Counted returns a limiter for n connections (no limit for n <= 0) that
// is never nil, so that its connections are counted either way.
func Counted(n int) *Limiter {
	if n <= 0 {
		return &Limiter{}
	}
	return New(n)
}

// Accepted returns how many connections the limiter's listeners have
// accepted; Active how many of them are open. A nil Limiter counts none.
func (l *Limiter) Accepted() uint64 {
	if l == nil {
		return 0
	}
	return l.accepted.Load()
}

// Active returns how many accepted connections are open.
func (l *Limiter) Active() int64 {
	if l == nil {
		return 0
	}
	return l.active.Load()
}

// New returns a limiter for n connections, nil (no limit) for n <= 0.
func New(n int) *Limiter {
	if n <= 0 {
		return nil
	}
	return &Limiter{sem: make(chan struct{}, n)}
}

// ErrFull is TryAcquire's error when every slot is taken.
var ErrFull = errors.New("connection limit reached")

// TryAcquire takes a slot for a connection without waiting and returns
// the function that gives it back (idempotent), or ErrFull. The
// connection counts as accepted and active until the release. A nil
// Limiter counts nothing and never refuses.
func (l *Limiter) TryAcquire() (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
		default:
			return nil, ErrFull
		}
	}
	l.accepted.Add(1)
	l.active.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.active.Add(-1)
			if l.sem != nil {
				<-l.sem
			}
		})
	}, nil
}

// ConnContext is a quic.Transport's ConnContext hook: it takes a slot
// for each new QUIC connection without waiting (quic-go answers an
// error with CONNECTION_REFUSED before any handshake work) and gives it
// back when ctx, the connection's, ends (closed, or a failed handshake).
func (l *Limiter) ConnContext(ctx context.Context) (context.Context, error) {
	release, err := l.TryAcquire()
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, release)
	return ctx, nil
}

// Wrap returns ln with its accepted connections counted against l.
func (l *Limiter) Wrap(ln net.Listener) net.Listener {
	if l == nil {
		return ln
	}
	return &limitListener{Listener: ln, l: l, done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	l    *Limiter
	done chan struct{}
	once sync.Once
}

// Accept waits for a connection, then for a free slot for it: past the
// limit one connection per listener waits here, unserved, and the next
// ones in the kernel's accept queue. (Waiting for the slot first would
// hold a slot for every idle listener, which QUIC connections, taking
// theirs with TryAcquire, would then find taken.)
func (ln *limitListener) Accept() (net.Conn, error) {
	l := ln.l
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
		case <-ln.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
	l.accepted.Add(1)
	l.active.Add(1)
	release := func() {
		l.active.Add(-1)
		if l.sem != nil {
			<-l.sem
		}
	}
	if tc, ok := c.(*net.TCPConn); ok {
		return &limitConn{TCPConn: tc, release: release}, nil
	}
	return &limitOther{Conn: c, release: release}, nil
}

// Close closes the listener and ends an Accept waiting for a slot.
func (ln *limitListener) Close() error {
	ln.once.Do(func() { close(ln.done) })
	return ln.Listener.Close()
}

// limitConn gives its slot back on the first Close. It embeds the
// *net.TCPConn so that CloseWrite, ReadFrom (splice for upgraded
// connections) and the like keep working.
type limitConn struct {
	*net.TCPConn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.TCPConn.Close()
	c.once.Do(c.release)
	return err
}

// limitOther is limitConn for connections that are not TCP.
type limitOther struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitOther) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// DefaultMaxConnections is spillway serve's default for its
// connection limit (--max-connections): half the process's file-descriptor limit, since
// a proxied connection usually holds a backend connection too (and the
// rest leaves room for probes, the admin API and DNS), with a floor of 64;
// 0 (no limit) where the limit cannot be read or is unlimited.
func DefaultMaxConnections() int {
	n := fileLimit()
	if n == 0 {
		return 0
	}
	return max(n/2, 64)
}
