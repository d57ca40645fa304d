package control_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/plan"
)

const twoZones = `
healthChecks: [{name: hc, type: HTTP}]
serviceLbPolicies:
- {name: pol, loadBalancingAlgorithm: SPRAY_TO_REGION, autoCapacityDrain: {enable: true}}
spillway: {undrainHoldSec: 60, undrainRampSec: 30}
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

func newState(t *testing.T) (*plan.Plan, *control.State) {
	t.Helper()
	c, err := config.Parse([]byte(twoZones), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p, control.New(p)
}

// south sets how many of the south group's two members are healthy.
func south(p *plan.Plan, st *control.State, healthy int, now time.Time) {
	for i, e := range p.Services[0].Backends[0].Endpoints {
		st.ObserveVerdict(e.ID, i < healthy, "", now)
	}
}

// A follower decides nothing; a snapshot applied to a new decider
// continues the undrain hold and the ramp from the leader's times.
func TestDrainSnapshotFollower(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p, leader := newState(t)
	_, follower := newState(t)
	follower.SetDrainFollower(true)
	south(p, leader, 0, t0)
	south(p, follower, 0, t0)
	if !leader.Drain(0, 0).Drained {
		t.Fatal("leader: south not drained at 0% healthy")
	}
	if d := follower.Drain(0, 0); d.Drained || d.Blocked {
		t.Fatalf("follower decided by itself: %+v", d)
	}
	// Through JSON, as the fleet publishes it.
	roundTrip := func(s []control.DrainEntry) []control.DrainEntry {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var out []control.DrainEntry
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	v := follower.Version()
	if !follower.ApplyDrain(roundTrip(leader.DrainSnapshot()), t0) || follower.Version() == v {
		t.Fatal("ApplyDrain of a drain: no change reported")
	}
	if !follower.Drain(0, 0).Drained {
		t.Fatal("follower: south not drained after ApplyDrain")
	}
	if follower.ApplyDrain(roundTrip(leader.DrainSnapshot()), t0) {
		t.Error("applying the same snapshot again reported a change")
	}
	// Recovery starts on the leader at t0+10s; the hold would end at
	// t0+70s. At t0+40s the follower takes over as leader.
	south(p, leader, 2, t0.Add(10*time.Second))
	south(p, follower, 2, t0.Add(10*time.Second))
	if !follower.Drain(0, 0).RecoveringSince.IsZero() {
		t.Fatal("follower started its own undrain hold")
	}
	follower.ApplyDrain(roundTrip(leader.DrainSnapshot()), t0.Add(40*time.Second))
	follower.SetDrainFollower(false)
	follower.Tick(t0.Add(69 * time.Second))
	if !follower.Drain(0, 0).Drained {
		t.Fatal("new leader undrained before the hold that began at t0+10s ended")
	}
	if got := follower.NextDeadline(); !got.Equal(t0.Add(70 * time.Second)) {
		t.Errorf("new leader's next deadline %v, want the old hold's end %v", got, t0.Add(70*time.Second))
	}
	follower.Tick(t0.Add(70 * time.Second))
	if d := follower.Drain(0, 0); d.Drained || !d.UndrainedAt.Equal(t0.Add(70*time.Second)) {
		t.Fatalf("new leader at the hold's end: %+v, want undrained at t0+70s", d)
	}
	// The ramp (30 s: 10%, 25%, 50% every 10 s) continues on a follower
	// that applies the new leader's snapshot later.
	_, late := newState(t)
	late.SetDrainFollower(true)
	late.ApplyDrain(roundTrip(follower.DrainSnapshot()), t0.Add(85*time.Second))
	if got := late.Ramp(0, 0); got != 0.25 {
		t.Errorf("follower 15 s into the ramp: share %.2f, want 0.25", got)
	}
	if !late.Tick(t0.Add(90*time.Second)) || late.Ramp(0, 0) != 0.50 {
		t.Errorf("follower 20 s into the ramp: share %.2f, want a step to 0.50", late.Ramp(0, 0))
	}
	// Rebase keeps the follower setting.
	if !late.Rebase(p).DrainFollower() {
		t.Error("Rebase dropped the follower setting")
	}
}
