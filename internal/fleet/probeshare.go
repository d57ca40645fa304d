package fleet

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
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

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/health"
	"github.com/spillwaylb/spillway/internal/probe"
)

// DefaultProbers is how many instances probe each target by default: two,
// so that with the usual 3-down/2-up thresholds one bad vantage point
// cannot take an endpoint down alone.
const DefaultProbers = 2

// ShareServer is the running instance a ProbeShare drives
// (*serve.Server).
type ShareServer interface {
	// ProbeOnly sets the targets this instance probes.
	ProbeOnly([]probe.Target)
	// ObserveShared sets the health of a target's endpoints to the
	// fleet's verdict.
	ObserveShared(ctx context.Context, t probe.Target, healthy bool, detail string) error
}

// ProbeShareOptions configure a ProbeShare.
type ProbeShareOptions struct {
	// Instance (required) is this instance's name, as registered by its
	// Agent under instances/.
	Instance string
	// Probers is how many live instances probe each target (default
	// DefaultProbers).
	Probers int
	// Region and Role are this instance's (--region, --role): see
	// ProbeOwners. Role is "" (every layer), config.LayerEdge or
	// config.LayerRegional.
	Region, Role string
	// LeaseTTL is the TTL of the lease the published results live under
	// (default 10 s); CheckInterval and CheckTimeout as for the Agent
	// (defaults 2 s and 3 s); MinBackoff and MaxBackoff bound the wait
	// between reconnections (defaults 200 ms and a third of LeaseTTL, at most 10 s).
	LeaseTTL, CheckInterval, CheckTimeout time.Duration
	MinBackoff, MaxBackoff                time.Duration
	Logger                                *slog.Logger
}

// ProbeShareStats count what a ProbeShare did, for tests, logs and the
// load figures in docs/fleet.md.
type ProbeShareStats struct {
	// Targets is how many targets the plan has; Owned the keys of those
	// this instance probes now, sorted.
	Targets int
	Owned   []string
	// Results is how many of its own probe results it has seen; Writes
	// how many puts and deletes of health keys it has sent to etcd.
	Results, Writes int64
	// Connected reports whether it follows the fleet (false: etcd lost,
	// own results only).
	Connected bool
}

// Verdict is what one instance publishes for one target under
// health/<target key>/<instance>: the target's health after the check's
// thresholds, as this instance probes it.
type Verdict struct {
	OK     bool      `json:"ok"`
	Detail string    `json:"detail"`
	At     time.Time `json:"at"`
}

// ProbeShare divides the fleet's health checking: each target is probed
// by the Probers live instances that rank highest for it by rendezvous
// hashing, each publishes its verdict for the target to etcd, and every
// instance sets the target's health from the verdicts of its current
// probers: healthy unless every one of them that has published says
// unhealthy. It implements serve.ProbeShare; create it before the
// server (serve.Options.ProbeShare) and Run it with the server.
type ProbeShare struct {
	store *Store
	opts  ProbeShareOptions
	log   *slog.Logger
	wake  chan struct{}

	results, writes atomic.Int64

	mu      sync.Mutex
	targets []probe.SharedTarget // from the server's loop; nil until told
	newSet  bool                 // targets changed since Run last read them
	pending []probe.Result       // own results not yet handled
	stats   ProbeShareStats

	// Owned by Run's goroutine.
	srv       ShareServer
	all       map[string]probe.SharedTarget // the plan's targets by key
	byTarget  map[probe.Target]string       // key of each target
	live      map[string]Member             // registered instances
	connected bool
	// everConnected: etcd has answered once. Until then (etcd down at
	// start) the instance probes every target, as standalone.
	everConnected bool
	owned         map[string]bool               // keys this instance probes
	own           map[string]*ownVerdict        // this instance's verdict per owned key
	peers         map[string]map[string]Verdict // key → instance → published verdict
	shown         map[string]Verdict            // the verdict handed to the server per key
}

