package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/control"
)

// DefaultRateLimitInterval is how often an instance exports its
// security policies' rate limit counts to the fleet.
const DefaultRateLimitInterval = time.Second

// RateLimitRecord is what one instance publishes under
// ratelimits/<instance>: its export of its rate limits (armor.Set.Export)
// at At. Keys travel as digests (armor.ShareKey).
type RateLimitRecord struct {
	At time.Time `json:"at"`
	armor.RateShare
}

// RateLimitShareOptions configure a RateLimitShare.
type RateLimitShareOptions struct {
	// Instance (required) is this instance's name; it publishes under
	// ratelimits/<Instance>.
	Instance string
	// Interval is how often the instance exports its counts (default
	// DefaultRateLimitInterval): the lag of the fleet's counts.
	Interval time.Duration
	// LeaseTTL, CheckTimeout, MinBackoff, MaxBackoff and Logger as for
	// the DemandShare.
	LeaseTTL, CheckTimeout time.Duration
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// RateLimitShareStats count what a RateLimitShare did.
type RateLimitShareStats struct {
	// Connected: the share follows etcd.
	Connected bool
	// Peers are the other instances whose records count, sorted.
	Peers []string
	// Writes is how many puts of this instance's record it sent.
	Writes int64
}

// RateLimitShare counts security policies' throttle and rate_based_ban
// rules across a fleet. Every Interval it exports this instance's
// heaviest keys and its bans (the function given to Follow) and writes
// them under ratelimits/<instance>, under the instance's lease, when
// they changed; it watches the other instances' records and stores
// their sum in Source, which the server's rate limits read on every
// request. It implements serve.RateLimitShare.
//
// When etcd is lost the others' counts are dropped (each instance
// counts alone, as standalone) and their bans kept until they end;
// an instance that leaves takes its counts and bans with it.
type RateLimitShare struct {
	store  *Store
	opts   RateLimitShareOptions
	log    *slog.Logger
	src    armor.RemoteSource
	export atomic.Pointer[func(time.Time, int) armor.RateShare]
	writes atomic.Int64

	mu    sync.Mutex
	stats RateLimitShareStats

	// Owned by Run's goroutine.
	peers map[string]armor.RateShare
	// written is the export last written this session (without At); nil
	// with clean: etcd holds no record of this instance.
	written          []byte
	clean, connected bool
}

// NewRateLimitShare returns a RateLimitShare for instance opts.Instance.
func NewRateLimitShare(store *Store, opts RateLimitShareOptions) (*RateLimitShare, error) {
	if opts.Instance == "" || strings.Contains(opts.Instance, "/") {
		return nil, fmt.Errorf("fleet: sharing rate limits needs an instance name without '/' (got %q; fix: give --instance NAME)", opts.Instance)
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultRateLimitInterval
	}
	connDefaults(&opts.LeaseTTL, &opts.CheckTimeout, &opts.MinBackoff, &opts.MaxBackoff, &opts.Logger)
	return &RateLimitShare{store: store, opts: opts, log: opts.Logger, peers: map[string]armor.RateShare{}}, nil
}

// Source implements serve.RateLimitShare: the other instances' counts
// and bans, merged.
func (r *RateLimitShare) Source() *armor.RemoteSource { return &r.src }

// Follow implements serve.RateLimitShare: export returns this
// instance's counts at a time, for a fleet of a number of instances.
func (r *RateLimitShare) Follow(export func(now time.Time, instances int) armor.RateShare) {
	r.export.Store(&export)
}

// Stats returns the share's counters.
func (r *RateLimitShare) Stats() RateLimitShareStats {
	r.mu.Lock()
	st := r.stats
	r.mu.Unlock()
	st.Writes = r.writes.Load()
	return st
}

// status is the share's state for /health and /metrics.
func (r *RateLimitShare) status() control.FleetRateLimits {
	st := r.Stats()
	return control.FleetRateLimits{Connected: st.Connected, Peers: st.Peers, Writes: st.Writes}
}

func (r *RateLimitShare) prefix() string { return r.store.prefix + "ratelimits/" }

func (r *RateLimitShare) key() string { return r.prefix() + r.opts.Instance }

// Run shares the rate limits on a session of its own until ctx is done
// (an Instance runs it on the instance's session).
func (r *RateLimitShare) Run(ctx context.Context) error {
	r.store.runSession(ctx, sessionOptions{instance: r.opts.Instance, leaseTTL: r.opts.LeaseTTL, checkTimeout: r.opts.CheckTimeout, minBackoff: r.opts.MinBackoff, maxBackoff: r.opts.MaxBackoff}, r)
	return nil
}

// down: etcd lost; the others' bans hold, their counts are dropped.
func (r *RateLimitShare) down(_ context.Context, err error) {
	if r.connected {
		r.log.Warn("fleet: lost etcd; rate limits count this instance's requests alone (the others' bans hold) until it is back", "instance", r.opts.Instance, "err", err)
	}
	r.connected = false
	r.merge(true)
}

func (r *RateLimitShare) idle(ctx context.Context, t time.Duration) { pause(ctx, t) }

// up reads the others' records, then publishes this instance's every
// Interval and follows theirs until it fails or ctx ends.
func (r *RateLimitShare) up(ctx context.Context, s *session) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl := r.store.cl
	tctx, tcancel := context.WithTimeout(ctx, r.opts.CheckTimeout)
	resp, err := cl.Get(tctx, r.prefix(), clientv3.WithPrefix())
	tcancel()
	if err != nil {
		return false, fmt.Errorf("fleet: read %s: %w", r.prefix(), err)
	}
	clear(r.peers)
	for _, kv := range resp.Kvs {
		r.apply(string(kv.Key), kv.Value, false)
	}
	r.written, r.clean, r.connected = nil, false, true // a record of an earlier session may linger
	r.merge(false)
	// As in DemandShare.follow: Watch blocks until etcd has created the
	// watch, so it is created aside and the ticks' writes and checks
	// notice an etcd that went away meanwhile.
	wchc := make(chan clientv3.WatchChan, 1)
	go func() {
		wchc <- cl.Watch(clientv3.WithRequireLeader(ctx), r.prefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	}()
	var wch clientv3.WatchChan // nil until created
	tick := time.NewTicker(r.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case wch = <-wchc:
		case wr, ok := <-wch:
			if !ok {
				return true, errors.New("fleet: the watch of rate limits ended")
			}
			if err := wr.Err(); err != nil {
				return true, fmt.Errorf("fleet: watch of rate limits: %w", err)
			}
			for _, ev := range wr.Events {
				r.apply(string(ev.Kv.Key), ev.Kv.Value, ev.Type == clientv3.EventTypeDelete)
			}
			r.merge(false)
		case <-tick.C:
			if err := r.publish(ctx, s.Lease()); err != nil {
				return true, err
			}
		}
	}
}

