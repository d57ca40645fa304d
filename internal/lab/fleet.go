package lab

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/embedded"
	"github.com/spillwaylb/spillway/internal/netcut"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve"
)

// Defaults of FleetOptions.
const (
	DefaultFleetInstances = 3
	DefaultFleetLeaseTTL  = 2 * time.Second
)

// FleetOptions configure `spillway lab --fleet`: the seed's table through
// a fleet of instances sharing one etcd, then a kill timeline.
type FleetOptions struct {
	// Options as for Run. Configs defaults to the seed's with-policy
	// config only; Requests, Rate and Concurrency are totals over the
	// fleet (each frontend gets Rate / Instances, through Concurrency
	// connections of its own).
	Options
	// Instances is the fleet's size (default 3; at least 2, and 3 with
	// the kill timeline, which kills two).
	Instances int
	// LeaseTTL is every lease's TTL: registrations, probe verdicts and
	// the election session (default 2 s, instead of serve's 10 s, so a
	// dead instance is noticed within seconds).
	LeaseTTL time.Duration
	// Probers is --fleet-probers (default fleet.DefaultProbers).
	Probers int
	// NoTable skips the table (the kill timeline only); NoKill skips the
	// kill timeline.
	NoTable, NoKill bool
	// Hold is how long the load runs before the first kill and after
	// the fleet has converged again (default 2 s each).
	Hold time.Duration
	// Together kills the leader and the prober at the same moment
	// instead of one after the other: the targets both probed lose both
	// probers at once.
	Together bool
}

func (o *FleetOptions) defaults() error {
	if len(o.Configs) == 0 {
		cs, err := SeedConfigs([]string{"with-policy"})
		if err != nil {
			return err
		}
		o.Configs = cs
	}
	if err := o.Options.defaults(); err != nil {
		return err
	}
	if o.Instances == 0 {
		o.Instances = DefaultFleetInstances
	}
	if o.Instances < 2 {
		return fmt.Errorf("lab: a fleet of %d instance: use at least 2", o.Instances)
	}
	if o.Instances < 3 && !o.NoKill {
		return fmt.Errorf("lab: the kill timeline kills two of the %d instances and needs one to survive (fix: 3 instances or more, or no kill timeline)", o.Instances)
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultFleetLeaseTTL
	}
	if o.Probers == 0 {
		o.Probers = fleet.DefaultProbers
	}
	if o.Hold <= 0 {
		o.Hold = 2 * time.Second
	}
	return nil
}

// FleetReport is the outcome of a fleet lab run: the table (Report, one
// row per scenario, each through every instance's frontend) and the kill
// timeline.
type FleetReport struct {
	Report
	// Instances are the fleet's instances in the table's runs.
	Instances []FleetInstance `json:"instances"`
	// Kill is the kill timeline (nil with NoKill).
	Kill *KillTimeline `json:"kill,omitempty"`
	// LeaseTTL and Probers echo the options.
	LeaseTTL time.Duration `json:"-"`
	Probers  int           `json:"-"`
}

// FleetInstance is one instance's name and region.
type FleetInstance struct {
	Name   string `json:"name"`
	Region string `json:"region"`
}

// KillTimeline is what happened when the leader, then another prober,
// died under load.
type KillTimeline struct {
	Config string   `json:"config"`
	Down   []string `json:"down"`
	// Leader and Prober are the instances killed (in that order);
	// NewLeader the one elected after the first kill; Survivors the rest.
	Leader    string   `json:"leader"`
	Prober    string   `json:"prober"`
	NewLeader string   `json:"newLeader"`
	Survivors []string `json:"survivors"`
	// NewLeaderAfter is the time from the first kill until a survivor
	// leads and every survivor names it; LeaderReowned and
	// ProberReowned the times from each kill until every target is
	// probed by exactly its owners among the instances left.
	NewLeaderAfter time.Duration `json:"newLeaderAfterNs"`
	LeaderReowned  time.Duration `json:"leaderTargetsReownedAfterNs"`
	ProberReowned  time.Duration `json:"proberTargetsReownedAfterNs"`
	// LeaderExpired and ProberExpired are the times from each kill until
	// the killed instance's registration left etcd (its lease expired;
	// the survivors then drop it from their live lists).
	LeaderExpired time.Duration `json:"leaderExpiredAfterNs"`
	ProberExpired time.Duration `json:"proberExpiredAfterNs"`
	// LeaderTargets and ProberTargets are how many targets the killed
	// instances probed.
	LeaderTargets, ProberTargets int `json:"-"`
	// Together: both were killed at once (ProberReowned is then the time
	// until all their targets were re-owned), and Orphaned targets had
	// both of them as probers. Otherwise ProberKilledAt is the time from
	// the first kill to the second.
	Together       bool          `json:"together"`
	Orphaned       int           `json:"orphanedTargets,omitempty"`
	ProberKilledAt time.Duration `json:"proberKilledAfterNs,omitempty"`
	// Windows split the load by time.
	Windows []Window `json:"windows"`
	// After is the failure row run again on the survivors after the
	// kills (Down plus the next zone).
	After *Result `json:"after"`
}

