package serve

import (
	"maps"
	"math"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
)

// fakeDemandShare is a DemandShare whose remote rates are fixed and which
// records what it is told.
type fakeDemandShare struct {
	remote    control.DemandRates
	published []control.DemandRates
	window    time.Duration
}

func (f *fakeDemandShare) Publish(_ time.Time, window time.Duration, r control.DemandRates) {
	f.published, f.window = append(f.published, r), window
}

func (f *fakeDemandShare) Remote() control.DemandRates { return f.remote }

// seed001Window builds a Server (not run) on seed 001's worked example
// (examples/spillover: europe-west1 and us-east1, 10 instances × 300 rps
// each; the frontend fe-eu is in europe-west1), counts eu requests from
// European clients into one demand window and ends the window. It
// returns the server and the engine's split for fe-eu's clients by group.
func seed001Window(t *testing.T, share DemandShare, eu int) (*Server, map[string]float64) {
	t.Helper()
	cfg, err := config.Load("../../examples/spillover/config.yaml")
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