// ownVerdict is this instance's hysteresis for one target it probes.
type ownVerdict struct {
	h         health.State
	published bool // the current verdict is in etcd (this session)
}

// NewProbeShare returns a ProbeShare for instance opts.Instance.
func NewProbeShare(store *Store, opts ProbeShareOptions) (*ProbeShare, error) {
	if opts.Instance == "" || strings.Contains(opts.Instance, "/") {
		return nil, fmt.Errorf("fleet: sharded probing needs an instance name without '/' (got %q; fix: give --instance NAME)", opts.Instance)
	}
	if opts.Probers < 0 {
		return nil, fmt.Errorf("fleet: %d probers per target (fix: give --fleet-probers 1 or more, or 0 to have every instance probe every endpoint)", opts.Probers)
	}
	if opts.Probers == 0 {
		opts.Probers = DefaultProbers
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = 2 * time.Second
	}
	connDefaults(&opts.LeaseTTL, &opts.CheckTimeout, &opts.MinBackoff, &opts.MaxBackoff, &opts.Logger)
	return &ProbeShare{
		store: store, opts: opts, log: opts.Logger, wake: make(chan struct{}, 1),
		all: map[string]probe.SharedTarget{}, byTarget: map[probe.Target]string{},
		live: map[string]Member{}, owned: map[string]bool{}, own: map[string]*ownVerdict{},
		peers: map[string]map[string]Verdict{}, shown: map[string]Verdict{},
	}, nil
}

// SetTargets implements serve.ProbeShare.
func (ps *ProbeShare) SetTargets(ts []probe.SharedTarget) {
	ps.mu.Lock()
	ps.targets, ps.newSet = slices.Clone(ts), true
	ps.mu.Unlock()
	ps.poke()
}

// Own implements serve.ProbeShare.
func (ps *ProbeShare) Own(r probe.Result) {
	ps.results.Add(1)
	ps.mu.Lock()
	if len(ps.pending) >= maxPending {
		// Run is stuck (or not running): keep the newer half, so memory
		// stays bounded; the thresholds see a gap, nothing worse.
		ps.pending = slices.Delete(ps.pending, 0, maxPending/2)
	}
	ps.pending = append(ps.pending, r)
	ps.mu.Unlock()
	ps.poke()
}

// maxPending bounds the own results waiting for Run.
const maxPending = 1 << 16

func (ps *ProbeShare) poke() {
	select {
	case ps.wake <- struct{}{}:
	default:
	}
}

// Stats returns the share's counters.
func (ps *ProbeShare) Stats() ProbeShareStats {
	ps.mu.Lock()
	st := ps.stats
	ps.mu.Unlock()
	st.Results, st.Writes = ps.results.Load(), ps.writes.Load()
	return st
}