// Window is the load of one part of the kill timeline.
type Window struct {
	Name string `json:"name"`
	// Duration is the window's length.
	Duration time.Duration `json:"durationNs"`
	// Requests sent; Failed without a 200 (of those, OnKilled were sent
	// to a frontend being killed, before the clients moved away from it);
	// FromDown answered by a zone that is down (served but misrouted).
	Requests int `json:"requests"`
	Failed   int `json:"failed"`
	OnKilled int `json:"failedOnKilledFrontend"`
	FromDown int `json:"fromDownZones"`
}

// RunFleet runs the table through a fleet (a fresh fleet per scenario,
// all on one etcd embedded in this process, each under its own key
// prefix), then the kill timeline.
func RunFleet(ctx context.Context, o FleetOptions) (*FleetReport, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &FleetReport{Report: Report{Requests: o.Requests, FailMode: o.FailMode, Interval: o.Interval, Rate: o.Rate}, LeaseTTL: o.LeaseTTL, Probers: o.Probers}
	set, cleanup, err := newSettings(o.Interval)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	dir, err := os.MkdirTemp("", "spillway-lab-etcd-")
	if err != nil {
		return nil, fmt.Errorf("lab: etcd data directory: %w", err)
	}
	defer os.RemoveAll(dir)
	fmt.Fprint(o.Progress, "etcd (embedded, one member): ")
	m, err := embedded.StartSingle(ctx, "lab", dir, 20*time.Second)
	if err != nil {
		fmt.Fprintln(o.Progress, "failed")
		return nil, fmt.Errorf("lab: %w", err)
	}
	defer m.Close()
	fmt.Fprintf(o.Progress, "serving on %s\n", m.ClientAddr())
	fl := &labFleet{etcd: m.ClientAddr(), o: &o}

	if !o.NoTable {
		for _, c := range o.Configs {
			scenarios := o.Scenarios
			if len(scenarios) == 0 {
				if scenarios, err = defaultScenarios(c, set); err != nil {
					return rep, err
				}
			}
			for _, down := range scenarios {
				res, err := runScenario(ctx, c, down, set, &o.Options, fl.start)
				if err != nil {
					rep.Elapsed = time.Since(start)
					return rep, err
				}
				rep.Scenarios = append(rep.Scenarios, *res)
			}
		}
	}
	if !o.NoKill {
		if rep.Kill, err = fl.killTimeline(ctx, o.Configs[0], set); err != nil {
			rep.Elapsed = time.Since(start)
			return rep, err
		}
	}
	rep.Instances = fl.names
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// labFleet starts fleets on one etcd.
type labFleet struct {
	etcd   string
	o      *FleetOptions
	runs   int
	prefix string // the key prefix of the current run
	names  []FleetInstance
	// reaping tracks killed instances still stopping (kill).
	reaping sync.WaitGroup
}

// labInstance is one running instance: exactly what `spillway serve
// --fleet` runs (fleet.Start, fleet.NewInstance, serve.Server, Instance.Run)
// on an etcd client of its own.
type labInstance struct {
	name, region string
	cut          *netcut.Forwarder // its connection to the lab's etcd
	cl           *clientv3.Client
	srv          *serve.Server
	inst         *fleet.Instance
	cancel       context.CancelFunc
	done         chan error // the server's Run; the instance's Run closes instDone
	instDone     chan struct{}
	url          string
}

// start is the starter of the fleet's table runs.
func (f *labFleet) start(ctx context.Context, p *plan.Plan) ([]*serve.Server, func() error, error) {
	ins, stop, err := f.startFleet(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	srvs := make([]*serve.Server, len(ins))
	for i, in := range ins {
		srvs[i] = in.srv
	}
	return srvs, stop, nil
}

// startFleet pushes p's config under a fresh prefix and starts the
// instances on it, one region after another (primary first).
func (f *labFleet) startFleet(ctx context.Context, p *plan.Plan) (ins []*labInstance, stop func() error, err error) {
	f.runs++
	prefix := fmt.Sprintf("/spillway-lab/%d/", f.runs)
	f.prefix = prefix
	data, err := json.Marshal(p.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the config to push: %w", err)
	}
	cut, cl, err := f.dial()
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = fleet.NewStore(cl, prefix).Push(pctx, data, fleet.PushMeta{Author: "spillway lab", Message: "lab run", Source: p.Config.File})
	cancel()
	cl.Close()
	cut.Cut()
	if err != nil {
		return nil, nil, fmt.Errorf("push the config: %w", err)
	}
	var regions []string
	for _, g := range p.Groups {
		if !slices.Contains(regions, g.Region) {
			regions = append(regions, g.Region)
		}
	}
	sort.Strings(regions)
	if fe := p.Config.Frontends; len(fe) > 0 && fe[0].Region != "" {
		if i := slices.Index(regions, fe[0].Region); i > 0 {
			regions = append([]string{fe[0].Region}, slices.Delete(regions, i, i+1)...)
		}
	}
	if len(regions) == 0 {
		regions = []string{"none"}
	}
	stop = func() error {
		var errs []error
		for _, in := range ins {
			errs = append(errs, in.stop())
		}
		return errors.Join(errs...)
	}
	f.names = nil
	for i := range f.o.Instances {
		region := regions[i%len(regions)]
		name := fmt.Sprintf("lb%d-%s", i+1, region)
		in, err := f.startInstance(ctx, prefix, name, region)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("instance %s: %w", name, err)
		}
		ins = append(ins, in)
		f.names = append(f.names, FleetInstance{Name: name, Region: region})
	}
	return ins, stop, nil
}

// dial connects to the lab's etcd through a forwarder of the instance's
// own, which kill cuts.
func (f *labFleet) dial() (*netcut.Forwarder, *clientv3.Client, error) {
	cut, err := netcut.Listen(f.etcd)
	if err != nil {
		return nil, nil, fmt.Errorf("forward to the lab's etcd: %w", err)
	}
	cl, err := fleet.ClientConfig{Endpoints: []string{cut.Addr()}, DialTimeout: 5 * time.Second}.Dial()
	if err != nil {
		cut.Cut()
		return nil, nil, fmt.Errorf("dial the lab's etcd: %w", err)
	}
	return cut, cl, nil
}

// startInstance starts one instance as `spillway serve --fleet` does,
// with the lab's short lease TTL and checks.
func (f *labFleet) startInstance(ctx context.Context, prefix, name, region string) (*labInstance, error) {
	cut, cl, err := f.dial()
	if err != nil {
		return nil, err
	}
	closeAll := func() { cl.Close(); cut.Cut() }
	log := slog.New(slog.DiscardHandler)
	store := fleet.NewStore(cl, prefix)
	cfg, status, err := fleet.Start(ctx, store, "", 10*time.Second, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	inst, err := fleet.NewInstance(store, fleet.InstanceOptions{
		Instance: name, Region: region, Probers: f.o.Probers, Rate: true, Logger: log,
		LeaseTTL: f.o.LeaseTTL, CheckInterval: 200 * time.Millisecond, CheckTimeout: time.Second,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
	})
	if err != nil {
		closeAll()
		return nil, err
	}
	opts := serve.Options{WatchInterval: -1, Logger: log}
	if sh := inst.Share(); sh != nil {
		opts.ProbeShare = sh
	}
	if d := inst.Demand(); d != nil {
		opts.DemandShare = d
	}
	srv, err := serve.New(cfg, opts)
	if err != nil {
		closeAll()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	in := &labInstance{name: name, region: region, cut: cut, cl: cl, srv: srv, inst: inst, cancel: cancel, done: make(chan error, 1), instDone: make(chan struct{})}
	go func() { in.done <- srv.Run(runCtx) }()
	select {
	case <-srv.Ready():
	case err := <-in.done:
		cancel()
		closeAll()
		return nil, fmt.Errorf("serve: %w", err)
	}
	go func() { defer close(in.instDone); inst.Run(runCtx, srv, status) }()
	return in, nil
}

// stop stops the instance cleanly: its leases are revoked and it leaves
// the fleet at once.
func (in *labInstance) stop() error {
	if in.cancel == nil {
		return nil
	}
	in.cancel()
	in.cancel = nil
	<-in.instDone
	err := <-in.done
	in.cl.Close()
	in.cut.Cut()
	return err
}

// reap stops a killed instance's server and fleet goroutines (kill has
// cut its connections to etcd, so they cannot revoke anything).
func (in *labInstance) reap() {
	in.cl.Close()
	in.cancel()
	in.cancel = nil
	<-in.instDone
	<-in.done
}

// sample is one request of the kill timeline's load.
type sample struct {
	at   time.Time
	url  string
	code string
	zone string
}

// stream sends requests paced at a total rate through the live
// frontends, round-robin, until stopped, and records each one.
type stream struct {
	live    atomic.Pointer[[]string]
	mu      sync.Mutex
	samples []sample
	cancel  context.CancelFunc
	done    chan struct{}
}

func startStream(ctx context.Context, o *Options, urls []string) *stream {
	s := &stream{done: make(chan struct{})}
	s.setLive(urls)
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the lab's own self-signed certificate
		MaxIdleConnsPerHost: o.Concurrency,
		MaxConnsPerHost:     o.Concurrency,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ctx, s.cancel = context.WithCancel(ctx)
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range o.Concurrency * len(urls) {
		wg.Go(func() {
			for url := range jobs {
				at := time.Now()
				code, zone, _ := fetch(context.Background(), client, url)
				s.mu.Lock()
				s.samples = append(s.samples, sample{at: at, url: url, code: code, zone: zone})
				s.mu.Unlock()
			}
		})
	}
	go func() {
		defer close(s.done)
		defer tr.CloseIdleConnections()
		defer wg.Wait()
		defer close(jobs)
		start := time.Now()
		interval := time.Duration(float64(time.Second) / o.Rate)
		for i := 0; ; i++ {
			if sleep(ctx, time.Until(start.Add(time.Duration(i)*interval))) != nil {
				return
			}
			live := *s.live.Load()
			select {
			case jobs <- live[i%len(live)]:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

func (s *stream) setLive(urls []string) { s.live.Store(&urls) }

// stop stops sending and waits for the requests in flight.
func (s *stream) stop() []sample {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// window counts the samples sent in [from, to).
func window(name string, samples []sample, from, to time.Time, killed []string, down []string) Window {
	w := Window{Name: name, Duration: to.Sub(from)}
	for _, s := range samples {
		if s.at.Before(from) || !s.at.Before(to) {
			continue
		}
		w.Requests++
		if s.code != "200" {
			w.Failed++
			if slices.Contains(killed, s.url) {
				w.OnKilled++
			}
		}
		if slices.Contains(down, s.zone) {
			w.FromDown++
		}
	}
	return w
}

// killTimeline: a fresh fleet on config c with the primary region's
// first zone down and converged; load through every frontend; the
// leader is killed, then (once a new leader leads and the targets are
// re-owned) a non-leader prober; the load runs on for Hold; then the
// next zone fails and the failure row is measured on the survivors.
func (f *labFleet) killTimeline(ctx context.Context, c Config, set settings) (*KillTimeline, error) {
	o := f.o
	fmt.Fprintf(o.Progress, "%s / kill timeline: ", c.Name)
	p, fe, err := compile(c, set)
	if err != nil {
		return nil, err
	}
	zones := regionZones(p)[fe.Region]
	if len(zones) < 2 {
		return nil, fmt.Errorf("lab: kill timeline: the frontend's region %q needs two zones or more (one down during the kills, one more after)", fe.Region)
	}
	bs, err := StartBackends(ctx, p)
	if err != nil {
		return nil, err
	}
	defer bs.Close()
	ins, stop, err := f.startFleet(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("lab: kill timeline: %w", err)
	}
	defer func() { stop() }()
	defer f.reaping.Wait()
	k := &killRun{f: f, p: p, fe: fe, bs: bs, ins: ins, down: zones[:1], after: zones[:2], limit: 15*time.Second + 20*o.Interval}
	if err := k.setUp(ctx); err != nil {
		return nil, err
	}
	k.kt = &KillTimeline{Config: c.Name, Down: slices.Clone(k.down), Together: o.Together}
	k.st = startStream(ctx, &o.Options, k.urls)
	defer k.st.stop()
	if err := k.kills(ctx); err != nil {
		return nil, err
	}
	if k.kt.After, err = k.afterRow(ctx, c.Name); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "%s on the survivors: %s\n", ScenarioName(k.after), Verdict(k.kt.After))
	return k.kt, nil
}

// killRun is the state of one kill timeline; its methods are the
// timeline's stages, in order: setUp, kills (findLeader, then
// killTogether or killInTurn, then windows) and afterRow.
type killRun struct {
	f      *labFleet
	p      *plan.Plan
	fe     *config.Frontend
	bs     *Backends
	ins    []*labInstance // every instance started
	urls   []string       // their frontends' URLs
	limit  time.Duration  // the convergence bound of waitAll
	down   []string       // the zone down during the kills
	after  []string       // the zones down for the row after them
	st     *stream        // the load
	kt     *KillTimeline
	keys   []string       // every probe target
	leader *labInstance   // killed first (or with prober)
	prober *labInstance   // a prober that does not lead, killed second
	live   []*labInstance // the instances not killed
	// t1 is the (first) kill, t3 the end of the last convergence.
	t1, t3 time.Time
}

// labServers returns the servers of ins.
func labServers(ins []*labInstance) []*serve.Server {
	out := make([]*serve.Server, len(ins))
	for i, in := range ins {
		out[i] = in.srv
	}
	return out
}

// setUp finds each instance's frontend, waits until every instance
// finds every backend healthy, fails the down zone and waits until
// every instance has converged on it.
func (k *killRun) setUp(ctx context.Context) error {
	o := k.f.o
	for _, in := range k.ins {
		addr := in.srv.FrontendAddr(k.fe.Name)
		if addr == "" {
			return fmt.Errorf("lab: kill timeline: %s: frontend %s did not bind", in.name, k.fe.Name)
		}
		in.url = "https://" + addr + "/"
		k.urls = append(k.urls, in.url)
	}
	if err := sleep(ctx, 2*o.Interval); err != nil {
		return err
	}
	if err := waitAll(ctx, labServers(k.ins), k.limit, nil); err != nil {
		return fmt.Errorf("lab: kill timeline: backends never all became healthy: %w", err)
	}
	if err := k.f.fail(k.bs, k.down); err != nil {
		return err
	}
	if err := waitAll(ctx, labServers(k.ins), k.limit, k.down); err != nil {
		return fmt.Errorf("lab: kill timeline: no convergence with %s down: %w", ScenarioName(k.down), err)
	}
	fmt.Fprintf(o.Progress, "%s converged; load at %.0f rps over %d frontends... ", ScenarioName(k.down), o.Rate, len(k.ins))
	return nil
}

// kills runs the load for Hold, kills the leader and a prober (together
// or in turn) and waits for the fleet to converge after each kill, runs
// the load for Hold again, and splits the load into windows.
func (k *killRun) kills(ctx context.Context) error {
	o := k.f.o
	t0 := time.Now()
	if err := sleep(ctx, o.Hold); err != nil {
		return err
	}
	if err := k.findLeader(); err != nil {
		return err
	}
	kill := k.killInTurn
	if o.Together {
		kill = k.killTogether
	}
	if err := kill(ctx); err != nil {
		return err
	}
	if err := sleep(ctx, o.Hold); err != nil {
		return err
	}
	samples := k.st.stop()
	k.kt.Windows = k.windows(samples, t0, time.Now())
	for _, in := range k.live {
		k.kt.Survivors = append(k.kt.Survivors, in.name)
	}
	return nil
}

// findLeader collects every probe target (every target is owned by
// Probers instances, so the union of what each probes is every target)
// and the instance that leads the control loop.
func (k *killRun) findLeader() error {
	for _, in := range k.ins {
		for _, key := range in.share().Owned {
			if !slices.Contains(k.keys, key) {
				k.keys = append(k.keys, key)
			}
		}
	}
	li := slices.IndexFunc(k.ins, func(in *labInstance) bool { return in.inst.Loop().Stats().Leading })
	if li < 0 {
		return errors.New("lab: kill timeline: no instance leads the control loop")
	}
	k.leader = k.ins[li]
	k.kt.Leader, k.kt.LeaderTargets = k.leader.name, len(k.leader.share().Owned)
	k.live = slices.Delete(slices.Clone(k.ins), li, li+1)
	return nil
}

// killTogether kills the leader and a prober that does not lead at the
// same moment and waits until a new leader leads and their targets are
// re-owned.
func (k *killRun) killTogether(ctx context.Context) error {
	f, o, kt := k.f, k.f.o, k.kt
	pi := mostTargets(k.live, "")
	k.prober = k.live[pi]
	kt.Prober, kt.ProberTargets = k.prober.name, len(k.prober.share().Owned)
	all := make([]string, len(k.ins))
	for i, in := range k.ins {
		all[i] = in.name
	}
	for _, key := range k.keys {
		if ow := fleet.Owners(key, all, o.Probers); slices.Contains(ow, k.leader.name) && slices.Contains(ow, k.prober.name) && len(ow) == 2 {
			kt.Orphaned++
		}
	}
	k.live = slices.Delete(k.live, pi, pi+1)
	k.t1 = f.kill(k.st, k.live, k.leader, k.prober)
	le, pe := f.expiry(ctx, k.leader.name, k.t1), f.expiry(ctx, k.prober.name, k.t1)
	var newLeader string
	var err error
	kt.NewLeaderAfter, kt.LeaderReowned, newLeader, err = f.converge(ctx, k.live, k.keys, k.t1)
	if err != nil {
		return err
	}
	kt.NewLeader, kt.ProberReowned = newLeader, kt.LeaderReowned
	if kt.LeaderExpired, err = le(); err != nil {
		return err
	}
	if kt.ProberExpired, err = pe(); err != nil {
		return err
	}
	fmt.Fprintf(o.Progress, "leader %s and prober %s killed together: %s leads after %.1fs, targets re-owned after %.1fs... ", kt.Leader, kt.Prober, newLeader, kt.NewLeaderAfter.Seconds(), kt.LeaderReowned.Seconds())
	k.t3 = time.Now()
	return nil
}

// killInTurn kills the leader, waits until a new leader leads and its
// targets are re-owned, then kills the prober that does not lead and
// probes the most, and waits until its targets are re-owned.
func (k *killRun) killInTurn(ctx context.Context) error {
	f, o, kt := k.f, k.f.o, k.kt
	k.t1 = f.kill(k.st, k.live, k.leader)
	le := f.expiry(ctx, k.leader.name, k.t1)
	var newLeader string
	var err error
	kt.NewLeaderAfter, kt.LeaderReowned, newLeader, err = f.converge(ctx, k.live, k.keys, k.t1)
	if err != nil {
		return err
	}
	if kt.LeaderExpired, err = le(); err != nil {
		return err
	}
	kt.NewLeader = newLeader
	fmt.Fprintf(o.Progress, "leader %s killed: %s leads after %.1fs, targets re-owned after %.1fs... ", kt.Leader, newLeader, kt.NewLeaderAfter.Seconds(), kt.LeaderReowned.Seconds())
	if err := sleep(ctx, time.Second); err != nil {
		return err
	}
	pi := mostTargets(k.live, newLeader)
	if pi < 0 {
		return errors.New("lab: kill timeline: no instance left that does not lead")
	}
	k.prober = k.live[pi]
	kt.Prober, kt.ProberTargets = k.prober.name, len(k.prober.share().Owned)
	k.live = slices.Delete(k.live, pi, pi+1)
	t2 := f.kill(k.st, k.live, k.prober)
	pe := f.expiry(ctx, k.prober.name, t2)
	kt.ProberKilledAt = t2.Sub(k.t1)
	if _, kt.ProberReowned, _, err = f.converge(ctx, k.live, k.keys, t2); err != nil {
		return err
	}
	if kt.ProberExpired, err = pe(); err != nil {
		return err
	}
	fmt.Fprintf(o.Progress, "prober %s killed: re-owned after %.1fs... ", kt.Prober, kt.ProberReowned.Seconds())
	k.t3 = time.Now()
	return nil
}

// windows splits the load sent from t0 to end at the kills and the
// convergences after them.
func (k *killRun) windows(samples []sample, t0, end time.Time) []Window {
	killed := []string{k.leader.url, k.prober.url}
	t1, t3, down := k.t1, k.t3, k.down
	if k.f.o.Together {
		return []Window{
			window("before the kills", samples, t0, t1, killed, down),
			window("leader and prober killed, until a new leader leads and their targets are re-owned", samples, t1, t3, killed, down),
			window("after convergence", samples, t3, end, killed, down),
		}
	}
	t1c := t1.Add(max(k.kt.NewLeaderAfter, k.kt.LeaderReowned))
	t2 := t1.Add(k.kt.ProberKilledAt)
	return []Window{
		window("before the kills", samples, t0, t1, killed, down),
		window("leader killed, until a new leader leads and its targets are re-owned", samples, t1, t1c, killed, down),
		window("between the kills", samples, t1c, t2, killed, down),
		window("prober killed, until its targets are re-owned", samples, t2, t3, killed, down),
		window("after convergence", samples, t3, end, killed, down),
	}
}

// afterRow fails the next zone and measures the failure row on the
// survivors.
func (k *killRun) afterRow(ctx context.Context, cfgName string) (*Result, error) {
	o := k.f.o
	if err := k.f.fail(k.bs, k.after[len(k.down):]); err != nil {
		return nil, err
	}
	failed := time.Now()
	if err := waitAll(ctx, labServers(k.live), k.limit, k.after); err != nil {
		return nil, fmt.Errorf("lab: kill timeline: no convergence with %s down after the kills: %w", ScenarioName(k.after), err)
	}
	res, zoneRegion := newResult(k.p, k.fe, cfgName, slices.Clone(k.after), o.Requests, time.Since(failed))
	var liveURLs []string
	for _, in := range k.live {
		liveURLs = append(liveURLs, in.url)
	}
	if err := sleep(ctx, 2*o.Interval); err != nil {
		return nil, err
	}
	sendStart := time.Now()
	if err := send(ctx, liveURLs, &o.Options, zoneRegion, res); err != nil {
		return nil, fmt.Errorf("lab: kill timeline: %w", err)
	}
	res.Elapsed = time.Since(sendStart)
	return res, nil
}

func (in *labInstance) share() fleet.ProbeShareStats {
	if s := in.inst.Share(); s != nil {
		return s.Stats()
	}
	return fleet.ProbeShareStats{}
}

func (f *labFleet) fail(bs *Backends, zones []string) error {
	return failZones(bs, f.o.FailMode, zones)
}

// kill moves the clients off the victims' frontends to live's (as
// anycast would once they stop answering) and kills the victims at the
// same moment; it returns the time of the kill.
func (f *labFleet) kill(st *stream, live []*labInstance, victims ...*labInstance) time.Time {
	var urls []string
	for _, in := range live {
		urls = append(urls, in.url)
	}
	st.setLive(urls)
	// The crash, as far as the fleet can tell: from the cut on, nothing
	// the victims hold can be revoked and their leases expire after the
	// TTL. Their goroutines stop in the background (reaping), so the
	// timings measured from here are the fleet's, not the teardown's.
	t := time.Now()
	for _, v := range victims {
		v.cut.Cut()
	}
	for _, v := range victims {
		f.reaping.Go(v.reap)
	}
	return t
}

// expiry starts waiting, in the background, until the registration of
// instance name leaves etcd (its lease expired); the function it returns
// waits for that and gives the time from since.
func (f *labFleet) expiry(ctx context.Context, name string, since time.Time) func() (time.Duration, error) {
	type result struct {
		d   time.Duration
		err error
	}
	ch := make(chan result, 1)
	go func() {
		d, err := f.expired(ctx, name, since)
		ch <- result{d, err}
	}()
	return func() (time.Duration, error) {
		r := <-ch
		return r.d, r.err
	}
}

// expired waits until the registration of instance name leaves etcd and
// returns the time since since.
func (f *labFleet) expired(ctx context.Context, name string, since time.Time) (time.Duration, error) {
	cut, cl, err := f.dial()
	if err != nil {
		return 0, err
	}
	defer func() { cl.Close(); cut.Cut() }()
	key := f.prefix + "instances/" + name
	deadline := since.Add(30*time.Second + 5*f.o.LeaseTTL)
	for time.Now().Before(deadline) {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := cl.Get(gctx, key, clientv3.WithCountOnly())
		cancel()
		if err == nil && resp.Count == 0 {
			return time.Since(since), nil
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("lab: kill timeline: %s still registered %s after its kill", name, time.Since(since).Round(time.Millisecond))
}

// nothingMoved explains a prober kill that moved no target: with as many
// probers per target as instances left after the first kill, the
// survivors already probed every target.
func nothingMoved(k *KillTimeline) string {
	if len(k.Survivors) == 1 && k.ProberReowned < k.ProberExpired {
		return " (nothing to move: the survivor already probed every target)"
	}
	return ""
}

// mostTargets returns the index in ins of the instance, other than
// skip, that probes the most targets (-1: none).
func mostTargets(ins []*labInstance, skip string) int {
	pi := -1
	for i, in := range ins {
		if in.name != skip && (pi < 0 || len(in.share().Owned) > len(ins[pi].share().Owned)) {
			pi = i
		}
	}
	return pi
}

// converge waits until one of live leads and every one of them names it
// (newLeader: the time from since), and until every key is probed by
// exactly its owners among live (reowned).
func (f *labFleet) converge(ctx context.Context, live []*labInstance, keys []string, since time.Time) (newLeader, reowned time.Duration, leader string, err error) {
	names := make([]string, len(live))
	for i, in := range live {
		names[i] = in.name
	}
	deadline := since.Add(30*time.Second + 5*f.o.LeaseTTL)
	for newLeader == 0 || reowned == 0 {
		if newLeader == 0 {
			leading := ""
			for _, in := range live {
				if s := in.inst.Loop().Stats(); s.Leading && s.Connected {
					leading = in.name
				}
			}
			agreed := leading != ""
			for _, in := range live {
				agreed = agreed && in.inst.Loop().Stats().Leader == leading
			}
			if agreed {
				newLeader, leader = time.Since(since), leading
			}
		}
		if reowned == 0 && owned(live, names, keys, f.o.Probers) {
			reowned = time.Since(since)
		}
		if time.Now().After(deadline) {
			return 0, 0, "", fmt.Errorf("lab: kill timeline: not converged %s after the kill (leader found: %v, targets re-owned: %v)", time.Since(since).Round(time.Millisecond), newLeader > 0, reowned > 0)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return 0, 0, "", err
		}
	}
	return newLeader, reowned, leader, nil
}

// owned reports whether every instance of live probes exactly the keys
// fleet.Owners gives it among names, and follows the fleet.
func owned(live []*labInstance, names, keys []string, probers int) bool {
	for _, in := range live {
		st := in.share()
		var want []string
		for _, k := range keys {
			if slices.Contains(fleet.Owners(k, names, probers), in.name) {
				want = append(want, k)
			}
		}
		sort.Strings(want)
		if !st.Connected || !slices.Equal(st.Owned, want) {
			return false
		}
	}
	return true
}

// WriteFleetJSON prints the fleet report as JSON: {"scenarios",
// "instances", "kill"}.
func WriteFleetJSON(w io.Writer, rep *FleetReport) error {
	out := struct {
		Scenarios []Result        `json:"scenarios"`
		Instances []FleetInstance `json:"instances"`
		Kill      *KillTimeline   `json:"kill,omitempty"`
	}{Scenarios: make([]Result, len(rep.Scenarios)), Instances: rep.Instances, Kill: rep.Kill}
	for i, r := range rep.Scenarios {
		if r.Down == nil {
			r.Down = []string{}
		}
		out.Scenarios[i] = r
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("lab: encode report: %w", err)
	}
	return nil
}

// WriteFleetTable prints the table (as WriteTable, with the fleet named
// under the title) and the kill timeline.
func WriteFleetTable(w io.Writer, rep *FleetReport) error {
	var names []string
	for _, in := range rep.Instances {
		names = append(names, fmt.Sprintf("%s (%s)", in.Name, in.Region))
	}
	table := rep.Report
	table.Fleet = fmt.Sprintf("Fleet: %d instances on one embedded etcd:\n  %s.\nEach row: a fresh fleet on fresh backends, the config pushed once; its requests\ngo round-robin through the %d instances' frontends at the same total rate.\n%d probers per target; every lease %s.",
		len(rep.Instances), strings.Join(names, ", "), len(rep.Instances), rep.Probers, rep.LeaseTTL)
	if slices.ContainsFunc(table.Scenarios, func(r Result) bool { return r.Proxies > 0 }) {
		table.Fleet += fmt.Sprintf("\nWATERFALL_BY_REGION: each frontend's requests come from a client address of\nits own (127.0.0.1 to 127.0.0.%d), and the second-layer proxies a client\nreaches depend on its address: the zones are %d clients' draws mixed, nearer\nthe even-by-capacity split of many clients than one client's draw.", len(rep.Instances), len(rep.Instances))
	}
	table.Elapsed = 0
	if len(table.Scenarios) > 0 {
		if err := WriteTable(w, &table); err != nil {
			return err
		}
	}
	var b strings.Builder
	if k := rep.Kill; k != nil {
		fmt.Fprintf(&b, "\nKill timeline (%s, %s, load at %.0f rps over the live frontends):\n", k.Config, ScenarioName(k.Down), rep.Rate)
		if k.Together {
			fmt.Fprintf(&b, "  killed the control-loop leader %s (probing %d targets) and the prober %s (probing %d, not leading) at once;\n  %d targets had both as probers\n",
				k.Leader, k.LeaderTargets, k.Prober, k.ProberTargets, k.Orphaned)
			fmt.Fprintf(&b, "  their leases expired after %s and %s; %s leads after %s; their targets re-owned after %s\n",
				k.LeaderExpired.Round(time.Millisecond), k.ProberExpired.Round(time.Millisecond), k.NewLeader, k.NewLeaderAfter.Round(time.Millisecond), k.LeaderReowned.Round(time.Millisecond))
		} else {
			fmt.Fprintf(&b, "  killed the control-loop leader %s (probing %d targets): its lease expired after %s; %s leads after %s; its targets re-owned after %s\n",
				k.Leader, k.LeaderTargets, k.LeaderExpired.Round(time.Millisecond), k.NewLeader, k.NewLeaderAfter.Round(time.Millisecond), k.LeaderReowned.Round(time.Millisecond))
			fmt.Fprintf(&b, "  killed the prober %s (probing %d targets, not leading): its lease expired after %s; its targets re-owned after %s%s\n",
				k.Prober, k.ProberTargets, k.ProberExpired.Round(time.Millisecond), k.ProberReowned.Round(time.Millisecond), nothingMoved(k))
		}
		fmt.Fprintf(&b, "  (a kill cuts the instance's TCP connections to etcd first, so its leases expire after the TTL, %s, instead of being revoked)\n\n", rep.LeaseTTL)
		rows := [][]string{{"WINDOW", "LENGTH", "REQUESTS", "FAILED", "ON KILLED FE", "FROM DOWN ZONES"}}
		for _, win := range k.Windows {
			rows = append(rows, []string{win.Name, fmt.Sprintf("%.1fs", win.Duration.Seconds()), strconv.Itoa(win.Requests), strconv.Itoa(win.Failed), strconv.Itoa(win.OnKilled), strconv.Itoa(win.FromDown)})
		}
		widths := make([]int, len(rows[0]))
		for _, r := range rows {
			for j, c := range r {
				widths[j] = max(widths[j], len(c))
			}
		}
		for _, r := range rows {
			line := "  " + r[0] + strings.Repeat(" ", widths[0]-len(r[0]))
			for j := 1; j < len(r); j++ {
				line += "   " + strings.Repeat(" ", widths[j]-len(r[j])) + r[j]
			}
			b.WriteString(line + "\n")
		}
		if a := k.After; a != nil {
			after := Report{Scenarios: []Result{*a}, Requests: a.Requests, FailMode: rep.FailMode, Interval: rep.Interval, Rate: rep.Rate,
				Brief: true, Fleet: fmt.Sprintf("After the kills, on the survivor(s) %s: the next zone fails.", strings.Join(k.Survivors, ", "))}
			b.WriteString("\n")
			if _, err := io.WriteString(w, b.String()); err != nil {
				return fmt.Errorf("lab: write report: %w", err)
			}
			b.Reset()
			if err := WriteTable(w, &after); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(&b, "\nfleet lab in %.1fs\n", rep.Elapsed.Seconds())
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("lab: write report: %w", err)
	}
	return nil
}
