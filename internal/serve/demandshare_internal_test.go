package serve

import (
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
)

// fakeDemandShare is a DemandShare whose remote rates are fixed and which
// records what it is told.
type fakeDemandShare struct {
	remote     control.DemandRates
	remoteLoad control.LoadRates
	published  []control.DemandRates
	loads      []control.LoadRates
	window     time.Duration
}

func (f *fakeDemandShare) Publish(_ time.Time, window time.Duration, r control.DemandRates, l control.LoadRates) {
	f.published, f.loads, f.window = append(f.published, r), append(f.loads, l), window
}

func (f *fakeDemandShare) Remote() control.DemandRates { return f.remote }

func (f *fakeDemandShare) RemoteLoad() control.LoadRates { return f.remoteLoad }

// seed001Window builds a Server (not run) on seed 001's worked example
// (examples/spillover: europe-west1 and us-east1, 10 instances × 300 rps
// each; the frontend fe-eu is in europe-west1), counts eu requests from
// European clients into one demand window and ends the window. It
// returns the server and the engine's split for fe-eu's clients by group.
func seed001Window(t *testing.T, share DemandShare, eu int) (*Server, map[string]float64) {
	t.Helper()
	return seed001WindowFile(t, "../../examples/spillover/config.yaml", share, eu)
}

// seed001WindowFile is seed001Window on the config at path.
func seed001WindowFile(t *testing.T, path string, share DemandShare, eu int) (*Server, map[string]float64) {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, Options{WatchInterval: -1, DemandShare: share})
	if err != nil {
		t.Fatal(err)
	}
	p := s.snap.Load().Plan
	if p.DemandWindow != time.Second {
		t.Fatalf("demand window %v, want the default 1 s", p.DemandWindow)
	}
	region := p.RegionIndex["europe-west1"]
	for range eu {
		s.snap.Load().Demand.Add(0, region)
	}
	s.measureDemand(p) // no Run: this goroutine is the loop
	got := map[string]float64{}
	for _, f := range s.Health().Services[0].Frontends {
		if f.Frontend == "fe-eu" {
			for _, b := range f.Backends {
				got[b.Group] = b.Share
			}
			if want := s.state.Demand(0, region); f.OfferedRate != want {
				t.Errorf("/health: fe-eu's offeredRate %v, want the demand the split is for, %v", f.OfferedRate, want)
			}
		}
	}
	return s, got
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Seed 001 in a fleet of three: each instance receives 1500 rps of
// European clients and the other two publish 3000 together. Each
// instance spills like one instance receiving all 4500 rps: 3000 to
// europe-west1, 1500 to us-east1 fleet-wide, so a third of each
// instance's requests go to us-east1. Without the share (the code before
// fleet-wide RATE) each instance compared its 1500 with europe-west1's
// 3000 and spilled nothing: three instances had three times the capacity.
func TestDemandShareSeed001(t *testing.T) {
	share := &fakeDemandShare{remote: control.DemandRates{
		"web-bs":  {"europe-west1": 3000, "mars-north1": 999}, // a region the plan does not know
		"gone-bs": {"europe-west1": 5000},                     // a service it does not know
	}}
	s, fleet := seed001Window(t, share, 1500)
	if got := s.state.Demand(0, s.state.Plan().RegionIndex["europe-west1"]); got != 4500 {
		t.Errorf("demand from europe-west1 with the share: %v rps, want 1500 local + 3000 remote = 4500", got)
	}
	if len(share.published) != 1 || !maps.EqualFunc(share.published[0], control.DemandRates{"web-bs": {"europe-west1": 1500}}, maps.Equal) || share.window != time.Second {
		t.Errorf("published %v over %v, want one window of web-bs/europe-west1 = 1500 rps over 1s", share.published, share.window)
	}
	if !near(fleet["web-europe-west1"], 2.0/3) || !near(fleet["web-us-east1"], 1.0/3) {
		t.Errorf("split with the fleet's demand: %v, want europe-west1 2/3 (3000 of 4500), us-east1 1/3 (1500)", fleet)
	}
	// The same as one standalone instance receiving 4500 rps.
	_, one := seed001Window(t, nil, 4500)
	if !maps.EqualFunc(one, fleet, near) {
		t.Errorf("one instance with 4500 rps splits %v; each of three with 1500 rps and the share: %v", one, fleet)
	}
	// Standalone with 1500 rps (what each of the three did before): no
	// spill, and nothing published anywhere.
	alone, split := seed001Window(t, nil, 1500)
	if got := alone.state.Demand(0, alone.state.Plan().RegionIndex["europe-west1"]); got != 1500 {
		t.Errorf("standalone demand %v, want the 1500 measured", got)
	}
	if !near(split["web-europe-west1"], 1) || split["web-us-east1"] != 0 {
		t.Errorf("standalone split at 1500 rps: %v, want everything in europe-west1", split)
	}
}

