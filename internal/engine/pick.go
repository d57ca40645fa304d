package engine

import "github.com/spillwaylb/spillway/internal/plan"

// Decision is where one request goes.
type Decision struct {
	Service  *plan.Service
	Backend  *plan.Backend  // nil when Status != 0
	Endpoint *plan.Endpoint // nil when Status != 0
	// Status is 0 for a servable decision, else the status the balancer
	// answers with; Reason says why ("no healthy backend in backend
	// service bs-south-pref").
	Status int
	Reason string
}

// unit maps a uniform uint64 to [0, 1).
func unit(u uint64) float64 { return float64(u>>11) * (1.0 / (1 << 53)) }

// Pick chooses a backend and endpoint of service for a client in
// clientRegion (-1: none), from the uniform random number u. Endpoints are
// taken round robin within the chosen backend. Pick does not allocate.
func (v *View) Pick(service, clientRegion int, u uint64) Decision {
	sv := &v.services[service]
	if clientRegion < 0 {
		clientRegion = len(sv.splits) - 1
	}
	sp := &sv.splits[clientRegion]
	d := Decision{Service: sv.svc}
	if sp.Status != 0 {
		d.Status, d.Reason = sp.Status, sp.Reason
		return d
	}
	x := unit(u)
	i := 0
	for i < len(sp.cum)-1 && x >= sp.cum[i] {
		i++
	}
	bv := sv.backends[sp.backend[i]]
	n := bv.rr.Add(1)
	d.Backend = bv.b
	d.Endpoint = bv.healthy[int(n%uint32(len(bv.healthy)))]
	return d
}

// PickExcept is Pick for a retry: it avoids endpoint `avoid` when the
// chosen backend has another healthy endpoint, so a retry lands elsewhere.
func (v *View) PickExcept(service, clientRegion int, u uint64, avoid *plan.Endpoint) Decision {
	d := v.Pick(service, clientRegion, u)
	if d.Status != 0 || d.Endpoint != avoid {
		return d
	}
	bv := v.services[service].backends[d.Backend.Index]
	if len(bv.healthy) > 1 {
		n := bv.rr.Add(1)
		d.Endpoint = bv.healthy[int(n%uint32(len(bv.healthy)))]
	}
	return d
}
