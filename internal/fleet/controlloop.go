package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/spillwaylb/spillway/internal/control"
)

// DrainHost is the control state a ControlLoop drives. The loop calls it
// from its own goroutine; the host serialises the calls with everything
// else that changes its state (serve's event loop; a mutex in tests).
type DrainHost interface {
	// DrainSnapshot returns the drain state the host decided (or last
	// applied): control.State.DrainSnapshot.
	DrainSnapshot(ctx context.Context) ([]control.DrainEntry, error)
	// ApplyDrain sets the host's drain state from a published snapshot,
	// deciding nothing: control.State.ApplyDrain at the host's now.
	ApplyDrain(ctx context.Context, snap []control.DrainEntry) error
	// SetDrainFollower switches the host between following (true) and
	// deciding drains itself (false): control.State.SetDrainFollower.
	SetDrainFollower(ctx context.Context, follower bool) error
}

// DrainRecord is the value of control/drain: the elected leader's drain
// state for every backend that is not in the zero state.
type DrainRecord struct {
	Leader    string               `json:"leader"`
	Published time.Time            `json:"published"`
	Backends  []control.DrainEntry `json:"backends"`
}

// ControlLoopOptions configure a ControlLoop.
type ControlLoopOptions struct {
	// Instance (required) is this instance's name; the leader's name is
	// its campaign value and the value of control/leader.
	Instance string
	// LeaseTTL is the TTL of the election session (default 10 s): a
	// leader that dies without revoking it is replaced after it.
	LeaseTTL time.Duration
	// PublishInterval is how often the leader compares its drain state
	// with the one it published, and writes it when it differs (default
	// 200 ms; nothing is written while nothing changes).
	PublishInterval time.Duration
	// CheckTimeout bounds every etcd call (default 3 s); MinBackoff and
	// MaxBackoff bound the wait between reconnections (defaults 200 ms
	// and a third of LeaseTTL, at most 10 s).
	CheckTimeout           time.Duration
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// ControlLoopStats say what a ControlLoop is doing, for tests and logs.
type ControlLoopStats struct {
	// Leading: this instance was elected and decides drains (it stays
	// true while etcd is lost after an election: the instance keeps
	// deciding locally until a new session makes it a follower).
	Leading bool
	// Leader is the leader's name as last seen under control/leader
	// ("" when none was seen).
	Leader string
	// Connected: the loop has a session with etcd.
	Connected bool
	// Writes counts the control/drain puts this instance sent; Applied
	// the published snapshots it applied.
	Writes, Applied int64
}

// ControlLoop elects one instance of the fleet to run the control state
// (auto-capacity drain and its undrain holds and ramps). The leader
// publishes its drain state under control/drain; every other instance
// applies it and decides nothing itself. A new leader starts from the
// published state, so a failover neither restarts hold timers nor flaps
// drains. While etcd is lost a follower keeps the drain state it last
// applied and a leader keeps deciding locally.
type ControlLoop struct {
	store *Store
	opts  ControlLoopOptions
	log   *slog.Logger

	mu    sync.Mutex
	stats ControlLoopStats

	// Owned by Run's goroutine.
	host         DrainHost
	published    []byte // the Backends last written, as JSON
	publishedRev int64  // the etcd revision of that write
}

// NewControlLoop returns a control loop; Run starts it.
func NewControlLoop(store *Store, opts ControlLoopOptions) (*ControlLoop, error) {
	if opts.Instance == "" {
		return nil, errors.New("fleet: an instance needs a name (fix: give --instance NAME, unique in the fleet)")
	}
	if opts.PublishInterval <= 0 {
		opts.PublishInterval = 200 * time.Millisecond
	}
	connDefaults(&opts.LeaseTTL, &opts.CheckTimeout, &opts.MinBackoff, &opts.MaxBackoff, &opts.Logger)
	return &ControlLoop{store: store, opts: opts, log: opts.Logger}, nil
}

func (c *ControlLoop) controlPrefix() string  { return c.store.prefix + "control/" }
func (c *ControlLoop) drainKey() string       { return c.controlPrefix() + "drain" }
func (c *ControlLoop) leaderKey() string      { return c.controlPrefix() + "leader" }
func (c *ControlLoop) electionPrefix() string { return c.controlPrefix() + "election" }

// Stats returns what the loop is doing now.
func (c *ControlLoop) Stats() ControlLoopStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *ControlLoop) update(f func(*ControlLoopStats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// Run takes part in the election and applies or publishes drain state
// until ctx is done, on a session of its own (an Instance runs it on the
// instance's session). Each session with etcd first applies the
// published state and follows it, then campaigns; when elected it
// decides and publishes. When etcd is lost Run reconnects with backoff,
// leaving the host as it was: a follower keeps its last applied state, a
// leader keeps deciding. When ctx ends the session's lease is revoked, so
// another instance is elected at once.
func (c *ControlLoop) Run(ctx context.Context, host DrainHost) error {
	c.host = host
	c.store.runSession(ctx, sessionOptions{instance: c.opts.Instance, leaseTTL: c.opts.LeaseTTL, checkTimeout: c.opts.CheckTimeout, minBackoff: c.opts.MinBackoff, maxBackoff: c.opts.MaxBackoff}, c)
	return nil
}

// down: etcd lost (or the loop failed); the host stays as it was.
func (c *ControlLoop) down(_ context.Context, err error) {
	st := c.Stats()
	if st.Connected {
		if st.Leading {
			c.log.Warn("fleet: lost etcd while leading the control loop; deciding drains locally until it is back", "instance", c.opts.Instance, "err", err)
		} else {
			c.log.Warn("fleet: lost etcd; keeping the last drain state the leader published until it is back", "instance", c.opts.Instance, "err", err)
		}
	}
	c.update(func(s *ControlLoopStats) { s.Connected = false })
}

func (c *ControlLoop) idle(ctx context.Context, d time.Duration) { pause(ctx, d) }

// up follows and campaigns on the session until it fails or ctx ends;
// connected reports whether it got as far as following the published
// state.
func (c *ControlLoop) up(ctx context.Context, sess *session) (connected bool, err error) {
	err = c.campaign(ctx, sess)
	return c.Stats().Connected, err
}

// resign withdraws this instance from the election when its loop failed
// while the instance goes on (a stop revokes the session's lease
// instead): its election key, and control/leader if it named itself, are
// deleted, so the next candidate is elected now rather than when the
// session's lease expires, with nobody deciding meanwhile; a later
// campaign on the same lease queues again.
func (c *ControlLoop) resign(sess *session) {
	if sess.stop.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	key := fmt.Sprintf("%s/%x", c.electionPrefix(), sess.Lease())
	c.store.cl.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(c.leaderKey()), "=", sess.Lease())).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(c.leaderKey())).Else(clientv3.OpDelete(key)).Commit()
}