// Owners returns the k instances of live that probe key: those with the
// highest rendezvous weight hash(instance, key), ties by name. Every
// instance computes the same owners from the same live set, and when an
// instance leaves only the keys it owned move.
func Owners(key string, live []string, k int) []string {
	type w struct {
		name string
		w    uint64
	}
	ws := make([]w, 0, len(live))
	for _, n := range live {
		h := sha256.Sum256([]byte(n + "\x00" + key))
		ws = append(ws, w{n, binary.BigEndian.Uint64(h[:8])})
	}
	slices.SortFunc(ws, func(a, b w) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	out := make([]string, 0, min(k, len(ws)))
	for _, x := range ws[:min(k, len(ws))] {
		out = append(out, x.name)
	}
	return out
}

// Member is one live instance of the fleet as its registration under
// instances/ describes it: its name, --region and --role ("" for every
// layer, config.LayerEdge, config.LayerRegional).
type Member struct {
	Name   string `json:"instance"`
	Region string `json:"region,omitempty"`
	Role   string `json:"role,omitempty"`
}

// ProbeOwners returns the k members that probe target t. A target in a
// region without a regional layer is reached by every instance that
// forwards there, edges included, so its owners are Owners over every
// member, as in a fleet of one layer. A target behind a regional layer
// (t.Layered) is reached by that layer's instances, not by edges: its
// owners are the members that are not EDGE, those registered in t's
// region first (Owners among them), then, when they are fewer than k,
// the others (Owners among those). None when every member is an edge:
// the target then keeps the health it last had.
func ProbeOwners(t probe.SharedTarget, members []Member, k int) []string {
	var local, other []string
	for _, m := range members {
		switch {
		case !t.Layered:
			other = append(other, m.Name)
		case m.Role == config.LayerEdge:
		case t.Region != "" && m.Region == t.Region:
			local = append(local, m.Name)
		default:
			other = append(other, m.Name)
		}
	}
	out := Owners(t.Key, local, k)
	if len(out) < k {
		out = append(out, Owners(t.Key, other, k-len(out))...)
	}
	return out
}

// mayProbe reports whether an instance of role could ever own t: an
// edge never probes a target behind a regional layer.
func mayProbe(t probe.SharedTarget, role string) bool {
	return !t.Layered || role != config.LayerEdge
}

func (ps *ProbeShare) healthPrefix() string { return ps.store.prefix + "health/" }

func (ps *ProbeShare) healthKey(key, instance string) string {
	return ps.healthPrefix() + key + "/" + instance
}

// Run drives srv until ctx is done, on a session of its own (an
// Instance runs it on the instance's session): it follows the live
// instances and the published verdicts in etcd, probes the targets this
// instance owns and publishes its verdicts. When etcd is lost it keeps
// probing what it probed and believes its own verdicts only (the others'
// stay as last seen), and reconnects with backoff.
func (ps *ProbeShare) Run(ctx context.Context, srv ShareServer) error {
	ps.srv = srv
	ps.store.runSession(ctx, sessionOptions{instance: ps.opts.Instance, leaseTTL: ps.opts.LeaseTTL, checkTimeout: ps.opts.CheckTimeout, minBackoff: ps.opts.MinBackoff, maxBackoff: ps.opts.MaxBackoff}, ps)
	return nil
}

// down: etcd lost; the instance probes what it probed and believes its
// own verdicts only.
func (ps *ProbeShare) down(ctx context.Context, err error) {
	if ps.connected {
		ps.log.Warn("fleet: lost etcd; probing the same targets and believing only this instance's results until it is back", "instance", ps.opts.Instance, "err", err)
	}
	ps.connected = false
	ps.setStats()
	ps.refresh(ctx, nil)
}

// idle waits d, following the server's targets and results offline
// meanwhile.
func (ps *ProbeShare) idle(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-ps.wake:
			ps.refresh(ctx, nil)
		}
	}
}

// up publishes under the session's lease and follows the fleet until it
// fails or ctx ends.
func (ps *ProbeShare) up(ctx context.Context, s *session) (connected bool, err error) {
	err = ps.follow(ctx, s.Lease())
	return ps.connected, err
}

