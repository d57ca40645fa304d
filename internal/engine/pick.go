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
// clientRegion (-1: none), from the uniform random number u, with the
// service's localityLbPolicy and no affinity key. Pick does not allocate.
func (v *View) Pick(service, clientRegion int, u uint64) Decision {
	d, _, _ := v.pick(service, clientRegion, u, 0, false)
	return d
}

// PickKey is Pick with a session-affinity key (hasKey). Under RING_HASH
// and MAGLEV the key decides both the backend (zone) draw, from a value
// derived from the key, so one key stays in one zone while the split is
// unchanged, and the endpoint (ring or Maglev table lookup). Under the
// other policies the key is ignored, as Google documents affinity to have
// no effect there. Without a key, PickKey is Pick: RANDOM and
// LEAST_REQUEST draw from u, and the hash policies use u as the key.
// PickKey does not allocate.
func (v *View) PickKey(service, clientRegion int, u uint64, key uint64, hasKey bool) Decision {
	d, _, _ := v.pick(service, clientRegion, u, key, hasKey)
	return d
}

// pick is PickKey, also returning the chosen backend's view and the
// endpoint's index in its healthy list.
func (v *View) pick(service, clientRegion int, u, key uint64, hasKey bool) (Decision, *backendView, int) {
	sv := &v.services[service]
	if clientRegion < 0 {
		clientRegion = len(sv.splits) - 1
	}
	sp := &sv.splits[clientRegion]
	d := Decision{Service: sv.svc}
	if sp.Status != 0 {
		d.Status, d.Reason = sp.Status, sp.Reason
		return d, nil, 0
	}
	draw, h := u, uint64(0)
	if sv.policy.hashed() {
		if !hasKey {
			key = u
		} else {
			draw = mix64(key ^ saltZone)
		}
		h = mix64(key)
	}
	x := unit(draw)
	i := 0
	for i < len(sp.cum)-1 && x >= sp.cum[i] {
		i++
	}
	bv := sv.backends[sp.backend[i]]
	k := v.endpoint(sv.policy, bv, u, h)
	d.Backend = bv.b
	d.Endpoint = bv.healthy[k]
	return d, bv, k
}

// PickExcept is Pick for a retry: it avoids endpoint `avoid`, so a retry
// lands elsewhere. Inside the chosen backend it takes the next endpoint in
// round robin, else a random other one. When the chosen backend has no
// other healthy endpoint, the retry goes to the backend the failover order
// would use next (PREFERRED before DEFAULT, then the nearest region; not
// drained, with capacity and a healthy endpoint), still inside the same
// backend service. Only when there is none does it return `avoid` again.
func (v *View) PickExcept(service, clientRegion int, u uint64, avoid *plan.Endpoint) Decision {
	d, bv, k := v.pick(service, clientRegion, u, 0, false)
	if d.Status != 0 || d.Endpoint != avoid {
		return d
	}
	sv := &v.services[service]
	if n := len(bv.healthy); n >= 2 {
		if sv.policy == polRoundRobin {
			k = int(bv.rr.Add(1) % uint32(n))
		} else {
			k = (k + 1 + below(uint32(mix64(u^saltRetry)>>32), n-1)) % n
		}
		d.Endpoint = bv.healthy[k]
		return d
	}
	var best *backendView
	for _, c := range sv.backends {
		if c == bv || c.drain.Drained || c.b.ZeroCapacity() || len(c.healthy) == 0 {
			continue
		}
		if best == nil || v.closer(clientRegion, c.b, best.b) {
			best = c
		}
	}
	if best != nil {
		d.Backend = best.b
		d.Endpoint = best.healthy[int(best.rr.Add(1)%uint32(len(best.healthy)))]
	}
	return d
}

// closer reports whether backend a comes before b in the failover order
// for a client region: PREFERRED first, then proximity, then config order.
func (v *View) closer(client int, a, b *plan.Backend) bool {
	if a.Preferred != b.Preferred {
		return a.Preferred
	}
	if client >= 0 {
		da, db := v.Plan.Distance[client][a.Group.RegionID], v.Plan.Distance[client][b.Group.RegionID]
		if da != db {
			return da < db
		}
	}
	return a.Index < b.Index
}