// With the share, a window without local traffic publishes no rates and
// the demand is the remote rate alone; clients without a region publish
// under "".
func TestDemandShareNoRegionAndIdle(t *testing.T) {
	share := &fakeDemandShare{remote: control.DemandRates{"web-bs": {"": 40}}}
	s, _ := seed001Window(t, share, 0)
	if len(share.published) != 1 || len(share.published[0]) != 0 {
		t.Errorf("an idle window published %v, want no rates", share.published)
	}
	if got := s.state.Demand(0, -1); got != 40 {
		t.Errorf("demand from clients without a region: %v, want the remote 40", got)
	}
	p := s.snap.Load().Plan
	for range 7 {
		s.snap.Load().Demand.Add(0, -1)
	}
	s.measureDemand(p)
	if got := share.published[1]; !maps.EqualFunc(got, control.DemandRates{"web-bs": {"": 7}}, maps.Equal) {
		t.Errorf("published %v, want web-bs/\"\" = 7", got)
	}
	if got := s.state.Demand(0, -1); got != 47 {
		t.Errorf("demand: %v, want 7 + 40", got)
	}
}

// utilizationWindow is seed001Window on seed 001's groups with
// balancingMode UTILIZATION (maxUtilization 0.8) instead of RATE.
func utilizationWindow(t *testing.T, share DemandShare, eu int) (*Server, map[string]float64) {
	t.Helper()
	b, err := os.ReadFile("../../examples/spillover/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.ReplaceAll(string(b), "balancingMode: RATE\n    maxRatePerInstance: 300", "balancingMode: UTILIZATION\n    maxUtilization: 0.8")
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return seed001WindowFile(t, path, share, eu)
}

// TestMeasuredCapacity: the fleet says europe-west1's UTILIZATION group
// served 1000 rps at a reported utilisation of 1.0 (its target is 0.8):
// its measured capacity is 800 rps, so of 1000 rps of European clients
// 200 spill to us-east1. At 0.4 nothing spills; without reports the
// group has no rate limit, as before.
func TestMeasuredCapacity(t *testing.T) {
	for _, c := range []struct {
		name     string
		load     control.LoadRates
		wantUS   float64
		measured float64
	}{
		{"busy", control.LoadRates{"web-bs": {"web-europe-west1": {RPS: 1000, Utilization: 1.0}}}, 0.2, 800},
		{"two reporters", control.LoadRates{"web-bs": {"web-europe-west1": {RPS: 1000, Utilization: 1.0}, "web-us-east1": {RPS: 500, Utilization: 0.1}}}, 0.2, 800},
		{"idle", control.LoadRates{"web-bs": {"web-europe-west1": {RPS: 1000, Utilization: 0.4}}}, 0, 2000},
		{"a trickle, busy: at least 1 rps", control.LoadRates{"web-bs": {"web-europe-west1": {RPS: 0.5, Utilization: 1.0}}}, 0.999, 1},
		{"no reports", nil, 0, 0},
	} {
		share := &fakeDemandShare{remoteLoad: c.load}
		s, split := utilizationWindow(t, share, 1000)
		if !near(split["web-us-east1"], c.wantUS) {
			t.Errorf("%s: split %v, want %v to us-east1", c.name, split, c.wantUS)
		}
		if got := s.state.Measured(0, 0); math.Abs(got-c.measured) > 1e-6 {
			t.Errorf("%s: europe-west1's measured capacity %v, want %v", c.name, got, c.measured)
		}
		if len(share.loads) != 1 || len(share.loads[0]) != 0 {
			t.Errorf("%s: published loads %v, want none (this instance forwarded nothing)", c.name, share.loads)
		}
	}
}

// A measured capacity outlives windows without reports (a quiet
// backend keeps the capacity it was measured at) for loadForget
// windows; then the backend has its configured capacity again.
func TestMeasuredCapacityForgotten(t *testing.T) {
	share := &fakeDemandShare{remoteLoad: control.LoadRates{"web-bs": {"web-europe-west1": {RPS: 1000, Utilization: 1.0}}}}
	s, _ := utilizationWindow(t, share, 1000)
	if got := s.state.Measured(0, 0); got != 800 {
		t.Fatalf("measured %v, want 800", got)
	}
	share.remoteLoad = nil
	start := time.Now()
	p := s.snap.Load().Plan
	for i := 1; i <= loadForget; i++ {
		s.now = func() time.Time { return start.Add(time.Duration(i) * p.DemandWindow) }
		s.measureDemand(p)
		want := 800.0
		if i == loadForget {
			want = 0
		}
		if got := s.state.Measured(0, 0); got != want {
			t.Fatalf("after %d windows without reports: measured %v, want %v", i, got, want)
		}
	}
}