// follow runs one connection to etcd until it fails or ctx ends.
func (ps *ProbeShare) follow(ctx context.Context, leaseID clientv3.LeaseID) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl := ps.store.cl
	tctx, tcancel := context.WithTimeout(ctx, ps.opts.CheckTimeout)
	resp, err := cl.Txn(tctx).Then(
		clientv3.OpGet(ps.store.instancesPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(ps.healthPrefix(), clientv3.WithPrefix()),
	).Commit()
	tcancel()
	if err != nil {
		return fmt.Errorf("fleet: read instances and health: %w", err)
	}
	live := map[string]Member{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		if n, ok := ps.instanceName(string(kv.Key)); ok {
			live[n] = readMember(n, kv.Value)
		}
	}
	peers := map[string]map[string]Verdict{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		ps.applyHealthKV(peers, string(kv.Key), kv.Value, false)
	}
	ps.live, ps.peers, ps.connected, ps.everConnected = live, peers, true, true
	for _, o := range ps.own {
		o.published = false // a new lease: publish again
	}
	ps.log.Info("fleet: sharing probes", "instance", ps.opts.Instance, "instances", len(live), "probers", ps.opts.Probers)
	rev := resp.Header.Revision
	// WithRequireLeader ends the watches when etcd loses its quorum.
	// Watch blocks until etcd has created the watch, so both are created
	// aside: if etcd goes away meanwhile, the checks below notice.
	wctx := clientv3.WithRequireLeader(ctx)
	wchc := make(chan [2]clientv3.WatchChan, 1)
	go func() {
		wchc <- [2]clientv3.WatchChan{
			cl.Watch(wctx, ps.store.instancesPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1)),
			cl.Watch(wctx, ps.healthPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1)),
		}
	}()
	if err := ps.refresh(ctx, &leaseID); err != nil {
		return err
	}
	var wi, wh clientv3.WatchChan // nil until created
	tick := time.NewTicker(ps.opts.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case w := <-wchc:
			wi, wh = w[0], w[1]
			continue
		case wr, ok := <-wi:
			if err := ps.watched(wr, ok); err != nil {
				return err
			}
		case wr, ok := <-wh:
			if err := ps.watched(wr, ok); err != nil {
				return err
			}
		case <-ps.wake:
		case <-tick.C:
			tctx, tcancel := context.WithTimeout(ctx, ps.opts.CheckTimeout)
			_, err := cl.Get(tctx, ps.store.instanceKey(ps.opts.Instance), clientv3.WithCountOnly())
			tcancel()
			if err != nil {
				return fmt.Errorf("fleet: etcd check: %w", err)
			}
		}
		if err := ps.refresh(ctx, &leaseID); err != nil {
			return err
		}
	}
}

// watched applies one watch response of instances/ or health/.
func (ps *ProbeShare) watched(wr clientv3.WatchResponse, ok bool) error {
	if !ok {
		return errors.New("fleet: the watch of instances and health ended")
	}
	if err := wr.Err(); err != nil {
		return fmt.Errorf("fleet: watch of instances and health: %w", err)
	}
	for _, ev := range wr.Events {
		k := string(ev.Kv.Key)
		if n, ok := ps.instanceName(k); ok {
			if ev.Type == clientv3.EventTypePut {
				ps.live[n] = readMember(n, ev.Kv.Value)
			} else {
				delete(ps.live, n)
			}
			continue
		}
		ps.applyHealthKV(ps.peers, k, ev.Kv.Value, ev.Type == clientv3.EventTypeDelete)
	}
	return nil
}

// readMember reads instance name's registration; one that does not parse
// (or predates roles) counts as an instance of every layer in no region.
func readMember(name string, val []byte) Member {
	var m Member
	_ = json.Unmarshal(val, &m)
	m.Name = name
	return m
}

func sameVerdict(a, b Verdict) bool {
	return a.OK == b.OK && a.Detail == b.Detail && a.At.Equal(b.At)
}

// instanceName returns NAME for instances/NAME (not instances/NAME/config).
func (ps *ProbeShare) instanceName(key string) (string, bool) {
	n, ok := strings.CutPrefix(key, ps.store.instancesPrefix())
	if !ok || n == "" || strings.Contains(n, "/") {
		return "", false
	}
	return n, true
}

