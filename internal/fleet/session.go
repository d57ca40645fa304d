package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// grantLease grants a lease of ttl (at least 1 s) within timeout. revoke
// ends it at once (what the lease holds leaves etcd now rather than after
// the TTL); see revokeOnStop for when to call it.
func (s *Store) grantLease(ctx context.Context, ttl, timeout time.Duration) (id clientv3.LeaseID, revoke func(), err error) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	lease, err := s.cl.Grant(tctx, int64(max(ttl/time.Second, 1)))
	cancel()
	if err != nil {
		return 0, nil, err
	}
	return lease.ID, func() {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		s.cl.Revoke(rctx, lease.ID)
		rcancel()
	}, nil
}

// keptLease grants a session's lease (what names the component in the
// errors) and keeps it alive for as long as ctx, the session's context,
// lasts. release, deferred by the session, revokes it when the component
// is stopping and otherwise leaves it to expire (revokeOnStop).
func (s *Store) keptLease(ctx context.Context, ttl, timeout time.Duration, what string) (id clientv3.LeaseID, ka <-chan *clientv3.LeaseKeepAliveResponse, release func(), err error) {
	id, revoke, err := s.grantLease(ctx, ttl, timeout)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("fleet: %s lease: %w", what, err)
	}
	release = func() { revokeOnStop(ctx, revoke) }
	if ka, err = s.cl.KeepAlive(ctx, id); err != nil {
		release()
		return 0, nil, nil, fmt.Errorf("fleet: keep the %s lease: %w", what, err)
	}
	return id, ka, release, nil
}

// revokeOnStop revokes a session's lease only when the component is
// stopping, that is when ctx (the session's context, derived from Run's)
// is already done as the session returns: then what the lease holds
// leaves etcd at once. A session that ends on an error (a timeout, a
// watch that ended, a lost connection) leaves the lease to expire
// instead, so the instance's registration, verdicts and offered rate stay
// visible to the others while it reconnects and writes them again under
// a new lease; revoking there would make a live, serving instance vanish
// from the fleet for the length of its backoff. Defer it after the
// session's own cancel, so it runs first.
func revokeOnStop(ctx context.Context, revoke func()) {
	if ctx.Err() != nil {
		revoke()
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
