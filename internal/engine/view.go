// Package engine makes Spillway's traffic decisions: which backend service
// (URL-map weights), which tier, region and zone (preference, proximity,
// capacity, failover threshold, drain) and which endpoint. It is pure:
// randomness comes in as numbers and time is not read. The proxy, the DNS
// server and the simulator all call it, so they decide identically.
//
// A View is an immutable snapshot built from control.State. All the
// per-request work is a weighted draw from a precomputed Split and an
// endpoint step (round robin, random, least request, or a ring or Maglev
// table lookup built with the view), with no locks and no allocation.
package engine

import (
	"sync/atomic"

	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/plan"
)

// View is an immutable decision snapshot. Build one with NewView each time
// control.State changes and publish it through an atomic pointer.
type View struct {
	Plan     *plan.Plan
	Version  uint64
	services []serviceView
	inflight *Inflight
}

type serviceView struct {
	svc      *plan.Service
	policy   lbPolicy
	backends []*backendView
	// splits[r] is the split for client region r; the last entry is for
	// clients with no region.
	splits []Split
	// regions[r] is the split over region r's backends, for a regional
	// layer (PickInRegion).
	regions []regionSplit
}

type backendView struct {
	b       *plan.Backend
	healthy []*plan.Endpoint
	share   float64 // healthy share of configured members
	weight  float64 // proportion weight after an undrain ramp
	drain   control.DrainState
	rr      atomic.Uint32
	ring    []ringPoint // RING_HASH
	table   []int32     // MAGLEV: index in healthy per slot
}

// NewView builds a snapshot of s with fresh in-flight counters. RATE
// capacity is shared by the client regions of a service: regions are
// served in index order, each taking what the regions before it left.
func NewView(s *control.State) *View { return NextView(s, nil) }

// NextView builds the snapshot that follows prev. When prev is of the same
// plan, the new View shares prev's in-flight counters (so LEAST_REQUEST
// counts survive rebuilds) and reuses a backend's RING_HASH ring or MAGLEV
// table when its healthy endpoints did not change (building a Maglev
// table costs milliseconds; most rebuilds change one backend at most).
func NextView(s *control.State, prev *View) *View {
	p := s.Plan()
	if prev != nil && prev.Plan != p {
		prev = nil
	}
	in := NewInflight(p)
	if prev != nil {
		in = prev.inflight
	}
	v := &View{Plan: p, Version: s.Version(), services: make([]serviceView, len(p.Services)), inflight: in}
	for _, svc := range p.Services {
		sv := &v.services[svc.ID]
		sv.svc = svc
		sv.policy = policyOf(svc.LocalityLbPolicy)
		remaining := make([]float64, len(svc.Backends))
		for _, b := range svc.Backends {
			bv := &backendView{b: b, drain: s.Drain(svc.ID, b.Index), weight: b.Weight * s.Ramp(svc.ID, b.Index)}
			for _, e := range b.Endpoints {
				if s.Healthy(e.ID) {
					bv.healthy = append(bv.healthy, e)
				}
			}
			if n := len(b.Endpoints); n > 0 {
				bv.share = float64(len(bv.healthy)) / float64(n)
			}
			if prev == nil || !bv.reuse(prev.services[svc.ID].backends[b.Index]) {
				bv.build(sv.policy, svc.MinRingSize)
			}
			remaining[b.Index] = s.Capacity(svc.ID, b.Index) * s.Ramp(svc.ID, b.Index)
			sv.backends = append(sv.backends, bv)
		}
		sv.splits = make([]Split, len(p.Regions)+1)
		for r := 0; r <= len(p.Regions); r++ {
			client, salt := r, ""
			if r == len(p.Regions) {
				client = -1
			} else {
				salt = p.Regions[r]
			}
			demand := s.Demand(svc.ID, client)
			sv.splits[r] = computeSplit(&splitInput{
				svc: svc, backends: sv.backends, client: client,
				demand: demand, remaining: remaining, salt: salt,
			}, p)
		}
		sv.buildRegionSplits(p.Regions)
	}
	return v
}

// Inflight returns the in-flight counters the view's LEAST_REQUEST picks
// read; the proxy counts its attempts in them.
func (v *View) Inflight() *Inflight { return v.inflight }

// Split returns the split of a service's traffic from a client region
// (-1 for no region).
func (v *View) Split(service, clientRegion int) *Split {
	sv := &v.services[service]
	if clientRegion < 0 {
		clientRegion = len(sv.splits) - 1
	}
	return &sv.splits[clientRegion]
}

// BackendState is what a View knows about one backend, for get-health and
// explain output.
type BackendState struct {
	Healthy      int
	Members      int
	Drained      bool
	DrainBlocked bool
}

// Backend returns the state of a service's backend.
func (v *View) Backend(service, backend int) BackendState {
	bv := v.services[service].backends[backend]
	return BackendState{
		Healthy:      len(bv.healthy),
		Members:      len(bv.b.Endpoints),
		Drained:      bv.drain.Drained,
		DrainBlocked: bv.drain.Blocked,
	}
}
