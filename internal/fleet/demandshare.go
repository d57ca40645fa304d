package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/control"
)

// DefaultDemandChange is the relative change of a rate past which an
// instance publishes its demand again: 5%, the control state's own
// demand hysteresis (control.State.SetDemand).
const DefaultDemandChange = 0.05

// DemandRecord is what one instance publishes under demand/<instance>:
// its own offered rates (requests per second, measured over one demand
// window) by backend service name and client region name ("" for clients
// of frontends without a region). At is the end of the window last
// written and WindowSec its length; both are for people reading etcd.
// The record is written when a rate moves, not every window, so an old
// At does not make the rates stale: the record lives as long as the
// instance's lease.
type DemandRecord struct {
	At        time.Time           `json:"at"`
	WindowSec float64             `json:"windowSec"`
	Rates     control.DemandRates `json:"rates"`
	// Load is what this instance measured of the UTILIZATION backends
	// it forwards to: the rate of their reported responses and the
	// utilisation reported (docs/global.md, "Capacity between the
	// layers"). Absent when it measured none.
	Load control.LoadRates `json:"load,omitempty"`
}

// DemandShareOptions configure a DemandShare.
type DemandShareOptions struct {
	// Instance (required) is this instance's name; it publishes under
	// demand/<Instance>.
	Instance string
	// Change is the relative change of any one rate that makes the
	// instance publish again (default DefaultDemandChange), unless the
	// change is within the window's counting noise (see moved).
	Change float64
	// LeaseTTL is the TTL of the lease the record lives under (default
	// 10 s): a dead instance's demand leaves the fleet's after it.
	// CheckInterval and CheckTimeout as for the Agent (defaults 2 s and
	// 3 s); MinBackoff and MaxBackoff bound the wait between
	// reconnections (defaults 200 ms and a third of LeaseTTL, at most 10 s).
	LeaseTTL, CheckInterval, CheckTimeout time.Duration
	MinBackoff, MaxBackoff                time.Duration
	Logger                                *slog.Logger
}

// DemandShareStats count what a DemandShare did, for tests, logs and the
// write rates in docs/fleet.md.
type DemandShareStats struct {
	// Connected: the share follows etcd (false: etcd lost, the remote
	// rates are the last seen).
	Connected bool
	// Peers are the other instances whose records count, sorted.
	Peers []string
	// Windows is how many windows the server handed over (Publish);
	// Writes how many puts of this instance's record it sent to etcd.
	Windows, Writes int64
}

// DemandShare counts RATE capacity across a fleet: each instance
// publishes its own offered rates under demand/<instance>, under a lease,
// when one of them moves by more than Change (or to or from zero), and
// sums the other live instances' records for the server (Remote). It
// implements serve.DemandShare; create it before the server
// (serve.Options.DemandShare) and Run it with the server.
//
// When etcd is lost the remote rates stay as last seen (the other
// instances most likely still serve; dropping their demand would give
// this instance their share of the capacity too) until etcd is back;
// then the records are read again and the instance publishes again under
// a new lease. A peer whose record is gone (deleted, or missing when this
// instance reconnects) still counts for a grace of LeaseTTL + MaxBackoff
// + CheckTimeout: a live peer that was cut off like this one waits up to
// MaxBackoff before it reconnects, and its reconnection's own round trips
// (its check, the new lease, the write) take up to CheckTimeout more, so
// its old lease can expire before it writes under its new one. Only after the grace is its demand forgotten. The cost: the
// demand of an instance that really left counts that much longer, so the
// fleet spills a little early for some seconds after a scale-down, which
// is the safe side.
type DemandShare struct {
	store *Store
	opts  DemandShareOptions
	log   *slog.Logger
	wake  chan struct{}

	windows, writes atomic.Int64
	remote          atomic.Pointer[control.DemandRates]
	remoteLoad      atomic.Pointer[control.LoadRates]

	mu     sync.Mutex
	latest *DemandRecord // the newest window from the server; nil until one
	stats  DemandShareStats

	// Owned by Run's goroutine.
	peers      map[string]DemandRecord // other instances' records
	gone       map[string]time.Time    // peers whose record left etcd, counted until then
	written    *DemandRecord           // the record last written this session; nil: none
	writtenRev int64                   // the etcd revision of that write
	connected  bool
	warned     bool // about a foreign write of this instance's record, this session
	told       bool // that this instance cannot share demand, since it last could
}

