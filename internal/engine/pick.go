package engine

import (
	"math"

	"github.com/spillwaylb/spillway/internal/plan"
)

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

// Client is who a request comes from.
type Client struct {
	// Region is the client region's index in the plan (-1: none).
	Region int
	// Addr is HashKey of the client's IP address, when HasAddr. Under
	// WATERFALL_BY_REGION it binds the client to its second-layer proxies
	// and so to the zones they favour (docs/semantics.md §2.4); without
	// it a request is picked from the split over all clients.
	Addr    uint64
	HasAddr bool
}

// Pick chooses a backend and endpoint of service for a client in
// clientRegion (-1: none) whose address is not known, from the uniform
// random number u, with the service's localityLbPolicy and no affinity
// key. Pick does not allocate.
func (v *View) Pick(service, clientRegion int, u uint64) Decision {
	d, _, _ := v.pick(service, Client{Region: clientRegion}, u, 0, false)
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
	d, _, _ := v.pick(service, Client{Region: clientRegion}, u, key, hasKey)
	return d
}

// PickClient is PickKey for a client whose address may be known: what
// the proxy calls for every request. PickClient does not allocate.
func (v *View) PickClient(service int, c Client, u uint64, key uint64, hasKey bool) Decision {
	d, _, _ := v.pick(service, c, u, key, hasKey)
	return d
}

// pick is PickClient, also returning the chosen backend's view and the
// endpoint's index in its healthy list.
func (v *View) pick(service int, c Client, u, key uint64, hasKey bool) (Decision, *backendView, int) {
	sv := &v.services[service]
	clientRegion := c.Region
	if clientRegion < 0 {
		clientRegion = len(sv.splits) - 1
	}
	sp := &sv.splits[clientRegion]
	d := Decision{Service: sv.svc}
	if sp.Status != 0 {
		d.Status, d.Reason = sp.Status, sp.Reason
		return d, nil, 0
	}
	draw, h := sv.policy.draws(u, key, hasKey)
	x := unit(draw)
	i := search(sp.cum, x)
	b := sp.backend[i]
	if c.HasAddr && sp.client != nil && sp.client[i] >= 0 {
		b = sp.clients[sp.client[i]].pick(c.Addr, x)
	}
	bv := sv.backends[b]
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
func (v *View) PickExcept(service int, c Client, u uint64, avoid *plan.Endpoint) Decision {
	d, bv, k := v.pick(service, c, u, 0, false)
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
	for _, cand := range sv.backends {
		if cand == bv || cand.drain.Drained || cand.b.ZeroCapacity() || len(cand.healthy) == 0 {
			continue
		}
		if best == nil || v.closer(c.Region, cand.b, best.b) {
			best = cand
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

// pick returns the backend a client with address hash addr reaches from
// draw x, which fell in the level's span of the split: the draw's place
// in the span picks one of the client's proxies and, within that, the
// backend from the proxy's own distribution; the proxy's home zone is a
// capacity-weighted draw from a hash of (client, region, proxy).
func (cl *clientLevel) pick(addr uint64, x float64) int {
	r := (x - cl.lo) / (cl.hi - cl.lo) * float64(cl.proxies)
	j := min(int(r), cl.proxies-1)
	r = min(r-float64(j), math.Nextafter(1, 0))
	h := search(cl.home, unit(mix64(addr^cl.salt^uint64(j+1)*weyl)))
	return cl.backends[search(cl.sub[h], r)]
}
