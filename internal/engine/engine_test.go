package engine_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// group describes one zonal NEG for a test config.
type group struct {
	zone      string
	members   int
	preferred bool
	scaler    string // "" = unset
	rate      int    // maxRatePerEndpoint; 0 = 100
}

// build writes a config with one backend service over the given groups.
func build(t testing.TB, policy string, groups ...group) (*plan.Plan, *control.State) {
	t.Helper()
	return buildWith(t, policy, "", groups...)
}

// buildWith is build with extra backend-service fields (indented by 2).
func buildWith(t testing.TB, policy, bsExtra string, groups ...group) (*plan.Plan, *control.State) {
	t.Helper()
	var b strings.Builder
	b.WriteString("healthChecks:\n- name: hc\n  type: HTTP\n")
	if policy != "" {
		b.WriteString("serviceLbPolicies:\n- name: pol\n" + policy)
	}
	b.WriteString("networkEndpointGroups:\n")
	for i, g := range groups {
		fmt.Fprintf(&b, "- name: neg-%d\n  zone: %s\n  defaultPort: 80\n  endpoints:\n", i, g.zone)
		for j := 0; j < g.members; j++ {
			fmt.Fprintf(&b, "  - ipAddress: 10.%d.%d.%d\n", i, j/250, j%250+1)
		}
	}
	b.WriteString("backendServices:\n- name: bs\n  healthChecks: [hc]\n")
	if policy != "" {
		b.WriteString("  serviceLbPolicy: pol\n")
	}
	b.WriteString(bsExtra + "  backends:\n")
	for i, g := range groups {
		rate := g.rate
		if rate == 0 {
			rate = 100
		}
		fmt.Fprintf(&b, "  - group: neg-%d\n    balancingMode: RATE\n    maxRatePerEndpoint: %d\n", i, rate)
		if g.preferred {
			b.WriteString("    preference: PREFERRED\n")
		}
		if g.scaler != "" {
			fmt.Fprintf(&b, "    capacityScaler: %s\n", g.scaler)
		}
	}
	b.WriteString("urlMaps:\n- name: um\n  defaultService: bs\n")
	return fromYAML(t, b.String())
}

// fromYAML compiles a config and returns its plan and a control state in
// which every endpoint has passed its first probe.
func fromYAML(t testing.TB, yaml string) (*plan.Plan, *control.State) {
	t.Helper()
	c, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	st := control.New(p)
	for _, e := range p.Endpoints {
		st.ObserveProbe(e.ID, true, "", t0)
	}
	return p, st
}

// setHealthy makes exactly n endpoints of group gi healthy (the rest fail
// enough probes to turn unhealthy) at time now.
func setHealthy(p *plan.Plan, st *control.State, gi, n int, now time.Time) {
	b := p.Services[0].Backends[gi]
	for i, e := range b.Endpoints {
		ok := i < n
		for k := 0; k < 3; k++ {
			st.ObserveProbe(e.ID, ok, "", now)
		}
	}
}