// NewDemandShare returns a DemandShare for instance opts.Instance.
func NewDemandShare(store *Store, opts DemandShareOptions) (*DemandShare, error) {
	if opts.Instance == "" || strings.Contains(opts.Instance, "/") {
		return nil, fmt.Errorf("fleet: sharing demand needs an instance name without '/' (got %q; fix: give --instance NAME)", opts.Instance)
	}
	if opts.Change <= 0 {
		opts.Change = DefaultDemandChange
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = 2 * time.Second
	}
	connDefaults(&opts.LeaseTTL, &opts.CheckTimeout, &opts.MinBackoff, &opts.MaxBackoff, &opts.Logger)
	return &DemandShare{store: store, opts: opts, log: opts.Logger, wake: make(chan struct{}, 1),
		peers: map[string]DemandRecord{}, gone: map[string]time.Time{}}, nil
}

// Publish implements serve.DemandShare: it keeps the window's rates and
// loads for Run, which writes them when they moved enough. It never
// waits for etcd.
func (d *DemandShare) Publish(at time.Time, window time.Duration, rates control.DemandRates, load control.LoadRates) {
	d.windows.Add(1)
	if len(load) == 0 {
		load = nil
	}
	d.mu.Lock()
	d.latest = &DemandRecord{At: at.UTC(), WindowSec: window.Seconds(), Rates: rates, Load: load}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Remote implements serve.DemandShare: the sum of the other instances'
// published rates (nil before any is seen).
func (d *DemandShare) Remote() control.DemandRates {
	if r := d.remote.Load(); r != nil {
		return *r
	}
	return nil
}

// RemoteLoad implements serve.DemandShare: the other instances'
// published loads, combined (nil before any is seen).
func (d *DemandShare) RemoteLoad() control.LoadRates {
	if r := d.remoteLoad.Load(); r != nil {
		return *r
	}
	return nil
}

// Stats returns the share's counters.
func (d *DemandShare) Stats() DemandShareStats {
	d.mu.Lock()
	st := d.stats
	d.mu.Unlock()
	st.Windows, st.Writes = d.windows.Load(), d.writes.Load()
	return st
}

func (d *DemandShare) demandPrefix() string { return d.store.prefix + "demand/" }

func (d *DemandShare) key() string { return d.demandPrefix() + d.opts.Instance }

// Run publishes this instance's demand and follows the others' until
// ctx is done, on a session of its own (an Instance runs it on the
// instance's session). When etcd is lost it keeps the others' rates as
// last seen and reconnects with backoff; on rejoin it reads them again
// and publishes its own again.
func (d *DemandShare) Run(ctx context.Context) error {
	d.store.runSession(ctx, sessionOptions{instance: d.opts.Instance, leaseTTL: d.opts.LeaseTTL, checkTimeout: d.opts.CheckTimeout, minBackoff: d.opts.MinBackoff, maxBackoff: d.opts.MaxBackoff}, d)
	return nil
}

// down: etcd lost; the others' rates stay as last seen.
func (d *DemandShare) down(_ context.Context, err error) {
	switch {
	case d.connected:
		d.told = true
		d.log.Warn("fleet: lost etcd; counting RATE capacity against this instance's demand and the others' as last published until it is back", "instance", d.opts.Instance, "err", err)
	case !d.told:
		d.told = true
		d.log.Error("fleet: cannot share demand through etcd; counting RATE capacity against this instance's demand and the others' as last seen until it can (fix: check that etcd answers and that the fleet's etcd user may read and write "+d.demandPrefix()+")", "instance", d.opts.Instance, "err", err)
	}
	d.connected = false
	d.setStats()
}

func (d *DemandShare) idle(ctx context.Context, t time.Duration) { pause(ctx, t) }

// up publishes under the session's lease and follows the others until it
// fails or ctx ends.
func (d *DemandShare) up(ctx context.Context, s *session) (connected bool, err error) {
	err = d.follow(ctx, s.Lease())
	return d.connected, err
}

// follow runs one connection to etcd until it fails or ctx ends.
func (d *DemandShare) follow(ctx context.Context, leaseID clientv3.LeaseID) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl := d.store.cl
	tctx, tcancel := context.WithTimeout(ctx, d.opts.CheckTimeout)
	resp, err := cl.Get(tctx, d.demandPrefix(), clientv3.WithPrefix())
	tcancel()
	if err != nil {
		return fmt.Errorf("fleet: read %s: %w", d.demandPrefix(), err)
	}
	// The records in etcd now replace those last seen; a peer last seen
	// whose record is missing now goes through the grace (forget).
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		d.applyKV(string(kv.Key), kv.Value, false, kv.ModRevision)
		seen[strings.TrimPrefix(string(kv.Key), d.demandPrefix())] = true
	}
	for name := range d.peers {
		if !seen[name] {
			d.forget(name)
		}
	}
	d.written, d.connected, d.warned = nil, true, false // a new lease: publish again
	d.sum()
	d.log.Info("fleet: sharing demand", "instance", d.opts.Instance, "peers", len(d.peers))
	// As in ProbeShare.session: the watch is created aside, and
	// WithRequireLeader ends it when etcd loses its quorum.
	wctx := clientv3.WithRequireLeader(ctx)
	wchc := make(chan clientv3.WatchChan, 1)
	go func() {
		wchc <- cl.Watch(wctx, d.demandPrefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	}()
	if err := d.flush(ctx, leaseID); err != nil {
		return err
	}
	var wch clientv3.WatchChan // nil until created
	tick := time.NewTicker(d.opts.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case w := <-wchc:
			wch = w
			continue
		case wr, ok := <-wch:
			if !ok {
				return errors.New("fleet: the watch of demand ended")
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("fleet: watch of demand: %w", err)
			}
			for _, ev := range wr.Events {
				d.applyKV(string(ev.Kv.Key), ev.Kv.Value, ev.Type == clientv3.EventTypeDelete, ev.Kv.ModRevision)
			}
			d.sum()
			// Not written now even if this instance's record was
			// changed by someone else: with the next window (or check),
			// so that two instances given the same name rewrite it at
			// most once a window each rather than in a loop.
			continue
		case <-d.wake:
		case <-tick.C:
			d.expire()
			tctx, tcancel := context.WithTimeout(ctx, d.opts.CheckTimeout)
			_, err := cl.Get(tctx, d.key(), clientv3.WithCountOnly())
			tcancel()
			if err != nil {
				return fmt.Errorf("fleet: etcd check: %w", err)
			}
		}
		if err := d.flush(ctx, leaseID); err != nil {
			return err
		}
	}
}

