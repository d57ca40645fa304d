package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// drainConfig: one service over two zones of two endpoints each, with
// auto-capacity drain and the default 60 s undrain hold.
const drainConfig = `
healthChecks: [{name: hc, type: HTTP}]
serviceLbPolicies:
- {name: pol, loadBalancingAlgorithm: SPRAY_TO_REGION, autoCapacityDrain: {enable: true}}
networkEndpointGroups:
- {name: south, zone: us-south1-a, endpoints: [{ipAddress: 10.0.0.1, port: 80}, {ipAddress: 10.0.0.2, port: 80}]}
- {name: east, zone: us-east4-a, endpoints: [{ipAddress: 10.1.0.1, port: 80}, {ipAddress: 10.1.0.2, port: 80}]}
backendServices:
- name: bs
  healthChecks: [hc]
  serviceLbPolicy: pol
  backends:
  - {group: south, balancingMode: RATE, maxRatePerEndpoint: 100}
  - {group: east, balancingMode: RATE, maxRatePerEndpoint: 100}
urlMaps: [{name: um, defaultService: bs}]
`

// drainHost is one instance's control state, driven directly with
// verdicts and ticks on a virtual clock the test moves (standing in for
// serve's event loop). It records every change of the south backend's
// Drained, and every drain decision a follower made by itself.
type drainHost struct {
	name string
	mu   sync.Mutex
	p    *plan.Plan
	st   *control.State
	now  time.Time
	// flips lists south's Drained after each change; selfDecided counts
	// drain changes on a follower that did not come from ApplyDrain.
	flips       []bool
	selfDecided int
}

func newDrainHost(t *testing.T, name string, now time.Time) *drainHost {
	t.Helper()
	c, err := config.Parse([]byte(drainConfig), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return &drainHost{name: name, p: p, st: control.New(p), now: now}
}

func (h *drainHost) DrainSnapshot(context.Context) ([]control.DrainEntry, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st.DrainSnapshot(), nil
}

func (h *drainHost) ApplyDrain(_ context.Context, s []control.DrainEntry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.ApplyDrain(s, h.now)
	h.record()
	return nil
}

func (h *drainHost) SetDrainFollower(_ context.Context, f bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.SetDrainFollower(f)
	return nil
}

// record notes south's Drained when it changed; h.mu is held.
func (h *drainHost) record() {
	d := h.st.Drain(0, 0).Drained
	if len(h.flips) == 0 && !d {
		return
	}
	if len(h.flips) == 0 || h.flips[len(h.flips)-1] != d {
		h.flips = append(h.flips, d)
	}
}

// step runs f on the state at the virtual time now and checks that a
// follower's drain state did not change by itself.
func (h *drainHost) step(now time.Time, f func(*control.State)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now = now
	before, _ := json.Marshal(h.st.DrainSnapshot())
	follower := h.st.DrainFollower()
	f(h.st)
	after, _ := json.Marshal(h.st.DrainSnapshot())
	if follower && string(before) != string(after) {
		h.selfDecided++
	}
	h.record()
}

// southHealthy sets how many of south's two members are healthy.
func (h *drainHost) southHealthy(n int, now time.Time) {
	h.step(now, func(st *control.State) {
		for i, e := range h.p.Services[0].Backends[0].Endpoints {
			st.ObserveVerdict(e.ID, i < n, "", now)
		}
	})
}

func (h *drainHost) tick(now time.Time) { h.step(now, func(st *control.State) { st.Tick(now) }) }

func (h *drainHost) south() control.DrainState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st.Drain(0, 0)
}

type loopInstance struct {
	host   *drainHost
	loop   *fleet.ControlLoop
	cancel context.CancelFunc
	done   chan struct{}
}

func startLoop(t *testing.T, e *fleettest.Etcd, name string, now time.Time) *loopInstance {
	t.Helper()
	l, err := fleet.NewControlLoop(fleet.NewStore(dial(t, e), ""), fleet.ControlLoopOptions{
		Instance: name, LeaseTTL: 2 * time.Second, PublishInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil)).With("test", name),
	})
	if err != nil {
		t.Fatal(err)
	}
	in := &loopInstance{host: newDrainHost(t, name, now), loop: l, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() { defer close(in.done); l.Run(ctx, in.host) }()
	t.Cleanup(in.stop)
	return in
}

