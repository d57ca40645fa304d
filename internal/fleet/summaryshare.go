package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spillwaylb/spillway/internal/control"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultSummaryInterval is how often an instance looks whether its
// summary changed enough to publish it again.
const DefaultSummaryInterval = 5 * time.Second

// SummaryHost is the server whose summary an instance publishes and
// whose dashboard shows the others' (*serve.Server).
type SummaryHost interface {
	// FleetSummary returns the instance's summary now.
	FleetSummary() control.Summary
	// SetFleetPeers registers where the dashboard reads the other
	// instances' summaries.
	SetFleetPeers(func() ([]control.Summary, bool))
}

// SummaryShare is the fleet view's share of an instance: it publishes
// the instance's summary (control.Summary: config hash, request rates,
// splits, the endpoints its health checks find down) under
// summary/<instance>, under the instance's session lease, and follows
// the others' for the dashboard (Peers). It publishes when the summary
// changed past its noise (control.SummaryChanged), at most once every
// interval, so a fleet at rest writes nothing; a summary is at most
// control.MaxSummaryBytes. While etcd is unreachable the others' stay as
// last seen, marked not connected; a summary whose lease ended (its
// instance stopped or was cut off past the TTL) leaves the view.
type SummaryShare struct {
	store    *Store
	host     SummaryHost
	instance string
	log      *slog.Logger
	interval time.Duration
	timeout  time.Duration

	mu        sync.Mutex
	peers     map[string]control.Summary
	connected bool
	// written is the summary last published this session (nil: none).
	written *control.Summary
}

// newSummaryShare returns the summary share of an instance.
func newSummaryShare(store *Store, instance string, log *slog.Logger, interval, timeout time.Duration) *SummaryShare {
	if interval <= 0 {
		interval = DefaultSummaryInterval
	}
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &SummaryShare{store: store, instance: instance, log: log, interval: interval, timeout: timeout, peers: map[string]control.Summary{}}
}

func (s *SummaryShare) prefix() string { return s.store.prefix + "summary/" }

// Peers returns the other instances' summaries, by name, and whether
// they are current (false: etcd lost, as last seen).
func (s *SummaryShare) Peers() ([]control.Summary, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.SortedFunc(maps.Values(s.peers), func(a, b control.Summary) int { return cmp.Compare(a.Instance, b.Instance) })
	return out, s.connected
}

// up reads every summary, publishes this instance's and follows the
// others' until the watch or a write fails (or ctx ends).
func (s *SummaryShare) up(ctx context.Context, sess *session) (bool, error) {
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	resp, err := s.store.cl.Get(tctx, s.prefix(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		return false, fmt.Errorf("fleet: read %s: %w", s.prefix(), err)
	}
	s.mu.Lock()
	clear(s.peers)
	for _, kv := range resp.Kvs {
		s.applyLocked(string(kv.Key), kv.Value, false)
	}
	s.connected, s.written = true, nil
	s.mu.Unlock()
	// As in DemandShare.follow: the watch is created aside (Watch waits
	// for etcd), and WithRequireLeader ends it when etcd loses its
	// quorum.
	wchc := make(chan clientv3.WatchChan, 1)
	go func() {
		wchc <- s.store.cl.Watch(clientv3.WithRequireLeader(ctx), s.prefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	}()
	if err := s.publish(ctx, sess.Lease()); err != nil {
		return true, err
	}
	var wch clientv3.WatchChan // nil until created
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case wch = <-wchc:
		case wr, ok := <-wch:
			if !ok {
				return true, errors.New("fleet: the watch of the summaries ended")
			}
			if err := wr.Err(); err != nil {
				return true, fmt.Errorf("fleet: watch of the summaries: %w", err)
			}
			s.mu.Lock()
			for _, ev := range wr.Events {
				s.applyLocked(string(ev.Kv.Key), ev.Kv.Value, ev.Type == clientv3.EventTypeDelete)
			}
			s.mu.Unlock()
		case <-tick.C:
			if err := s.publish(ctx, sess.Lease()); err != nil {
				return true, err
			}
		}
	}
}

// applyLocked records (or with del forgets) the summary at key; this
// instance's own is not read back (the dashboard reads it fresh).
func (s *SummaryShare) applyLocked(key string, val []byte, del bool) {
	name, ok := strings.CutPrefix(key, s.prefix())
	if !ok || name == "" || strings.Contains(name, "/") || name == s.instance {
		return
	}
	if del {
		delete(s.peers, name)
		return
	}
	var sum control.Summary
	if len(val) > control.MaxSummaryBytes {
		s.log.Error("fleet: ignored an oversized summary", "key", key, "bytes", len(val))
		delete(s.peers, name)
		return
	}
	if err := json.Unmarshal(val, &sum); err != nil {
		s.log.Error("fleet: ignored an unreadable summary", "key", key, "err", err)
		delete(s.peers, name)
		return
	}
	sum.Instance = name
	s.peers[name] = sum
}

// publish writes this instance's summary under lease when none was
// written this session or it changed (control.SummaryChanged).
func (s *SummaryShare) publish(ctx context.Context, lease clientv3.LeaseID) error {
	if s.host == nil {
		return nil
	}
	sum := control.Bound(s.host.FleetSummary())
	sum.Instance = s.instance
	if s.written != nil && !control.SummaryChanged(*s.written, sum) {
		return nil
	}
	b, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("fleet: encode the summary: %w", err)
	}
	if len(b) > control.MaxSummaryBytes {
		// Bound keeps a summary under the limit; should it not, the
		// health view is what the others need.
		sum.Services, sum.Splits, sum.Truncated = nil, nil, true
		if b, err = json.Marshal(sum); err != nil || len(b) > control.MaxSummaryBytes {
			return fmt.Errorf("fleet: the summary is %d bytes, over %d", len(b), control.MaxSummaryBytes)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	_, err = s.store.cl.Put(tctx, s.prefix()+s.instance, string(b), clientv3.WithLease(lease))
	cancel()
	if err != nil {
		return fmt.Errorf("fleet: publish the summary: %w", err)
	}
	s.written = &sum
	return nil
}

// down keeps the others' summaries as last seen, not connected.
func (s *SummaryShare) down(context.Context, error) {
	s.mu.Lock()
	s.connected = false
	s.mu.Unlock()
}

func (s *SummaryShare) idle(ctx context.Context, d time.Duration) { pause(ctx, d) }