// applyKV records (or with del forgets) the record at key. This
// instance's own record is not read back (its local rates are fresher),
// but one deleted or overwritten by someone else is written again with
// the next window.
func (d *DemandShare) applyKV(key string, val []byte, del bool, modRev int64) {
	name, ok := strings.CutPrefix(key, d.demandPrefix())
	if !ok || name == "" || strings.Contains(name, "/") {
		return
	}
	if name == d.opts.Instance {
		if modRev > d.writtenRev && d.written != nil {
			d.written = nil
			if d.warned {
				return
			}
			d.warned = true // once a session
			d.log.Warn("fleet: this instance's demand record was changed by someone else; writing it again (is another instance running with the same --instance name?)", "instance", d.opts.Instance, "key", key)
		}
		return
	}
	if del {
		d.forget(name)
		return
	}
	var r DemandRecord
	if err := json.Unmarshal(val, &r); err != nil {
		d.log.Error("fleet: ignored an unreadable demand record", "key", key, "err", err)
		d.forget(name)
		return
	}
	d.peers[name] = r
	delete(d.gone, name)
}

// forget starts the grace of a peer whose record left etcd: it counts
// until LeaseTTL + MaxBackoff + CheckTimeout from now (or the grace it is already in),
// unless its record comes back.
func (d *DemandShare) forget(name string) {
	if _, ok := d.peers[name]; !ok {
		return
	}
	if _, ok := d.gone[name]; !ok {
		d.gone[name] = time.Now().Add(d.opts.LeaseTTL + d.opts.MaxBackoff + d.opts.CheckTimeout)
	}
}

