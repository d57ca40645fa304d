package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
)

// Target is the running instance an Agent applies configs to
// (*serve.Server).
type Target interface {
	// Reload validates cfg and swaps it in; on error the running config
	// keeps serving.
	Reload(ctx context.Context, cfg *config.Config) error
	// SetFleetStatus publishes the instance's fleet status (/health,
	// /metrics).
	SetFleetStatus(control.FleetStatus)
}

// AgentOptions configure an Agent.
type AgentOptions struct {
	// Instance (required) and Region name this instance in the fleet;
	// Role is its --role ("" for every layer, config.LayerEdge or
	// config.LayerRegional), registered with it (see ProbeOwners).
	Instance, Region, Role string
	// Initial is the status at start: the revision the target was built
	// with (0 for the --config file) and whether etcd was unreachable
	// then (Stale). Start returns it.
	Initial control.FleetStatus
	// CheckInterval is how often the agent checks etcd is reachable (and
	// reads the current revision, in case a watch event was missed);
	// CheckTimeout bounds each check and every other etcd call. Defaults
	// 2 s and 3 s.
	CheckInterval, CheckTimeout time.Duration
	// LeaseTTL is the TTL of the instance's registration (default 10 s):
	// an instance that dies leaves `spillway config get --instances`
	// after it.
	LeaseTTL time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnections
	// (defaults 200 ms and a third of LeaseTTL, at most 10 s; it doubles after each failure).
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Agent keeps one instance on the fleet's config: it watches
// config/current, applies each new revision through Target.Reload,
// reports the outcome under instances/<name>/config, and while etcd is
// unreachable marks the instance stale and keeps its last good config.
type Agent struct {
	store  *Store
	target Target
	opts   AgentOptions
	log    *slog.Logger
	// status is owned by Run's goroutine; every change is published to
	// the target.
	status control.FleetStatus
	// lastLease is the lease of the previous session (Run's goroutine),
	// so a rejoin does not take its own registration for another
	// instance's.
	lastLease clientv3.LeaseID
}

// NewAgent returns an agent for target; Run starts it.
func NewAgent(store *Store, target Target, opts AgentOptions) (*Agent, error) {
	if opts.Instance == "" {
		return nil, errors.New("fleet: an instance needs a name (fix: give --instance NAME, unique in the fleet)")
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = 2 * time.Second
	}
	connDefaults(&opts.LeaseTTL, &opts.CheckTimeout, &opts.MinBackoff, &opts.MaxBackoff, &opts.Logger)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &Agent{store: store, target: target, opts: opts, log: opts.Logger, status: opts.Initial}
	a.status.Instance, a.status.Region = opts.Instance, opts.Region
	if a.status.Stale && a.status.StaleSince.IsZero() {
		a.status.StaleSince = opts.Now()
	}
	target.SetFleetStatus(a.status)
	return a, nil
}

// Run follows the fleet's config until ctx is done, on a session of its
// own (an Instance runs it on the instance's session). Each session
// registers the instance, applies the current revision if it is not the
// one in force, and watches for the next; when etcd is lost the instance
// turns stale and reconnects with backoff.
func (a *Agent) Run(ctx context.Context) error {
	a.store.runSession(ctx, a.sessionOptions(), a)
	return nil
}

func (a *Agent) sessionOptions() sessionOptions {
	return sessionOptions{instance: a.opts.Instance, leaseTTL: a.opts.LeaseTTL, checkTimeout: a.opts.CheckTimeout, minBackoff: a.opts.MinBackoff, maxBackoff: a.opts.MaxBackoff}
}

// down: etcd lost, the instance is stale and keeps its last good config.
func (a *Agent) down(_ context.Context, err error) { a.setStale(err) }

func (a *Agent) idle(ctx context.Context, d time.Duration) { pause(ctx, d) }

// setStale marks the instance stale (once per outage) and says why.
func (a *Agent) setStale(err error) {
	why := "etcd unreachable"
	if err != nil {
		why = err.Error()
	}
	if !a.status.Stale {
		a.status.Stale, a.status.StaleSince = true, a.opts.Now()
		a.log.Warn("fleet: lost etcd; serving the last good config until it is back", "instance", a.opts.Instance, "revision", a.status.Revision, "err", why)
	}
	a.status.StaleWhy = why
	a.target.SetFleetStatus(a.status)
}

// setFresh clears stale.
func (a *Agent) setFresh() {
	if a.status.Stale {
		a.log.Info("fleet: etcd reachable; following the fleet's config", "instance", a.opts.Instance, "stale_for", a.opts.Now().Sub(a.status.StaleSince).Round(time.Millisecond).String())
	}
	a.status.Stale, a.status.StaleSince, a.status.StaleWhy = false, time.Time{}, ""
	a.target.SetFleetStatus(a.status)
}

// up registers the instance under the session's lease and follows the
// config until it fails (or ctx ends); connected reports whether it got
// as far as reading the config.
func (a *Agent) up(ctx context.Context, s *session) (connected bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leaseID := s.Lease()
	a.warnNameInUse(ctx)
	a.lastLease = leaseID
	reg, _ := json.Marshal(map[string]any{"instance": a.opts.Instance, "region": a.opts.Region, "role": a.opts.Role, "since": a.opts.Now().UTC()})
	if err := a.put(ctx, a.store.instanceKey(a.opts.Instance), string(reg), leaseID); err != nil {
		return false, err
	}
	tctx, tcancel := context.WithTimeout(ctx, a.opts.CheckTimeout)
	rec, rev, err := a.store.Current(tctx)
	tcancel()
	f := &configFollower{a: a, lease: leaseID}
	if rec != nil {
		f.seenMod = rec.modRevision
	}
	if err != nil && !errors.Is(err, ErrNoConfig) {
		return false, err
	}
	a.setFresh()
	if rec != nil {
		a.apply(ctx, rec)
	}
	if err := a.report(ctx, leaseID); err != nil {
		return true, err
	}
	return true, f.follow(ctx, rev)
}

// configFollower follows config/current for one session of an Agent,
// after the session's first read of it.
type configFollower struct {
	a     *Agent
	lease clientv3.LeaseID
	// seenMod is the etcd modification revision of config/current last
	// seen (0: absent). Reading at rev, the key's is at most rev; the
	// first check reads the config again only if it changed since.
	seenMod int64
}

// follow watches config/current from revision rev+1 and checks etcd
// every CheckInterval, applying each new record and reporting the
// outcome, until the watch or a check fails (or ctx ends).
func (f *configFollower) follow(ctx context.Context, rev int64) error {
	a := f.a
	// WithRequireLeader ends the watch when the etcd member loses its
	// quorum, instead of waiting on it silently.
	// Watch blocks until etcd has created the watch, so it is created
	// aside: if etcd goes away meanwhile, the checks below notice.
	wchc := make(chan clientv3.WatchChan, 1)
	go func() {
		wchc <- a.store.cl.Watch(clientv3.WithRequireLeader(ctx), a.store.CurrentKey(), clientv3.WithRev(rev+1))
	}()
	var wch clientv3.WatchChan // nil until created
	tick := time.NewTicker(a.opts.CheckInterval)
	defer tick.Stop()
	for {
		var recs []*Record
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wch = <-wchc:
			continue
		case wr, ok := <-wch:
			if !ok {
				return errors.New("fleet: the watch of the config ended")
			}
			recs, err = f.watched(wr)
		case <-tick.C:
			recs, err = f.check(ctx)
		}
		if err != nil {
			return err
		}
		if err := f.applyAll(ctx, recs); err != nil {
			return err
		}
	}
}