// campaign runs one election session until it fails or ctx ends: it
// follows the published state, campaigns, and watches control/ (the
// leader's name, the published drain state) while it waits; once
// elected it leads and publishes every PublishInterval.
func (c *ControlLoop) campaign(sctx context.Context, sess *session) error {
	ctx, cancel := context.WithCancel(sctx)
	r := &campaignRun{c: c, host: c.host, sess: sess, won: make(chan error, 1)}
	defer r.end(sctx, cancel)
	rev, err := r.follow(ctx)
	if err != nil {
		return err
	}
	r.el = concurrency.NewElection(sess.Session, c.electionPrefix())
	r.campaigning = true
	el, won := r.el, r.won
	go func() { won <- el.Campaign(ctx, c.opts.Instance) }()
	wch := c.store.cl.Watch(ctx, c.controlPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	var tick <-chan time.Time // nil until elected
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-won:
			if err := r.elected(ctx, err); err != nil {
				return err
			}
			tick = r.ticker.C
		case wr, ok := <-wch:
			if !ok {
				return errors.New("fleet: the control watch ended")
			}
			if err := r.watched(ctx, wr); err != nil {
				return err
			}
		case <-tick:
			if err := c.publish(ctx, r.host, r.el); err != nil {
				return err
			}
		}
	}
}

// campaignRun is the state of one campaign (one election session).
type campaignRun struct {
	c    *ControlLoop
	host DrainHost
	sess *session
	el   *concurrency.Election
	// won receives the campaign's outcome; campaigning is true while it
	// has not been received.
	won         chan error
	campaigning bool
	// resume: this instance led before etcd was lost and kept deciding
	// locally; while the published state is still its own, its local
	// state is newer, so it keeps it (applying the older one would undo
	// what it decided meanwhile, and redo it once elected again).
	resume bool
	// leading: elected in this session; ticker then paces publish.
	leading bool
	ticker  *time.Ticker
}

// end stops the publish ticker and the session's work; when the loop
// failed on a live session it lets a campaign cut short finish (it
// resigns by itself, so a key it may have just created is deleted too),
// then resigns.
func (r *campaignRun) end(sctx context.Context, cancel context.CancelFunc) {
	if r.ticker != nil {
		r.ticker.Stop()
	}
	cancel()
	if r.campaigning && sctx.Err() == nil {
		select {
		case <-r.won:
		case <-time.After(time.Second):
		}
	}
	r.c.resign(r.sess)
}

