package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// connDefaults fills the connection settings the agent, the shares and
// the control loop have in common: lease TTL 10 s, etcd call timeout 3 s,
// reconnect backoff from 200 ms doubling to a third of the lease TTL (at
// most 10 s), so an instance that lost etcd is back within the TTL of the
// keys it left there, and a logger that discards.
func connDefaults(leaseTTL, checkTimeout, minBackoff, maxBackoff *time.Duration, logger **slog.Logger) {
	if *leaseTTL <= 0 {
		*leaseTTL = 10 * time.Second
	}
	if *checkTimeout <= 0 {
		*checkTimeout = 3 * time.Second
	}
	if *minBackoff <= 0 {
		*minBackoff = 200 * time.Millisecond
	}
	if *maxBackoff < *minBackoff {
		*maxBackoff = max(min(10*time.Second, *leaseTTL/3), *minBackoff)
	}
	if *logger == nil {
		*logger = slog.New(slog.DiscardHandler)
	}
}

// sessionOptions configure an instance's session with etcd: the TTL of
// its one lease, the timeout of granting and revoking it, the backoff
// between reconnections (connDefaults), and the instance's name for the
// errors.
type sessionOptions struct {
	instance                                       string
	leaseTTL, checkTimeout, minBackoff, maxBackoff time.Duration
}

// session is one lease of an instance, kept alive by one keepalive
// stream, that every component of the instance writes its keys under
// (etcd's concurrency.Session, shared as etcd's own election and lock
// recipes share it).
type session struct {
	*concurrency.Session
	// stop is the instance's context: done when it is stopping rather
	// than reconnecting.
	stop context.Context
}

// member is one component of an instance on its session (Agent,
// ProbeShare, DemandShare, ControlLoop): the hooks of the session's one
// reconnect loop.
type member interface {
	// up runs the component on s until it fails or ctx ends (the session
	// is lost or the instance stops): it writes its keys under s's
	// lease, campaigns, follows its watches. connected reports whether it
	// caught up with etcd, which restarts its backoff from the minimum.
	up(ctx context.Context, s *session) (connected bool, err error)
	// down is the component's offline behaviour once it lost etcd (err
	// says why); ctx is the instance's.
	down(ctx context.Context, err error)
	// idle waits d, or less if ctx ends, before the component reconnects.
	idle(ctx context.Context, d time.Duration)
}

// runSession is an instance's one reconnect loop: it grants a lease,
// keeps it alive and runs every member on it until ctx is done. A member
// that fails goes down, waits its backoff and comes up again on the same
// lease, the others undisturbed. When the lease's keepalive ends (etcd
// lost for longer than the TTL, or the lease revoked) every member goes
// down, and a new lease is granted with backoff. Only a stop revokes the
// lease: a session that ends on an error leaves it to expire, so the
// instance's registration, verdicts and offered rate stay visible to the
// others while it reconnects and writes them again; revoking there would
// make a live, serving instance vanish from the fleet for the length of
// its backoff.
func (s *Store) runSession(ctx context.Context, o sessionOptions, members ...member) {
	backoffs := make([]time.Duration, len(members))
	for i := range backoffs {
		backoffs[i] = o.minBackoff
	}
	backoff := o.minBackoff
	for ctx.Err() == nil {
		granted, err := s.session(ctx, o, members, backoffs)
		if ctx.Err() != nil {
			break
		}
		if granted {
			backoff = o.minBackoff // its members went down as it ended
		} else {
			for _, m := range members {
				m.down(ctx, err)
			}
		}
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Go(func() { m.idle(ctx, backoff) })
		}
		wg.Wait()
		backoff = min(2*backoff, o.maxBackoff)
	}
}

// session runs the members on one lease until its keepalive ends or ctx
// is done; granted reports whether it got a lease kept alive.
func (s *Store) session(ctx context.Context, o sessionOptions, members []member, backoffs []time.Duration) (granted bool, err error) {
	tctx, cancel := context.WithTimeout(ctx, o.checkTimeout)
	lease, err := s.cl.Grant(tctx, int64(max(o.leaseTTL/time.Second, 1)))
	cancel()
	if err != nil {
		return false, fmt.Errorf("fleet: instance %s lease: %w", o.instance, err)
	}
	revokeOnStop := func() {
		if ctx.Err() != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			s.cl.Revoke(rctx, lease.ID)
			rcancel()
		}
	}
	sctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	cs, err := concurrency.NewSession(s.cl, concurrency.WithLease(lease.ID), concurrency.WithContext(sctx))
	if err != nil {
		revokeOnStop()
		return false, fmt.Errorf("fleet: keep the instance %s lease: %w", o.instance, err)
	}
	go func() {
		select {
		case <-cs.Done():
			end(fmt.Errorf("fleet: instance %s lost its lease (keepalive ended)", o.instance))
		case <-sctx.Done():
		}
	}()
	sess := &session{Session: cs, stop: ctx}
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { runMember(sctx, sess, m, &backoffs[i], o) })
	}
	wg.Wait()
	revokeOnStop() // after every member is done writing under it
	return true, nil
}

// runMember runs m on sess until the session ends: each time m fails
// it goes down, waits its backoff and comes up again.
func runMember(ctx context.Context, sess *session, m member, backoff *time.Duration, o sessionOptions) {
	for {
		connected, err := m.up(ctx, sess)
		if sess.stop.Err() != nil {
			return
		}
		if ctx.Err() != nil {
			err = context.Cause(ctx) // the session is lost
		}
		if connected {
			*backoff = o.minBackoff
		}
		m.down(sess.stop, err)
		if ctx.Err() != nil {
			return // runSession grants a new lease
		}
		m.idle(ctx, *backoff)
		*backoff = min(2**backoff, o.maxBackoff)
		if ctx.Err() != nil {
			return
		}
	}
}

// pause waits d, or less if ctx ends first: the wait between a
// component's reconnections.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