// watched returns the records a watch response put.
func (f *configFollower) watched(wr clientv3.WatchResponse) ([]*Record, error) {
	if err := wr.Err(); err != nil {
		return nil, fmt.Errorf("fleet: watch of the config: %w", err)
	}
	var recs []*Record
	for _, ev := range wr.Events {
		if ev.Type != clientv3.EventTypePut {
			continue
		}
		r, err := decodeRecord(string(ev.Kv.Key), ev.Kv.Value)
		if err != nil {
			f.a.log.Error("fleet: ignored an unreadable config record", "err", err)
			continue
		}
		f.seenMod = ev.Kv.ModRevision
		recs = append(recs, r)
	}
	return recs, nil
}

// check proves etcd answers (a linearizable read needs its quorum) and
// catches a change a watch might have missed. It reads the key's
// metadata only, and the config itself only when the key changed since
// it was last seen.
func (f *configFollower) check(ctx context.Context) ([]*Record, error) {
	a := f.a
	tctx, tcancel := context.WithTimeout(ctx, a.opts.CheckTimeout)
	mod, err := a.store.currentModRevision(tctx)
	tcancel()
	if err != nil {
		return nil, fmt.Errorf("fleet: etcd check: %w", err)
	}
	if mod == f.seenMod {
		return nil, nil
	}
	tctx, tcancel = context.WithTimeout(ctx, a.opts.CheckTimeout)
	r, _, err := a.store.Current(tctx)
	tcancel()
	if err != nil && !errors.Is(err, ErrNoConfig) {
		return nil, fmt.Errorf("fleet: etcd check: %w", err)
	}
	f.seenMod = mod
	if r == nil {
		return nil, nil
	}
	return []*Record{r}, nil
}