// follow applies the published drain state (unless resuming its own),
// notes the leader's name and makes the host a follower: from here on
// drains come from the leader (which may be this instance, once
// elected). It returns the revision control/ was read at.
func (r *campaignRun) follow(ctx context.Context) (int64, error) {
	c := r.c
	tctx, tcancel := context.WithTimeout(ctx, c.opts.CheckTimeout)
	resp, err := c.store.cl.Get(tctx, c.controlPrefix(), clientv3.WithPrefix())
	tcancel()
	if err != nil {
		return 0, fmt.Errorf("fleet: read %s: %w", c.controlPrefix(), err)
	}
	r.resume = c.Stats().Leading
	leader := ""
	for _, kv := range resp.Kvs {
		switch string(kv.Key) {
		case c.drainKey():
			if !(r.resume && c.publishedBySelf(kv.Value)) {
				r.resume = false
				if err := c.apply(ctx, r.host, kv.Value); err != nil {
					return 0, err
				}
			}
		case c.leaderKey():
			leader = string(kv.Value)
		}
	}
	if err := r.host.SetDrainFollower(ctx, true); err != nil {
		return 0, fmt.Errorf("fleet: follow the published drain state: %w", err)
	}
	c.update(func(s *ControlLoopStats) { s.Connected, s.Leading, s.Leader = true, false, leader })
	return resp.Header.Revision, nil
}

// elected handles the campaign's outcome err: on success it leads and
// starts the publish ticker.
func (r *campaignRun) elected(ctx context.Context, err error) error {
	r.campaigning = false
	if err != nil {
		return fmt.Errorf("fleet: campaign for the control loop: %w", err)
	}
	if err := r.c.lead(ctx, r.host, r.el, r.sess.Lease(), r.resume); err != nil {
		return err
	}
	r.leading = true
	r.ticker = time.NewTicker(r.c.opts.PublishInterval)
	return nil
}