// applyHealthKV records (or with del forgets) the verdict at key in peers.
func (ps *ProbeShare) applyHealthKV(peers map[string]map[string]Verdict, key string, val []byte, del bool) {
	rest, ok := strings.CutPrefix(key, ps.healthPrefix())
	i := strings.LastIndexByte(rest, '/')
	if !ok || i <= 0 {
		return
	}
	tk, inst := rest[:i], rest[i+1:]
	// This instance's own key, deleted or overwritten by someone else (or
	// an older write echoed late): write it again.
	heal := func(v *Verdict) {
		if o := ps.own[tk]; inst == ps.opts.Instance && o != nil && o.published && (v == nil || !sameVerdict(*v, o.verdict())) {
			o.published = false
		}
	}
	if del {
		delete(peers[tk], inst)
		heal(nil)
		return
	}
	var v Verdict
	if err := json.Unmarshal(val, &v); err != nil {
		ps.log.Error("fleet: ignored an unreadable health verdict", "key", key, "err", err)
		heal(nil)
		return
	}
	heal(&v)
	if peers[tk] == nil {
		peers[tk] = map[string]Verdict{}
	}
	peers[tk][inst] = v
}

// refresh brings everything in line: the target set, ownership, own
// results, publication (when lease is not nil: connected) and the
// verdicts handed to the server.
func (ps *ProbeShare) refresh(ctx context.Context, lease *clientv3.LeaseID) error {
	ps.mu.Lock()
	ts, newSet := ps.targets, ps.newSet
	pending := ps.pending
	ps.pending, ps.newSet = nil, false
	ps.mu.Unlock()

	if newSet {
		ps.all, ps.byTarget = map[string]probe.SharedTarget{}, map[probe.Target]string{}
		for _, t := range ts {
			ps.all[t.Key], ps.byTarget[t.Target] = t, t.Key
		}
		// A new plan may have reset endpoints' health: hand every
		// verdict to the server again (the same verdict changes nothing).
		clear(ps.shown)
	}
	var dels []string
	if ps.connected || newSet {
		// Offline, ownership stays as it was (minus removed targets).
		dels = ps.reown(newSet)
	}
	for i := range pending {
		r := &pending[i]
		key, ok := ps.byTarget[r.Target]
		o := ps.own[key]
		if !ok || o == nil {
			continue // no longer ours
		}
		st := ps.all[key]
		if o.h.Observe(r.OK, r.Detail, r.At, health.Thresholds{Healthy: max(st.Healthy, 1), Unhealthy: max(st.Unhealthy, 1)}) {
			o.published = false
		}
	}
	if lease != nil {
		for _, k := range dels {
			tctx, cancel := context.WithTimeout(ctx, ps.opts.CheckTimeout)
			_, err := ps.store.cl.Delete(tctx, ps.healthKey(k, ps.opts.Instance))
			cancel()
			ps.writes.Add(1)
			if err != nil {
				return fmt.Errorf("fleet: withdraw the verdict for %s: %w", k, err)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(ps.own)) {
			o := ps.own[k]
			if o.published || !o.h.Known() {
				continue
			}
			b, _ := json.Marshal(o.verdict())
			tctx, cancel := context.WithTimeout(ctx, ps.opts.CheckTimeout)
			_, err := ps.store.cl.Put(tctx, ps.healthKey(k, ps.opts.Instance), string(b), clientv3.WithLease(*lease))
			cancel()
			ps.writes.Add(1)
			if err != nil {
				return fmt.Errorf("fleet: publish the verdict for %s: %w", k, err)
			}
			o.published = true
		}
	}
	ps.setStats()
	return ps.show(ctx)
}

// reown recomputes the owned keys, hands the prober the owned targets
// when they changed, and returns the keys no longer owned (whose
// verdicts to withdraw).
func (ps *ProbeShare) reown(force bool) []string {
	live := ps.members()
	owned := map[string]bool{}
	for k, t := range ps.all {
		if ps.connected {
			if slices.Contains(ProbeOwners(t, live, ps.opts.Probers), ps.opts.Instance) {
				owned[k] = true
			}
		} else if ps.owned[k] || (!ps.everConnected && mayProbe(t, ps.opts.Role)) {
			owned[k] = true
		}
	}
	var dels []string
	changed := force || len(owned) != len(ps.owned)
	for k := range ps.owned {
		if !owned[k] {
			changed = true
			delete(ps.own, k)
			dels = append(dels, k)
		}
	}
	for k := range owned {
		if ps.own[k] == nil {
			ps.own[k] = &ownVerdict{}
		}
	}
	ps.owned = owned
	if changed {
		var list []probe.Target
		for _, k := range slices.Sorted(maps.Keys(owned)) {
			list = append(list, ps.all[k].Target)
		}
		ps.srv.ProbeOnly(list)
	}
	return dels
}

// members lists the live instances in name order. An instance always
// counts itself, as its options say: its registration may not be in
// etcd yet.
func (ps *ProbeShare) members() []Member {
	live := make([]Member, 0, len(ps.live)+1)
	for _, n := range slices.Sorted(maps.Keys(ps.live)) {
		if n != ps.opts.Instance {
			live = append(live, ps.live[n])
		}
	}
	return append(live, Member{Name: ps.opts.Instance, Region: ps.opts.Region, Role: ps.opts.Role})
}

// verdict is the fleet's verdict for key, false when there is none to
// act on (keep what is shown). Connected: Combine over the current
// probers of key, this instance's own verdict taken before etcd echoes
// it. Offline: this instance's own verdict for the keys it probes; the
// others as last seen.
func (ps *ProbeShare) verdict(key string, live []Member) (Verdict, bool) {
	o := ps.own[key]
	if o != nil && !o.h.Known() {
		o = nil
	}
	if !ps.connected {
		if o == nil {
			return Verdict{}, false
		}
		return Verdict{OK: o.h.Healthy(), Detail: ps.opts.Instance + ": " + o.h.Detail, At: o.h.Since}, true
	}
	vs := ps.peers[key]
	if o != nil {
		vs = maps.Clone(vs)
		if vs == nil {
			vs = map[string]Verdict{}
		}
		vs[ps.opts.Instance] = o.verdict()
	}
	return Combine(ProbeOwners(ps.all[key], live, ps.opts.Probers), vs)
}

// Combine is the fleet's verdict for one target from its probers' (in
// owners' order; verdicts from others are ignored): healthy if any prober
// that has published says healthy, unhealthy if every one that has
// published says so, and none (false) if none has published. One bad
// vantage point cannot take an endpoint down; the details say who saw
// what.
func Combine(owners []string, verdicts map[string]Verdict) (Verdict, bool) {
	var got []string
	var last Verdict
	for _, n := range owners {
		v, ok := verdicts[n]
		if !ok {
			continue
		}
		if v.OK {
			return Verdict{OK: true, Detail: n + ": " + v.Detail, At: v.At}, true
		}
		got, last = append(got, n+": "+v.Detail), v
	}
	if len(got) == 0 {
		return Verdict{}, false
	}
	return Verdict{OK: false, Detail: strings.Join(got, "; "), At: last.At}, true
}

// verdict is what this instance publishes for the target.
func (o *ownVerdict) verdict() Verdict {
	return Verdict{OK: o.h.Healthy(), Detail: o.h.Detail, At: o.h.Since.UTC()}
}

// show hands the server every verdict that changed.
func (ps *ProbeShare) show(ctx context.Context) error {
	live := ps.members()
	for k := range ps.shown {
		if _, ok := ps.all[k]; !ok {
			delete(ps.shown, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ps.all)) {
		v, ok := ps.verdict(k, live)
		if !ok {
			continue
		}
		if old, seen := ps.shown[k]; seen && old.OK == v.OK {
			continue
		}
		if err := ps.srv.ObserveShared(ctx, ps.all[k].Target, v.OK, v.Detail); err != nil {
			return err
		}
		ps.shown[k] = v
	}
	return nil
}

func (ps *ProbeShare) setStats() {
	ps.mu.Lock()
	ps.stats.Targets, ps.stats.Owned, ps.stats.Connected = len(ps.all), slices.Sorted(maps.Keys(ps.owned)), ps.connected
	ps.mu.Unlock()
}