// stop ends the instance's loop (its lease is revoked) and waits for it.
func (in *loopInstance) stop() {
	in.cancel()
	<-in.done
}

// oneLeader waits until exactly one of ins leads (connected to etcd) and
// all of them name it.
func oneLeader(t *testing.T, ins []*loopInstance) *loopInstance {
	t.Helper()
	var leader *loopInstance
	eventually(t, "exactly one leader, named by all", func() (bool, string) {
		leader = nil
		n := 0
		var got []string
		for _, in := range ins {
			s := in.loop.Stats()
			got = append(got, fmt.Sprintf("%s: connected %v, leading %v, leader %q", in.host.name, s.Connected, s.Leading, s.Leader))
			if s.Connected && s.Leading {
				n++
				leader = in
			}
		}
		if n != 1 {
			return false, strings.Join(got, "; ")
		}
		for _, in := range ins {
			if in.loop.Stats().Leader != leader.host.name {
				return false, strings.Join(got, "; ")
			}
		}
		return true, ""
	})
	return leader
}

// TestControlLoopFailover: three instances elect one leader; it drains a
// zone whose health fell below 25% and the others apply it; when it stops
// another is elected, which continues the undrain hold the first one had
// started, without an undrain or a redrain on any instance.
func TestControlLoopFailover(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ins []*loopInstance
	for _, n := range []string{"i1", "i2", "i3"} {
		ins = append(ins, startLoop(t, e, n, t0))
	}
	all := func(what string, ok func(*loopInstance) bool, of []*loopInstance) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			var got []string
			done := true
			for _, in := range of {
				if !ok(in) {
					done = false
				}
				got = append(got, fmt.Sprintf("%s: %+v", in.host.name, in.host.south()))
			}
			return done, strings.Join(got, "; ")
		})
	}
	first := oneLeader(t, ins)
	var followers []*loopInstance
	for _, in := range ins {
		if in != first {
			followers = append(followers, in)
		}
	}
	// Every instance sees the same verdicts (the shared health view);
	// the followers first, so a follower that decided by itself would
	// drain before the leader's state arrives.
	for _, in := range followers {
		in.host.southHealthy(0, t0)
	}
	for _, in := range followers {
		if d := in.host.south(); d.Drained {
			t.Fatalf("%s drained south by itself: %+v", in.host.name, d)
		}
	}
	first.host.southHealthy(0, t0)
	if !first.host.south().Drained {
		t.Fatalf("leader %s did not drain south at 0%% healthy", first.host.name)
	}
	all("south drained on every instance, since t0", func(in *loopInstance) bool {
		d := in.host.south()
		return d.Drained && d.Since.Equal(t0)
	}, ins)

	// Recovery starts at t0+10s: the hold would end at t0+70s.
	recovered := t0.Add(10 * time.Second)
	for _, in := range ins {
		in.host.southHealthy(2, recovered)
	}
	all("the undrain hold from t0+10s on every instance", func(in *loopInstance) bool {
		d := in.host.south()
		return d.Drained && d.RecoveringSince.Equal(recovered)
	}, ins)

	// The leader stops at t0+40s; another is elected.
	takeover := t0.Add(40 * time.Second)
	for _, in := range ins {
		in.host.tick(takeover)
	}
	stopped := time.Now()
	first.stop()
	second := oneLeader(t, followers)
	t.Logf("%s elected %v after %s began to stop", second.host.name, time.Since(stopped).Round(time.Millisecond), first.host.name)
	if second == first {
		t.Fatal("the stopped leader still leads")
	}
	if d := second.host.south(); !d.Drained || !d.RecoveringSince.Equal(recovered) || !d.Since.Equal(t0) {
		t.Fatalf("new leader %s: south %+v, want still drained since t0, recovering since t0+10s", second.host.name, d)
	}
	second.host.tick(t0.Add(69 * time.Second))
	if !second.host.south().Drained {
		t.Fatalf("new leader %s undrained at t0+69s, before the hold begun at t0+10s ended", second.host.name)
	}
	undrained := recovered.Add(60 * time.Second)
	for _, in := range followers {
		in.host.tick(undrained)
	}
	if d := second.host.south(); d.Drained || !d.UndrainedAt.Equal(undrained) {
		t.Fatalf("new leader %s at t0+70s: south %+v, want undrained then", second.host.name, d)
	}
	all("south undrained at t0+70s on the survivors", func(in *loopInstance) bool {
		d := in.host.south()
		return !d.Drained && d.UndrainedAt.Equal(undrained)
	}, followers)

	for _, in := range ins {
		in.host.mu.Lock()
		flips, self := in.host.flips, in.host.selfDecided
		in.host.mu.Unlock()
		want := "[true false]"
		if in == first {
			want = "[true]"
		}
		if got := fmt.Sprint(flips); got != want {
			t.Errorf("%s: south's Drained went %s, want %s (no flap on failover)", in.host.name, got, want)
		}
		if self != 0 && in != first && in != second {
			t.Errorf("%s, a follower throughout, changed its drain state by itself %d times", in.host.name, self)
		}
	}
	t.Logf("leaders: %s then %s; writes %d and %d", first.host.name, second.host.name, first.loop.Stats().Writes, second.loop.Stats().Writes)
}

