package gslb

import (
	"os"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
)

// fleetName is a FAILOVER name whose members follow the example's
// backend service "web" in their regions; "us" is probed as well.
const fleetName = `
  - name: fleet
    policy: FAILOVER
    failback: {rampSec: 0}
    pool:
      members:
      - {name: us, address: 198.51.100.40, region: us-east1, backendService: web, healthCheck: hc-edge}
      - {name: eu, address: 203.0.113.40, region: europe-west3, backendService: web, priority: 1}
      - {name: any, address: 192.0.2.40, backendService: web, priority: 2}
`

// TestMemberFollowsFleet: a pool member with backendService is down
// while the engine View gives the service no healthy capacity in the
// member's region (anywhere, without a region), and while its own
// probes fail: both must pass.
func TestMemberFollowsFleet(t *testing.T) {
	f := newFleet(t)
	s, setRegion, now := f.s, f.setRegion, &f.now
	probeUS := func(ok bool) {
		for _, ch := range s.Checks() {
			for _, m := range ch.Members {
				if m.Name == "fleet.gslb.example." && m.Member == "us" {
					for range 3 {
						s.ObserveProbe(ch.Target, ok, "test", *now)
					}
				}
			}
		}
	}
	for _, step := range []struct {
		what         string
		do           func()
		us, eu, anyw bool // healthy
	}{
		{"all healthy", func() {}, true, true, true},
		{"us-east1 fleet down", func() { setRegion("us-east1", false) }, false, true, true},
		{"us probes pass, fleet still down", func() { probeUS(true) }, false, true, true},
		{"us-east1 fleet back", func() { setRegion("us-east1", true) }, true, true, true},
		{"us probes fail, fleet up", func() { probeUS(false) }, false, true, true},
		{"europe-west3 fleet down too", func() { setRegion("europe-west3", false) }, false, false, true},
		{"every region down", func() { setRegion("us-east1", false) }, false, false, false},
		{"us probes pass, us-east1 back", func() { probeUS(true); setRegion("us-east1", true) }, true, false, true},
	} {
		*now = now.Add(10 * time.Second)
		step.do()
		for m, want := range map[string]bool{"us": step.us, "eu": step.eu, "any": step.anyw} {
			w, ok := s.Weight("fleet.gslb.example.", m)
			if !ok || (w > 0) != want {
				t.Fatalf("%s: %s weight %v, want healthy %v", step.what, m, w, want)
			}
		}
	}
}

// A reload while a member's fleet is down carries that: the member
// comes back when the fleet does, also when the new Server first looks
// at the View after the recovery.
func TestMemberFleetAcrossReload(t *testing.T) {
	f := newFleet(t)
	f.setRegion("europe-west3", false)
	if w, _ := f.s.Weight("fleet.gslb.example.", "eu"); w != 0 {
		t.Fatalf("eu weight %v with its fleet down", w)
	}
	fresh, err := New(f.c, f.p, Options{Now: func() time.Time { return f.now }, View: func() *engine.View { return f.view }})
	if err != nil {
		t.Fatal(err)
	}
	fresh.CarryState(f.s)
	// The fleet recovers before the new Server's first look at the View.
	f.now = f.now.Add(10 * time.Second)
	f.setRegion("europe-west3", true)
	if w, _ := fresh.Weight("fleet.gslb.example.", "eu"); w == 0 {
		t.Fatal("eu still down after its fleet came back")
	}
}

// fleet is the example config with fleetName, a Server on a virtual
// clock and the engine state its View comes from.
type fleet struct {
	c    *config.Config
	p    *plan.Plan
	st   *control.State
	view *engine.View
	now  time.Time
	s    *Server
}

func newFleet(t *testing.T) *fleet {
	b, err := os.ReadFile("../../examples/dns/gslb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(append(b, fleetName...), "gslb.yaml")
	if err != nil {
		t.Fatalf("config:\n%v", err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{c: c, p: p, st: control.New(p), now: t0}
	f.view = engine.NewView(f.st)
	f.s, err = New(c, p, Options{Now: func() time.Time { return f.now }, View: func() *engine.View { return f.view }})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// setRegion makes every endpoint of region pass or fail its checks.
func (f *fleet) setRegion(region string, ok bool) {
	for _, e := range f.p.Endpoints {
		if e.Group.Region == region {
			for range 3 {
				f.st.ObserveProbe(e.ID, ok, "test", f.now)
			}
		}
	}
	f.view = engine.NewView(f.st)
}