// apply records (or with del forgets) another instance's record.
func (r *RateLimitShare) apply(key string, val []byte, del bool) {
	name, ok := strings.CutPrefix(key, r.prefix())
	if !ok || name == "" || strings.Contains(name, "/") || name == r.opts.Instance {
		return
	}
	if del {
		delete(r.peers, name)
		return
	}
	var rec RateLimitRecord
	if err := json.Unmarshal(val, &rec); err != nil {
		r.log.Error("fleet: ignored an unreadable rate limit record", "key", key, "err", err)
		delete(r.peers, name)
		return
	}
	r.peers[name] = rec.RateShare
}

// merge stores the sum of the others' records in Source (their bans
// only, when bansOnly).
func (r *RateLimitShare) merge(bansOnly bool) {
	names := slices.Sorted(maps.Keys(r.peers))
	shares := make([]armor.RateShare, 0, len(names))
	for _, n := range names {
		shares = append(shares, r.peers[n])
	}
	r.src.Store(armor.MergeShares(shares, bansOnly))
	r.mu.Lock()
	r.stats.Connected, r.stats.Peers = r.connected, names
	r.mu.Unlock()
}

// publish writes this instance's export when it changed since the last
// write, and deletes the record when the export is empty, so an idle
// fleet writes nothing; without a write it checks that etcd answers.
func (r *RateLimitShare) publish(ctx context.Context, lease clientv3.LeaseID) error {
	var share armor.RateShare
	if f := r.export.Load(); f != nil {
		share = (*f)(time.Now(), 1+len(r.peers))
	}
	b, err := json.Marshal(share)
	if err != nil {
		return fmt.Errorf("fleet: encode the rate limit record: %w", err)
	}
	empty := len(share.Rules) == 0
	tctx, cancel := context.WithTimeout(ctx, r.opts.CheckTimeout)
	defer cancel()
	switch {
	case empty && r.clean, !empty && bytes.Equal(b, r.written):
		_, err = r.store.cl.Get(tctx, r.key(), clientv3.WithCountOnly())
	case empty:
		r.writes.Add(1)
		_, err = r.store.cl.Delete(tctx, r.key())
	default:
		r.writes.Add(1)
		rec, _ := json.Marshal(RateLimitRecord{At: time.Now().UTC(), RateShare: share})
		_, err = r.store.cl.Put(tctx, r.key(), string(rec), clientv3.WithLease(lease))
	}
	if err != nil {
		r.written, r.clean = nil, false
		return fmt.Errorf("fleet: publish the rate limit record: %w", err)
	}
	if empty {
		b = nil
	}
	r.written, r.clean = b, empty
	return nil
}