// TestControlLoopWithoutEtcd: when etcd is lost a follower keeps the
// drain state it last applied (whatever its own verdicts say) and the
// leader keeps deciding locally; once etcd is back the leader, still the
// last to publish, carries on from its local state (no redrain) and
// publishes it.
func TestControlLoopWithoutEtcd(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ins := []*loopInstance{startLoop(t, e, "i1", t0), startLoop(t, e, "i2", t0)}
	leader := oneLeader(t, ins)
	follower := ins[0]
	if follower == leader {
		follower = ins[1]
	}
	follower.host.southHealthy(0, t0)
	leader.host.southHealthy(0, t0)
	eventually(t, "the follower applying the drain", func() (bool, string) {
		d := follower.host.south()
		return d.Drained, fmt.Sprintf("%+v", d)
	})

	stopped := time.Now()
	e.Stop()
	t.Logf("etcd stopped in %v", time.Since(stopped).Round(time.Millisecond))
	eventually(t, "both loops noticing etcd is gone", func() (bool, string) {
		a, b := leader.loop.Stats(), follower.loop.Stats()
		return !a.Connected && !b.Connected, fmt.Sprintf("leader %+v, follower %+v", a, b)
	})
	t.Logf("both loops disconnected %v after the stop began", time.Since(stopped).Round(time.Millisecond))
	// South recovers and stays up past the hold, on both.
	recovered, past := t0.Add(10*time.Second), t0.Add(71*time.Second)
	for _, in := range ins {
		in.host.southHealthy(2, recovered)
		in.host.tick(past)
	}
	if d := follower.host.south(); !d.Drained || !d.RecoveringSince.IsZero() {
		t.Fatalf("follower without etcd: south %+v, want the last applied state (drained, no hold of its own)", d)
	}
	if d := leader.host.south(); d.Drained || !d.UndrainedAt.Equal(past) {
		t.Fatalf("leader without etcd: south %+v, want undrained locally at t0+71s", d)
	}

	// The follower leaves while etcd is down, so the old leader is the
	// first to campaign again (which of several rejoining instances wins
	// is a race: see docs/fleet.md).
	follower.stop()
	if d := follower.host.south(); !d.Drained {
		t.Fatalf("follower after etcd was lost: south %+v, want still drained", d)
	}
	e.Restart()
	if again := oneLeader(t, []*loopInstance{leader}); again != leader {
		t.Fatal("the old leader is not leading after etcd came back")
	}
	if d := leader.host.south(); d.Drained || !d.UndrainedAt.Equal(past) {
		t.Fatalf("old leader after rejoining: south %+v, want its local undrain (at t0+71s) kept", d)
	}
	// A new instance applies the state the old leader decided without
	// etcd, not the older one published before.
	late := startLoop(t, e, "i3", past)
	eventually(t, "a new instance applying the undrain decided without etcd", func() (bool, string) {
		d := late.host.south()
		return late.loop.Stats().Applied > 0 && !d.Drained && d.UndrainedAt.Equal(past), fmt.Sprintf("%+v, stats %+v", d, late.loop.Stats())
	})
	for _, in := range []*loopInstance{leader, late} {
		in.host.mu.Lock()
		flips := fmt.Sprint(in.host.flips)
		in.host.mu.Unlock()
		want := "[true false]"
		if in == late {
			want = "[]"
		}
		if flips != want {
			t.Errorf("%s: south's Drained went %s, want %s (no redrain on rejoin)", in.host.name, flips, want)
		}
	}
}