// watched handles a watch response on control/: the leader's name, and
// the published drain state, which a follower applies and a leader
// takes as a reason to publish again.
func (r *campaignRun) watched(ctx context.Context, wr clientv3.WatchResponse) error {
	c := r.c
	if err := wr.Err(); err != nil {
		return fmt.Errorf("fleet: control watch: %w", err)
	}
	for _, ev := range wr.Events {
		switch string(ev.Kv.Key) {
		case c.leaderKey():
			name := ""
			if ev.Type == clientv3.EventTypePut {
				name = string(ev.Kv.Value)
			}
			c.update(func(s *ControlLoopStats) { s.Leader = name })
		case c.drainKey():
			if err := r.drainEvent(ctx, ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// drainEvent handles a change of control/drain.
func (r *campaignRun) drainEvent(ctx context.Context, ev *clientv3.Event) error {
	if r.leading {
		// A change after the leader's last write is someone else's (an
		// operator, a stray script; a deposed leader's late write
		// cannot pass the txn): write ours again on the next tick.
		// Anything up to that write is superseded.
		if ev.Kv.ModRevision > r.c.publishedRev {
			r.c.published = nil
		}
		return nil
	}
	if ev.Type != clientv3.EventTypePut {
		return nil
	}
	r.resume = false
	return r.c.apply(ctx, r.host, ev.Kv.Value)
}

// apply hands a published record to the host; a record that does not
// decode is logged and ignored (the host keeps what it had).
func (c *ControlLoop) apply(ctx context.Context, host DrainHost, val []byte) error {
	var rec DrainRecord
	if err := json.Unmarshal(val, &rec); err != nil {
		c.log.Error("fleet: ignoring a control/drain value that does not decode", "instance", c.opts.Instance, "err", err)
		return nil
	}
	if err := host.ApplyDrain(ctx, rec.Backends); err != nil {
		return fmt.Errorf("fleet: apply the published drain state: %w", err)
	}
	c.update(func(s *ControlLoopStats) { s.Applied++ })
	return nil
}

// publishedBySelf reports whether a control/drain value was written by
// this instance.
func (c *ControlLoop) publishedBySelf(val []byte) bool {
	var rec DrainRecord
	return json.Unmarshal(val, &rec) == nil && rec.Leader == c.opts.Instance
}

// lead takes over as the elected leader: it applies the published state
// (the previous leader's last word, read after its election key was
// gone, so nothing it wrote is missed), starts deciding, and names
// itself under control/leader.
//
// resume: the published state is this instance's own from before etcd
// was lost, and its local state (decided since) is newer; it is kept and
// published rather than replaced.
func (c *ControlLoop) lead(ctx context.Context, host DrainHost, el *concurrency.Election, lease clientv3.LeaseID, resume bool) error {
	tctx, tcancel := context.WithTimeout(ctx, c.opts.CheckTimeout)
	resp, err := c.store.cl.Get(tctx, c.drainKey())
	tcancel()
	if err != nil {
		return fmt.Errorf("fleet: read %s: %w", c.drainKey(), err)
	}
	if len(resp.Kvs) > 0 && !(resume && c.publishedBySelf(resp.Kvs[0].Value)) {
		if err := c.apply(ctx, host, resp.Kvs[0].Value); err != nil {
			return err
		}
	}
	if err := host.SetDrainFollower(ctx, false); err != nil {
		return fmt.Errorf("fleet: start deciding drains: %w", err)
	}
	c.published = nil
	tctx, tcancel = context.WithTimeout(ctx, c.opts.CheckTimeout)
	tr, err := c.store.cl.Txn(tctx).If(isLeader(el)).Then(clientv3.OpPut(c.leaderKey(), c.opts.Instance, clientv3.WithLease(lease))).Commit()
	tcancel()
	if err != nil {
		return fmt.Errorf("fleet: write %s: %w", c.leaderKey(), err)
	}
	if !tr.Succeeded {
		return errors.New("fleet: elected, but no longer the leader when naming itself")
	}
	c.update(func(s *ControlLoopStats) { s.Leading, s.Leader = true, c.opts.Instance })
	c.log.Info("fleet: elected to run the control loop; deciding drains for the fleet", "instance", c.opts.Instance)
	return c.publish(ctx, host, el)
}

// isLeader is the comparison every leader write is made under: the
// election key is still the one this campaign created.
func isLeader(el *concurrency.Election) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(el.Key()), "=", el.Rev())
}

// publish writes the host's drain state when it differs from the one
// last written, only while this instance is the leader.
func (c *ControlLoop) publish(ctx context.Context, host DrainHost, el *concurrency.Election) error {
	snap, err := host.DrainSnapshot(ctx)
	if err != nil {
		// Never publish a state the host could not give (a stopping
		// server): the published one stays.
		return fmt.Errorf("fleet: read the drain state: %w", err)
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("fleet: encode the drain state: %w", err)
	}
	if c.published != nil && bytes.Equal(b, c.published) {
		return nil
	}
	val, err := json.Marshal(DrainRecord{Leader: c.opts.Instance, Published: time.Now().UTC(), Backends: snap})
	if err != nil {
		return fmt.Errorf("fleet: encode the drain state: %w", err)
	}
	tctx, tcancel := context.WithTimeout(ctx, c.opts.CheckTimeout)
	// control/drain lives without a lease: it outlives its leader, so the
	// next one continues from it.
	tr, err := c.store.cl.Txn(tctx).If(isLeader(el)).Then(clientv3.OpPut(c.drainKey(), string(val))).Commit()
	tcancel()
	if err != nil {
		return fmt.Errorf("fleet: write %s: %w", c.drainKey(), err)
	}
	if !tr.Succeeded {
		return errors.New("fleet: no longer the control loop's leader")
	}
	c.published, c.publishedRev = b, tr.Header.Revision
	c.update(func(s *ControlLoopStats) { s.Writes++ })
	c.log.Info("fleet: published the drain state", "instance", c.opts.Instance, "backends", drainSummary(snap))
	return nil
}

// drainSummary names the drained and blocked backends, for the log.
func drainSummary(snap []control.DrainEntry) string {
	var parts []string
	for _, e := range snap {
		switch {
		case e.Drained:
			parts = append(parts, e.Service+"/"+e.Backend+" drained")
		case e.Blocked:
			parts = append(parts, e.Service+"/"+e.Backend+" blocked")
		}
	}
	if len(parts) == 0 {
		return "none drained"
	}
	return strings.Join(parts, ", ")
}

// Sources reports the state of loop, share and demand in a server's
// /health and /metrics (serve.Server.SetFleetSources); any may be nil
// (not running).
func Sources(loop *ControlLoop, share *ProbeShare, demand *DemandShare) control.FleetSources {
	var src control.FleetSources
	if loop != nil {
		src.Control = func() control.FleetControl {
			st := loop.Stats()
			return control.FleetControl{Leader: st.Leader, Leading: st.Leading, Connected: st.Connected, Applied: st.Applied, Writes: st.Writes}
		}
	}
	if share != nil {
		src.Probing = func() control.FleetProbing {
			st := share.Stats()
			return control.FleetProbing{Targets: st.Targets, Probing: len(st.Owned), Connected: st.Connected}
		}
	}
	if demand != nil {
		src.Demand = func() control.FleetDemand {
			st := demand.Stats()
			return control.FleetDemand{Connected: st.Connected, Peers: st.Peers}
		}
	}
	return src
}
