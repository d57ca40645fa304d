// Package engine makes Spillway's traffic decisions: which backend service
// (URL-map weights), which tier, region and zone (preference, proximity,
// capacity, failover threshold, drain) and which endpoint. It is pure:
// randomness comes in as numbers and time is not read. The proxy, the DNS
// server and the simulator all call it, so they decide identically.
//
// A View is an immutable snapshot built from control.State. All the
// per-request work is a weighted draw from a precomputed Split and a
// round-robin step, with no locks and no allocation.
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
}

type serviceView struct {
	svc      *plan.Service
	backends []*backendView
	// splits[r] is the split for client region r; the last entry is for
	// clients with no region.
	splits []Split
}

type backendView struct {
	b       *plan.Backend
	healthy []*plan.Endpoint
	share   float64 // healthy share of configured members
	drain   control.DrainState
	rr      atomic.Uint32
}

// NewView builds a snapshot of s. RATE capacity is shared by the client
// regions of a service: regions are served in index order, each taking what
// the regions before it left.
func NewView(s *control.State) *View {
	p := s.Plan()
	v := &View{Plan: p, Version: s.Version(), services: make([]serviceView, len(p.Services))}
	for _, svc := range p.Services {
		sv := &v.services[svc.ID]
		sv.svc = svc
		remaining := make([]float64, len(svc.Backends))
		for _, b := range svc.Backends {
			bv := &backendView{b: b, drain: s.Drain(svc.ID, b.Index)}
			for _, e := range b.Endpoints {
				if s.Healthy(e.ID) {
					bv.healthy = append(bv.healthy, e)
				}
			}
			if n := len(b.Endpoints); n > 0 {
				bv.share = float64(len(bv.healthy)) / float64(n)
			}
			remaining[b.Index] = b.Capacity
			sv.backends = append(sv.backends, bv)
		}
		sv.splits = make([]Split, len(p.Regions)+1)
		for r := 0; r <= len(p.Regions); r++ {
			client, demand, salt := r, 0.0, ""
			if r == len(p.Regions) {
				client = -1
			} else {
				demand, salt = s.Demand(svc.ID, r), p.Regions[r]
			}
			sv.splits[r] = computeSplit(&splitInput{
				svc: svc, backends: sv.backends, client: client,
				demand: demand, remaining: remaining, salt: salt,
			}, p)
		}
	}
	return v
}

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