// applyAll applies recs in order and reports the outcome once if any
// changed the status.
func (f *configFollower) applyAll(ctx context.Context, recs []*Record) error {
	changed := false
	for _, r := range recs {
		changed = f.a.apply(ctx, r) || changed
	}
	if !changed {
		return nil
	}
	return f.a.report(ctx, f.lease)
}

// apply reloads rec unless it is the revision in force or one already
// rejected; it reports whether the status changed.
func (a *Agent) apply(ctx context.Context, rec *Record) bool {
	if rec.Revision == a.status.Revision || rec.Revision == a.status.RejectedRevision {
		return false
	}
	cfg, err := rec.Parse()
	if err == nil {
		for _, w := range cfg.Warnings() {
			a.log.Warn(w, "revision", rec.Revision)
		}
		err = a.target.Reload(ctx, cfg)
	}
	if ctx.Err() != nil {
		return false // shutting down or reconnecting, not a verdict
	}
	if err != nil {
		a.status.RejectedRevision, a.status.RejectedError = rec.Revision, err.Error()
		a.log.Error("fleet: config revision rejected on this instance; the last good config keeps serving", "instance", a.opts.Instance, "revision", rec.Revision, "running", a.status.Revision, "err", err)
	} else {
		a.status.Revision, a.status.RejectedRevision, a.status.RejectedError = rec.Revision, 0, ""
		a.log.Info("fleet: config applied", "instance", a.opts.Instance, "revision", rec.Revision, "author", rec.Author, "message", rec.Message)
	}
	a.target.SetFleetStatus(a.status)
	return true
}

// report writes the instance's config status under its lease.
func (a *Agent) report(ctx context.Context, lease clientv3.LeaseID) error {
	r := InstanceReport{Instance: a.opts.Instance, Region: a.opts.Region, Revision: a.status.Revision, Status: "applied",
		RejectedRevision: a.status.RejectedRevision, Error: a.status.RejectedError, Time: a.opts.Now().UTC()}
	if r.RejectedRevision != 0 {
		r.Status = "rejected"
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("fleet: encode the instance report: %w", err)
	}
	return a.put(ctx, a.store.instanceConfigKey(a.opts.Instance), string(b), lease)
}

// warnNameInUse logs an error when this instance's name is registered
// under a lease that is still alive and is not this agent's: either an
// earlier run of this instance that died (its registration leaves within
// the lease TTL) or a second instance given the same name, which would
// probe, publish and campaign as this one and confuse the whole fleet.
func (a *Agent) warnNameInUse(ctx context.Context) {
	tctx, cancel := context.WithTimeout(ctx, a.opts.CheckTimeout)
	defer cancel()
	resp, err := a.store.cl.Get(tctx, a.store.instanceKey(a.opts.Instance))
	if err != nil || len(resp.Kvs) == 0 {
		return
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if lease == clientv3.NoLease || lease == a.lastLease {
		return
	}
	ttl, err := a.store.cl.TimeToLive(tctx, lease)
	if err != nil || ttl.TTL <= 0 {
		return
	}
	a.log.Error("fleet: another instance is registered under this instance's name: if it is an earlier run of this instance, it leaves within its lease TTL; otherwise two instances share one name and probe, publish and lead as one (fix: give every instance a unique --instance)",
		"instance", a.opts.Instance, "registered", string(resp.Kvs[0].Value), "ttl_left_s", ttl.TTL)
}

func (a *Agent) put(ctx context.Context, key, val string, lease clientv3.LeaseID) error {
	tctx, cancel := context.WithTimeout(ctx, a.opts.CheckTimeout)
	defer cancel()
	if _, err := a.store.cl.Put(tctx, key, val, clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("fleet: write %s: %w", key, err)
	}
	return nil
}