// shares returns the service's split from client region r by zone.
func shares(p *plan.Plan, st *control.State, region string) map[string]float64 {
	v := engine.NewView(st)
	r := -1
	if region != "" {
		r = p.RegionIndex[region]
	}
	sp := v.Split(0, r)
	out := map[string]float64{}
	if sp.Status != 0 {
		out["503"] = 1
	}
	for _, s := range sp.Shares {
		out[p.Services[0].Backends[s.Backend].Group.Zone] += s.Fraction
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

const drainPolicy = "  loadBalancingAlgorithm: SPRAY_TO_REGION\n  autoCapacityDrain: {enable: true}\n"

func TestDrainAt24VersusNot25(t *testing.T) {
	for _, tc := range []struct {
		healthy int
		drained bool
	}{{24, true}, {25, false}, {0, true}, {100, false}} {
		p, st := build(t, drainPolicy, group{zone: "us-east1-b", members: 100}, group{zone: "us-east1-c", members: 100})
		setHealthy(p, st, 0, tc.healthy, t0)
		if got := st.Drain(0, 0).Drained; got != tc.drained {
			t.Errorf("%d/100 healthy: drained=%v, want %v", tc.healthy, got, tc.drained)
		}
	}
}

func TestUndrainNeeds35PercentFor60s(t *testing.T) {
	p, st := build(t, drainPolicy, group{zone: "us-east1-b", members: 100}, group{zone: "us-east1-c", members: 100})
	setHealthy(p, st, 0, 0, t0)
	if !st.Drain(0, 0).Drained {
		t.Fatal("not drained at 0%")
	}
	// 34% is not enough, however long.
	setHealthy(p, st, 0, 34, t0.Add(time.Second))
	st.Tick(t0.Add(5 * time.Minute))
	if !st.Drain(0, 0).Drained {
		t.Fatal("undrained at 34%")
	}
	// 35% starts the hold; an interruption restarts it.
	start := t0.Add(10 * time.Minute)
	setHealthy(p, st, 0, 35, start)
	st.Tick(start.Add(30 * time.Second))
	setHealthy(p, st, 0, 34, start.Add(31*time.Second))
	setHealthy(p, st, 0, 35, start.Add(32*time.Second))
	st.Tick(start.Add(62 * time.Second))
	if !st.Drain(0, 0).Drained {
		t.Fatal("undrained although 35% did not hold for 60 s continuously")
	}
	restart := start.Add(32 * time.Second)
	st.Tick(restart.Add(59 * time.Second))
	if !st.Drain(0, 0).Drained {
		t.Fatal("undrained after 59 s")
	}
	if got := st.NextDeadline(); !got.Equal(restart.Add(60 * time.Second)) {
		t.Fatalf("NextDeadline = %v, want %v", got, restart.Add(60*time.Second))
	}
	st.Tick(restart.Add(60 * time.Second))
	if st.Drain(0, 0).Drained {
		t.Fatal("still drained after 60 s at 35%")
	}
	// Between 25% and 35% an undrained group stays in service.
	setHealthy(p, st, 0, 30, restart.Add(61*time.Second))
	if st.Drain(0, 0).Drained {
		t.Fatal("drained at 30%")
	}
}

func TestDrainSafetyLimit(t *testing.T) {
	for _, tc := range []struct {
		name            string
		zones           []string
		dead            []int // group indexes with 0 healthy
		half            []int // group indexes with 1 of 5 healthy (20%)
		drained, blocks int
	}{
		{"6 groups, 3 dead", []string{"us-south1-a", "us-south1-b", "us-south1-c", "us-east4-a", "us-east4-b", "us-east4-c"}, []int{0, 1, 2}, nil, 3, 0},
		{"5 groups, 3 dead", []string{"us-south1-a", "us-south1-b", "us-south1-c", "us-east4-a", "us-east4-b"}, []int{0, 1, 2}, nil, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gs []group
			for _, z := range tc.zones {
				gs = append(gs, group{zone: z, members: 5})
			}
			p, st := build(t, drainPolicy, gs...)
			for _, i := range tc.half {
				setHealthy(p, st, i, 1, t0)
			}
			for _, i := range tc.dead {
				setHealthy(p, st, i, 0, t0)
			}
			drained, blocked := 0, 0
			for i := range gs {
				d := st.Drain(0, i)
				if d.Drained {
					drained++
				}
				if d.Blocked {
					blocked++
				}
			}
			if drained != tc.drained || blocked != tc.blocks {
				t.Errorf("drained %d blocked %d, want %d and %d", drained, blocked, tc.drained, tc.blocks)
			}
		})
	}
}

func TestFailoverThreshold(t *testing.T) {
	// One preferred group in us-east1 at 50% healthy, a default group in
	// us-central1. Threshold 70: 0.5/0.7 = 71.4% stays, 28.6% fails over.
	for _, tc := range []struct {
		threshold string
		healthy   int
		stay      float64
	}{
		{"", 5, 0.5 / 0.7},
		{"", 7, 1},
		{"", 10, 1},
		{"  failoverConfig: {failoverHealthThreshold: 50}\n", 5, 1},
		{"  failoverConfig: {failoverHealthThreshold: 99}\n", 5, 0.5 / 0.99},
		{"", 0, 0},
	} {
		p, st := build(t, "  loadBalancingAlgorithm: SPRAY_TO_REGION\n"+tc.threshold,
			group{zone: "us-east1-b", members: 10, preferred: true}, group{zone: "us-central1-a", members: 10})
		setHealthy(p, st, 0, tc.healthy, t0)
		got := shares(p, st, "us-east1")
		if !near(got["us-east1-b"], tc.stay) || !near(got["us-central1-a"], 1-tc.stay) {
			t.Errorf("threshold %q, %d/10 healthy: got %v, want %.4f stay", tc.threshold, tc.healthy, got, tc.stay)
		}
	}
}

func TestCapacityScalerZero(t *testing.T) {
	p, st := build(t, drainPolicy,
		group{zone: "us-east1-b", members: 3, scaler: "0"}, group{zone: "us-east1-c", members: 3}, group{zone: "us-east1-d", members: 3})
	got := shares(p, st, "us-east1")
	if got["us-east1-b"] != 0 || !near(got["us-east1-c"], 0.5) {
		t.Errorf("scaler 0: %v", got)
	}
	// A zero-capacity group is never a drain candidate.
	setHealthy(p, st, 0, 0, t0)
	if st.Drain(0, 0).Drained {
		t.Error("zero-capacity group drained")
	}
}

func TestPreferredBeatsNearerDefault(t *testing.T) {
	p, st := build(t, "", group{zone: "us-east1-b", members: 3, preferred: true}, group{zone: "europe-west1-b", members: 3})
	if got := shares(p, st, "europe-west1"); !near(got["us-east1-b"], 1) {
		t.Errorf("PREFERRED far group should take everything, got %v", got)
	}
}

func TestProximity(t *testing.T) {
	p, st := build(t, "", group{zone: "us-east1-b", members: 3}, group{zone: "europe-west1-b", members: 3}, group{zone: "asia-east1-a", members: 3})
	for client, want := range map[string]string{"europe-west1": "europe-west1-b", "us-east1": "us-east1-b", "asia-east1": "asia-east1-a"} {
		if got := shares(p, st, client); !near(got[want], 1) {
			t.Errorf("client %s: got %v, want all in %s", client, got, want)
		}
	}
	// The nearest region down: the next nearest (us-east1 for Europe).
	setHealthy(p, st, 1, 0, t0)
	if got := shares(p, st, "europe-west1"); !near(got["us-east1-b"], 1) {
		t.Errorf("europe-west1 down: got %v, want us-east1-b", got)
	}
}

// Seed 001: two regions x 10 instances x 300 rps; 4,500 rps from Europe.
func TestSpilloverSeed001(t *testing.T) {
	for _, tc := range []struct {
		rate   int
		eu, us float64
	}{{300, 3000, 1500}, {1000, 4500, 0}} {
		p, st := build(t, "", group{zone: "europe-west1-b", members: 10, rate: tc.rate}, group{zone: "us-east1-b", members: 10, rate: tc.rate})
		st.SetDemand(0, p.RegionIndex["europe-west1"], 4500, t0)
		got := shares(p, st, "europe-west1")
		if !near(got["europe-west1-b"]*4500, tc.eu) || !near(got["us-east1-b"]*4500, tc.us) {
			t.Errorf("%d rps/instance: europe %.0f rps, us %.0f rps; want %.0f and %.0f", tc.rate, got["europe-west1-b"]*4500, got["us-east1-b"]*4500, tc.eu, tc.us)
		}
	}
}

func TestOverfillInProportionToCapacity(t *testing.T) {
	// 1,000 + 3,000 rps of capacity, 8,000 rps offered: the 4,000 excess
	// overfills 1:3.
	p, st := build(t, "", group{zone: "europe-west1-b", members: 10, rate: 100}, group{zone: "us-east1-b", members: 10, rate: 300})
	st.SetDemand(0, p.RegionIndex["europe-west1"], 8000, t0)
	got := shares(p, st, "europe-west1")
	if !near(got["europe-west1-b"]*8000, 2000) || !near(got["us-east1-b"]*8000, 6000) {
		t.Errorf("overfill: %v", got)
	}
}

func TestAllUnhealthyIs503WithReason(t *testing.T) {
	p, st := build(t, "", group{zone: "us-east1-b", members: 2})
	setHealthy(p, st, 0, 0, t0)
	v := engine.NewView(st)
	d := v.Pick(0, -1, 42)
	if d.Status != 503 || d.Reason != "no healthy backend in backend service bs" {
		t.Errorf("got %d %q", d.Status, d.Reason)
	}
}

func TestPickRoundRobinsHealthyEndpoints(t *testing.T) {
	p, st := build(t, "", group{zone: "us-east1-b", members: 4})
	setHealthy(p, st, 0, 3, t0)
	v := engine.NewView(st)
	seen := map[string]int{}
	for i := 0; i < 300; i++ {
		d := v.Pick(0, -1, uint64(i)*0x9e3779b97f4a7c15)
		seen[d.Endpoint.Addr]++
	}
	if len(seen) != 3 || seen["10.0.0.4:80"] != 0 {
		t.Errorf("round robin over healthy endpoints: %v", seen)
	}
	for a, n := range seen {
		if n != 100 {
			t.Errorf("%s got %d of 300", a, n)
		}
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	p, st := build(t, drainPolicy, group{zone: "us-east1-b", members: 3}, group{zone: "us-east1-c", members: 3})
	v := engine.NewView(st)
	r := p.RegionIndex["us-east1"]
	u := uint64(1)
	if n := testing.AllocsPerRun(1000, func() { u = u*6364136223846793005 + 1; v.Pick(0, r, u) }); n != 0 {
		t.Errorf("Pick allocates %v times", n)
	}
	// A client pick through WATERFALL_BY_REGION's proxies, as the proxy
	// makes it (the address hashed per request).
	p, st = build(t, "", group{zone: "us-east1-b", members: 3}, group{zone: "us-east1-c", members: 3})
	v = engine.NewView(st)
	addr := "203.0.113.7"
	if n := testing.AllocsPerRun(1000, func() {
		u = u*6364136223846793005 + 1
		c := engine.Client{Region: r, Addr: engine.HashKey(addr), HasAddr: true}
		v.PickClient(0, c, u, 0, false)
	}); n != 0 {
		t.Errorf("PickClient allocates %v times", n)
	}
}

// A retry avoids the failed endpoint; when its backend has no other
// healthy endpoint, it goes to the next backend in the failover order.
func TestPickExceptMovesToTheNextBackend(t *testing.T) {
	p, st := build(t, "", group{zone: "asia-northeast2-a", members: 1}, group{zone: "asia-northeast1-a", members: 1}, group{zone: "us-east1-b", members: 1})
	v := engine.NewView(st)
	client := p.RegionIndex["asia-northeast2"]
	first := v.Pick(0, client, 1)
	if first.Backend.Group.Zone != "asia-northeast2-a" {
		t.Fatalf("first pick %s, want the nearest zone", first.Backend.Group.Zone)
	}
	retry := v.PickExcept(0, engine.Client{Region: client}, 2, first.Endpoint)
	if retry.Endpoint == first.Endpoint || retry.Backend.Group.Zone != "asia-northeast1-a" {
		t.Errorf("retry went to %s (%s), want asia-northeast1-a, the next nearest", retry.Endpoint.Addr, retry.Backend.Group.Zone)
	}
	// Inside a backend with several endpoints the retry stays in the zone.
	p, st = build(t, "", group{zone: "us-east1-b", members: 3}, group{zone: "us-east1-c", members: 3})
	v = engine.NewView(st)
	for i := uint64(0); i < 50; i++ {
		d := v.Pick(0, -1, i*0x9e3779b97f4a7c15)
		r := v.PickExcept(0, engine.Client{Region: -1}, i*0x9e3779b97f4a7c15, d.Endpoint)
		if r.Endpoint == d.Endpoint {
			t.Fatalf("retry %d landed on the failed endpoint %s", i, d.Endpoint.Addr)
		}
	}
	_ = p
}

// Gradual failback (spillway.undrainRampSec, an extension): an undrained
// group returns at 10%, 25%, 50%, then 100% of its capacity; under the
// failover threshold (70%) a level at x% of its capacity keeps x/0.7 of
// its traffic, and the rest stays on the failover level.
func TestUndrainRamp(t *testing.T) {
	p, st := fromYAML(t, `
healthChecks: [{name: hc, type: HTTP}]
serviceLbPolicies:
- {name: pol, loadBalancingAlgorithm: SPRAY_TO_REGION, autoCapacityDrain: {enable: true}}
spillway: {undrainRampSec: 240}
networkEndpointGroups:
- {name: south, zone: us-south1-a, endpoints: [{ipAddress: 10.0.0.1, port: 80}, {ipAddress: 10.0.0.2, port: 80}]}
- {name: east, zone: us-east4-a, endpoints: [{ipAddress: 10.1.0.1, port: 80}, {ipAddress: 10.1.0.2, port: 80}]}
backendServices:
- name: bs
  healthChecks: [hc]
  serviceLbPolicy: pol
  backends:
  - {group: south, balancingMode: RATE, maxRatePerEndpoint: 100, preference: PREFERRED}
  - {group: east, balancingMode: RATE, maxRatePerEndpoint: 100}
urlMaps: [{name: um, defaultService: bs}]
`)
	south := func(at time.Time) float64 {
		st.Tick(at)
		return shares(p, st, "us-south1")["us-south1-a"]
	}
	setHealthy(p, st, 0, 0, t0)
	if got := south(t0.Add(time.Second)); got != 0 {
		t.Fatalf("drained: south share %.2f", got)
	}
	recovered := t0.Add(10 * time.Second)
	setHealthy(p, st, 0, 2, recovered)
	undrained := recovered.Add(60 * time.Second)
	for _, tc := range []struct {
		at   time.Duration // after the undrain
		want float64
	}{{-time.Second, 0}, {0, 0.10 / 0.7}, {79 * time.Second, 0.10 / 0.7}, {80 * time.Second, 0.25 / 0.7}, {160 * time.Second, 0.50 / 0.7}, {239 * time.Second, 0.50 / 0.7}, {240 * time.Second, 1}} {
		if got := south(undrained.Add(tc.at)); !near(got, tc.want) {
			t.Errorf("%v after the undrain: south share %.3f, want %.2f", tc.at, got, tc.want)
		}
	}
	// NextDeadline names the ramp's step times, so the simulator can jump
	// to them.
	st.Tick(undrained.Add(100 * time.Second))
	if got, want := st.NextDeadline(), undrained.Add(160*time.Second); !got.Equal(want) {
		t.Errorf("NextDeadline during the 25%% step = %v, want %v", got, want)
	}
}

// One zone ramping back among healthy zones of the same region costs the
// region nothing: the healthy zones absorb what the ramping zone cannot
// take, under both algorithms.
func TestUndrainRampOfOneZone(t *testing.T) {
	for _, algo := range []string{"SPRAY_TO_REGION", "WATERFALL_BY_REGION"} {
		p, st := fromYAML(t, `
healthChecks: [{name: hc, type: HTTP}]
serviceLbPolicies:
- {name: pol, loadBalancingAlgorithm: `+algo+`, autoCapacityDrain: {enable: true}}
spillway: {undrainRampSec: 240}
networkEndpointGroups:
- {name: a, zone: us-south1-a, endpoints: [{ipAddress: 10.0.0.1, port: 80}]}
- {name: b, zone: us-south1-b, endpoints: [{ipAddress: 10.0.1.1, port: 80}]}
- {name: c, zone: us-south1-c, endpoints: [{ipAddress: 10.0.2.1, port: 80}]}
- {name: e, zone: us-east4-a, endpoints: [{ipAddress: 10.1.0.1, port: 80}]}
- {name: f, zone: us-east4-b, endpoints: [{ipAddress: 10.1.1.1, port: 80}]}
- {name: g, zone: us-east4-c, endpoints: [{ipAddress: 10.1.2.1, port: 80}]}
backendServices:
- name: bs
  healthChecks: [hc]
  serviceLbPolicy: pol
  backends:
  - {group: a, balancingMode: RATE, maxRatePerEndpoint: 100, preference: PREFERRED}
  - {group: b, balancingMode: RATE, maxRatePerEndpoint: 100, preference: PREFERRED}
  - {group: c, balancingMode: RATE, maxRatePerEndpoint: 100, preference: PREFERRED}
  - {group: e, balancingMode: RATE, maxRatePerEndpoint: 100}
  - {group: f, balancingMode: RATE, maxRatePerEndpoint: 100}
  - {group: g, balancingMode: RATE, maxRatePerEndpoint: 100}
urlMaps: [{name: um, defaultService: bs}]
`)
		setHealthy(p, st, 0, 0, t0)
		setHealthy(p, st, 0, 1, t0.Add(time.Second))
		st.Tick(t0.Add(61 * time.Second)) // undrained: zone a at the 10% step
		if st.Drain(0, 0).Drained {
			t.Fatalf("%s: zone a still drained", algo)
		}
		got := shares(p, st, "us-south1")
		south := got["us-south1-a"] + got["us-south1-b"] + got["us-south1-c"]
		if !near(south, 1) {
			t.Errorf("%s: us-south1 keeps %.3f while one zone ramps, want all of it", algo, south)
		}
		// SPRAY spreads by usable capacity (0.1 of 2.1); a waterfall home
		// zone keeps at most its ramp step.
		limit := 0.10 / 2.1
		if algo != "SPRAY_TO_REGION" {
			limit = 0.10
		}
		if got["us-south1-a"] > limit+1e-9 {
			t.Errorf("%s: the ramping zone takes %.3f, more than %.3f", algo, got["us-south1-a"], limit)
		}
	}
}

// A reload that removes backends can leave drains over the 50% limit;
// the healthiest drained backends return until it holds again.
func TestDrainLimitEnforcedAfterRebase(t *testing.T) {
	gs := []group{{zone: "us-east1-b", members: 5}, {zone: "us-east1-c", members: 5}, {zone: "us-east1-d", members: 5}, {zone: "us-central1-a", members: 5}}
	p, st := build(t, drainPolicy, gs...)
	setHealthy(p, st, 0, 1, t0) // 20%: drained
	setHealthy(p, st, 1, 0, t0) // 0%: drained (2 of 4)
	if !st.Drain(0, 0).Drained || !st.Drain(0, 1).Drained {
		t.Fatal("setup: both groups should be drained")
	}
	// The new plan has only the two drained groups: at most 1 may drain.
	p2, _ := build(t, drainPolicy, gs[0], gs[1])
	st2 := st.Rebase(p2)
	st2.Evaluate(t0.Add(time.Second))
	if n := b2i(st2.Drain(0, 0).Drained) + b2i(st2.Drain(0, 1).Drained); n != 1 {
		t.Fatalf("%d of 2 drained after the reload, want 1", n)
	}
	if st2.Drain(0, 0).Drained || !st2.Drain(0, 1).Drained {
		t.Error("the healthier group (20%) should be the one undrained")
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Overflow that passed a level with room goes back to it before anything
// overfills: south (1,000 rps) and east (100 rps) both 50% healthy, 1,000
// rps offered: east cannot take its failed-over share, south has room.
func TestSpillBackBeforeOverfill(t *testing.T) {
	p, st := build(t, "  loadBalancingAlgorithm: SPRAY_TO_REGION\n",
		group{zone: "us-south1-a", members: 10, preferred: true, rate: 100}, group{zone: "us-east4-a", members: 10, rate: 10})
	setHealthy(p, st, 0, 5, t0)
	setHealthy(p, st, 1, 5, t0)
	st.SetDemand(0, p.RegionIndex["us-south1"], 1000, t0)
	got := shares(p, st, "us-south1")
	if south, east := got["us-south1-a"]*1000, got["us-east4-a"]*1000; !near(east, 100) || !near(south, 900) {
		t.Errorf("south %.1f rps, east %.1f rps; want 900 and 100 (east at capacity, nothing overfilled)", south, east)
	}
}

// NextDraw's Weyl sequence realises a split almost exactly at any sample
// size (random draws would be off by ~√n), and the endpoint picks made
// with the same draws (hashed) stay spread.
func TestNextDrawRealisesTheSplit(t *testing.T) {
	// SPRAY_TO_REGION over two zones of 7 and 3 members: a 70/30 split.
	p, st := build(t, drainPolicy, group{zone: "us-east1-b", members: 7}, group{zone: "us-east1-c", members: 3})
	const n = 1000
	v := engine.NewView(st)
	r := p.RegionIndex["us-east1"]
	zones, endpoints := map[string]int{}, map[string]int{}
	for range n {
		d := v.Pick(0, r, v.NextDraw(0, r))
		zones[d.Backend.Group.Zone]++
		endpoints[d.Endpoint.Addr]++
	}
	sh := shares(p, st, "us-east1")
	for z, f := range sh {
		if got, want := float64(zones[z]), f*n; got < want-2 || got > want+2 {
			t.Errorf("%s: %v of %d picks, want %.1f ± 2 (split %v)", z, got, n, want, sh)
		}
	}
	if len(endpoints) != 10 {
		t.Errorf("endpoints picked: %v", endpoints)
	}
}