// expire drops the peers whose grace is over.
func (d *DemandShare) expire() {
	now := time.Now()
	changed := false
	for name, until := range d.gone {
		if now.After(until) {
			delete(d.gone, name)
			delete(d.peers, name)
			changed = true
		}
	}
	if changed {
		d.sum()
	}
}

// sum recomputes the remote rates and loads from the peers' records.
func (d *DemandShare) sum() {
	total, load := control.DemandRates{}, control.LoadRates{}
	for _, r := range d.peers {
		for svc, byRegion := range r.Rates {
			for region, rps := range byRegion {
				if rps > 0 {
					total.Add(svc, region, rps)
				}
			}
		}
		for svc, byGroup := range r.Load {
			for group, g := range byGroup {
				load.Add(svc, group, g)
			}
		}
	}
	d.remote.Store(&total)
	d.remoteLoad.Store(&load)
	d.setStats()
}

// flush writes the newest window's rates when nothing was written this
// session or some rate moved by more than Change (or to or from zero)
// since the last write.
func (d *DemandShare) flush(ctx context.Context, lease clientv3.LeaseID) error {
	d.mu.Lock()
	rec := d.latest
	d.mu.Unlock()
	if rec == nil || (d.written != nil && !moved(d.written.Rates, rec.Rates, d.opts.Change, rec.WindowSec) && !loadMoved(d.written.Load, rec.Load, d.opts.Change, rec.WindowSec)) {
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("fleet: encode the demand record: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, d.opts.CheckTimeout)
	resp, err := d.store.cl.Put(tctx, d.key(), string(b), clientv3.WithLease(lease))
	cancel()
	d.writes.Add(1)
	if err != nil {
		return fmt.Errorf("fleet: publish the demand record: %w", err)
	}
	d.written, d.writtenRev = rec, resp.Header.Revision
	return nil
}

// loadUtilChange is how far a reported utilisation may move (absolute)
// before an instance publishes its load again.
const loadUtilChange = 0.02

// loadMoved is moved for loads: a backend's rate moved past moved's
// rule, or its utilisation by more than loadUtilChange.
func loadMoved(a, b control.LoadRates, change, windowSec float64) bool {
	rates := func(l control.LoadRates) control.DemandRates {
		r := control.DemandRates{}
		for svc, byGroup := range l {
			for g, x := range byGroup {
				r.Add(svc, g, x.RPS)
			}
		}
		return r
	}
	if moved(rates(a), rates(b), change, windowSec) {
		return true
	}
	for svc, byGroup := range b {
		for g, x := range byGroup {
			if math.Abs(x.Utilization-a[svc][g].Utilization) > loadUtilChange {
				return true
			}
		}
	}
	return false
}

// moved reports whether any rate of b differs from a's (a rate absent is
// zero) by more than change relative to a's, and by more than the
// window's counting noise: a rate of r rps counted over a window of w
// seconds is a count of about r·w requests, random with a standard
// deviation of √(r·w); the published rate is one such sample and the new
// one another, so their difference has a standard deviation of about
// √(2r/w) rps, and the floor is 3√(r/w), about two of those (a steady
// load crosses it in about 3% of windows). Without that floor a steady but random load crosses a 5%
// band most windows below a few thousand requests a window, and a sparse
// (service, region) pair flips between zero and a few requests every
// window: each would be a write to etcd per window and instance for no
// change that matters.
func moved(a, b control.DemandRates, change, windowSec float64) bool {
	if windowSec <= 0 {
		windowSec = 1
	}
	differs := func(old, now float64) bool {
		d := math.Abs(now - old)
		return d > change*old && d > 3*math.Sqrt(max(old, now)/windowSec)
	}
	for svc, byRegion := range a {
		for region, old := range byRegion {
			if differs(old, b[svc][region]) {
				return true
			}
		}
	}
	// The rates only b has (from zero).
	for svc, byRegion := range b {
		for region, now := range byRegion {
			if _, ok := a[svc][region]; !ok && differs(0, now) {
				return true
			}
		}
	}
	return false
}

func (d *DemandShare) setStats() {
	d.mu.Lock()
	d.stats.Connected, d.stats.Peers = d.connected, slices.Sorted(maps.Keys(d.peers))
	d.mu.Unlock()
}