// drainZonesConfig: one service with auto-capacity drain over the zones
// given (us-east1-b, -c, ...), fast probes and a 1 s undrain hold.
func drainZonesConfig(zones ...[]*hcBackend) string {
	var c strings.Builder
	c.WriteString(`healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 200, timeoutMs: 150, healthyThreshold: 2, unhealthyThreshold: 2, httpHealthCheck: {requestPath: /healthz}}
serviceLbPolicies:
- {name: pol, loadBalancingAlgorithm: SPRAY_TO_REGION, autoCapacityDrain: {enable: true}}
spillway: {undrainHoldSec: 1}
networkEndpointGroups:
`)
	for i, zone := range zones {
		fmt.Fprintf(&c, "- name: neg-%d\n  zone: us-east1-%c\n  endpoints:\n", i, 'b'+i)
		for _, be := range zone {
			host, port, _ := strings.Cut(be.addr, ":")
			fmt.Fprintf(&c, "  - {ipAddress: %s, port: %s}\n", host, port)
		}
	}
	c.WriteString(`backendServices:
- name: bs
  healthChecks: [hc]
  serviceLbPolicy: pol
  backends:
`)
	for i := range zones {
		fmt.Fprintf(&c, "  - {group: neg-%d, balancingMode: RATE, maxRatePerEndpoint: 100000}\n", i)
	}
	c.WriteString(`urlMaps:
- {name: um, defaultService: bs}
frontends:
- ` + httpFrontend + "\n")
	return c.String()
}

// node is one in-process fleet instance as spillway serve --fleet runs
// it: a real server with its agent, probe share and control loop.
type node struct {
	s    *sharded
	loop *fleet.ControlLoop
	stop func()
}

