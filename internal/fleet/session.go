package fleet

import (
	"context"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// connDefaults fills the connection settings the agent, the probe share
// and the control loop have in common: lease TTL 10 s, etcd call timeout
// 3 s, reconnect backoff from 200 ms doubling to 10 s, and a logger that
// discards.
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
		*maxBackoff = max(10*time.Second, *minBackoff)
	}
	if *logger == nil {
		*logger = slog.New(slog.DiscardHandler)
	}
}

// grantLease grants a lease of ttl (at least 1 s) within timeout. revoke
// ends it at once (what the lease holds leaves etcd now rather than after
// the TTL); call it when the session ends.
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