func startNode(t *testing.T, e *fleettest.Etcd, name string, probers int) *node {
	t.Helper()
	s := startSharded(t, e, name, probers)
	loop, err := fleet.NewControlLoop(fleet.NewStore(s.cl, ""), fleet.ControlLoopOptions{
		Instance: name, LeaseTTL: 2 * time.Second, PublishInterval: 50 * time.Millisecond,
		CheckTimeout: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.srv.SetFleetSources(fleet.Sources(loop, s.share, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); loop.Run(ctx, s.srv) }()
	n := &node{s: s, loop: loop}
	n.stop = func() { cancel(); <-done }
	t.Cleanup(n.stop)
	return n
}

// TestControlLoopServers runs the control loop on real servers (each
// with its agent and probe share, as spillway serve --fleet runs them):
// a zone whose backends fail is drained by the leader and the follower's
// server applies it; when the leader stops, the other server leads with
// the zone still drained, and undrains it once it recovers.
func TestControlLoopServers(t *testing.T) {
	// Not parallel: see TestMain.
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	var zoneA, zoneB []*hcBackend
	for i := range 2 {
		zoneA = append(zoneA, newHCBackend(t, fmt.Sprintf("127.0.0.%d", 30+i)))
		zoneB = append(zoneB, newHCBackend(t, fmt.Sprintf("127.0.0.%d", 40+i)))
	}
	push(t, st, drainZonesConfig(zoneA, zoneB))
	var nodes []*node
	for _, name := range []string{"i1", "i2"} {
		nodes = append(nodes, startNode(t, e, name, 2))
	}
	var loops []*loopInstance
	for _, n := range nodes {
		loops = append(loops, &loopInstance{host: &drainHost{name: n.s.name}, loop: n.loop})
	}
	leader := oneLeader(t, loops)
	var first, other *node
	for _, n := range nodes {
		if n.loop == leader.loop {
			first = n
		} else {
			other = n
		}
	}
	drained := func(n *node) bool { return n.s.srv.Snapshot().View.Backend(0, 0).Drained }
	for _, b := range zoneA {
		b.failing.Store(true)
	}
	for _, n := range nodes {
		eventually(t, n.s.name+" with zone us-east1-b drained", func() (bool, string) {
			return drained(n), fmt.Sprintf("%+v", n.loop.Stats())
		})
	}
	if st := other.loop.Stats(); st.Leading || st.Applied == 0 || st.Writes != 0 {
		t.Errorf("follower %s: %+v, want a follower that applied the leader's state and wrote nothing", other.s.name, st)
	}
	// The leader and each instance's probing are visible in /health and
	// /metrics over the admin API.
	for _, n := range nodes {
		var r report.Health
		if err := json.Unmarshal([]byte(adminGet(t, n.s.srv, "/health")), &r); err != nil {
			t.Fatal(err)
		}
		f := r.Fleet
		if f == nil || f.Control == nil || f.Probing == nil {
			t.Fatalf("%s: /health fleet status %+v lacks control or probing", n.s.name, f)
		}
		leading := n == first
		if f.Control.Leader != first.s.name || f.Control.Leading != leading || !f.Control.Connected {
			t.Errorf("%s: /health fleet.control %+v, want leader %s, leading %v, connected", n.s.name, *f.Control, first.s.name, leading)
		}
		// 4 targets, 2 probers, 2 instances: each probes all 4.
		if f.Probing.Targets != 4 || f.Probing.Probing != 4 || !f.Probing.Connected {
			t.Errorf("%s: /health fleet.probing %+v, want 4 of 4 targets, connected", n.s.name, *f.Probing)
		}
		m := adminGet(t, n.s.srv, "/metrics")
		for _, want := range []string{fmt.Sprintf("spillway_fleet_control_leader %d", b2i(leading)), "spillway_fleet_probe_targets 4"} {
			if !strings.Contains(m, want) {
				t.Errorf("%s: /metrics lacks %q:\n%s", n.s.name, want, grepFleet(m))
			}
		}
	}

	first.stop()
	first.s.stop()
	eventually(t, other.s.name+" leading", func() (bool, string) {
		st := other.loop.Stats()
		return st.Connected && st.Leading, fmt.Sprintf("%+v", st)
	})
	if !drained(other) {
		t.Fatalf("new leader %s: zone us-east1-b not drained after the failover", other.s.name)
	}
	for _, b := range zoneA {
		b.failing.Store(false)
	}
	eventually(t, other.s.name+" undraining zone us-east1-b after it recovered and held", func() (bool, string) {
		return !drained(other), fmt.Sprintf("%+v", other.loop.Stats())
	})
}

// TestControlLoopRewritesForeignDrain: a control/drain written by someone
// else is overwritten by the leader, which otherwise writes nothing while
// nothing changes.
func TestControlLoopRewritesForeignDrain(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	cl := dial(t, e)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := startLoop(t, e, "i1", t0)
	oneLeader(t, []*loopInstance{in})
	in.host.southHealthy(0, t0)
	published := func() (fleet.DrainRecord, string) {
		resp, err := cl.Get(ctxT(t), fleet.DefaultPrefix+"control/drain")
		if err != nil || len(resp.Kvs) == 0 {
			return fleet.DrainRecord{}, fmt.Sprintf("err %v, %d keys", err, len(resp.Kvs))
		}
		var rec fleet.DrainRecord
		if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
			t.Fatal(err)
		}
		return rec, string(resp.Kvs[0].Value)
	}
	drainedBy := func(leader string) (bool, string) {
		rec, raw := published()
		return rec.Leader == leader && len(rec.Backends) == 1 && rec.Backends[0].Drained, raw
	}
	eventually(t, "south drained in control/drain", func() (bool, string) { return drainedBy("i1") })
	if _, err := cl.Put(ctxT(t), fleet.DefaultPrefix+"control/drain", `{"leader": "someone", "backends": []}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader's state written again", func() (bool, string) { return drainedBy("i1") })
	before := in.loop.Stats().Writes
	time.Sleep(time.Second) // 20 publish intervals with nothing changing
	if after := in.loop.Stats().Writes; after != before {
		t.Errorf("%d writes in 1 s with nothing changing, want 0", after-before)
	}
}

// adminGet fetches an admin path of srv.
func adminGet(t *testing.T, srv *serve.Server, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + srv.AdminAddr() + path)
	if err != nil {
		t.Fatalf("admin %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
