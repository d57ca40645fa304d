package engine

import (
	"sync/atomic"

	"github.com/spillwaylb/spillway/internal/plan"
)

// lbPolicy is a backend service's localityLbPolicy: how an endpoint is
// chosen inside the backend (zone) the split picked.
type lbPolicy uint8

const (
	// polRoundRobin also serves WEIGHTED_ROUND_ROBIN: its weights come
	// from backend-reported load (ORCA), which Spillway does not receive.
	polRoundRobin lbPolicy = iota
	polRandom
	polLeastRequest
	polRingHash
	polMaglev
)

func policyOf(name string) lbPolicy {
	switch name {
	case "RANDOM":
		return polRandom
	case "LEAST_REQUEST":
		return polLeastRequest
	case "RING_HASH":
		return polRingHash
	case "MAGLEV":
		return polMaglev
	}
	return polRoundRobin
}

// hashed reports a consistent-hash policy, the only kind PickKey's key
// affects.
func (p lbPolicy) hashed() bool { return p == polRingHash || p == polMaglev }

// draws returns the draw that picks the backend (zone) and the hash that
// picks the endpoint under p: the uniform draw u and no hash, or under
// RING_HASH and MAGLEV both from the affinity key (from u when the
// request has none).
func (p lbPolicy) draws(u, key uint64, hasKey bool) (draw, h uint64) {
	draw = u
	if p.hashed() {
		if !hasKey {
			key = u
		} else {
			draw = mix64(key ^ saltZone)
		}
		h = mix64(key)
	}
	return draw, h
}

// Inflight counts the requests in flight to each endpoint of one plan, for
// LEAST_REQUEST. Views are rebuilt on every health or demand change, so
// the counters live outside them: create one per plan and hand it to every
// View of that plan (NextView). The proxy adds 1 before an attempt and
// subtracts 1 after it. Safe for concurrent use.
type Inflight struct {
	plan *plan.Plan
	c    []paddedCounter // by plan endpoint ID
}

// paddedCounter keeps hot endpoints' counters on separate cache lines.
type paddedCounter struct {
	n atomic.Int64
	_ [56]byte
}

// NewInflight returns zeroed counters for p's endpoints.
func NewInflight(p *plan.Plan) *Inflight {
	return &Inflight{plan: p, c: make([]paddedCounter, len(p.Endpoints))}
}

// Add adds delta to e's counter. It does nothing when f is nil or e is
// not an endpoint of f's plan (a request picked before a reload), so
// callers can pair Add(e, 1) and Add(e, -1) without checks.
func (f *Inflight) Add(e *plan.Endpoint, delta int64) {
	if f != nil && e.ID < len(f.c) && f.plan.Endpoints[e.ID] == e {
		f.c[e.ID].n.Add(delta)
	}
}

// Done is Add(e, -1), for `defer f.Done(e)`.
func (f *Inflight) Done(e *plan.Endpoint) { f.Add(e, -1) }

// Load returns the number of requests in flight to e (0 for a nil f or an
// endpoint of another plan).
func (f *Inflight) Load(e *plan.Endpoint) int64 {
	if f != nil && e.ID < len(f.c) && f.plan.Endpoints[e.ID] == e {
		return f.c[e.ID].n.Load()
	}
	return 0
}

// reuse takes old's hash structures when old had the same healthy
// endpoints, and reports whether it did.
func (bv *backendView) reuse(old *backendView) bool {
	if old.ring == nil && old.table == nil || len(old.healthy) != len(bv.healthy) {
		return false
	}
	for i, e := range bv.healthy {
		if old.healthy[i] != e {
			return false
		}
	}
	bv.ring, bv.table = old.ring, old.table
	return true
}

// build precomputes the endpoint choice structure of a backend over its
// healthy endpoints: the ring for RING_HASH, the lookup table for MAGLEV.
func (bv *backendView) build(pol lbPolicy, minRing int) {
	switch pol {
	case polRingHash:
		bv.ring = buildRing(bv.healthy, minRing, len(bv.b.Endpoints))
	case polMaglev:
		bv.table = buildMaglev(bv.healthy)
	}
}

// endpoint returns the index in bv.healthy of the endpoint for a request
// with random number u and, for the hash policies, key hash h.
func (v *View) endpoint(pol lbPolicy, bv *backendView, u, h uint64) int {
	n := len(bv.healthy)
	switch pol {
	case polRandom:
		return below(uint32(mix64(u)>>32), n)
	case polLeastRequest:
		if n == 1 {
			return 0
		}
		// Power of two choices: two distinct random endpoints, the one
		// with fewer requests in flight wins (the first on a tie).
		r := mix64(u)
		a := below(uint32(r>>32), n)
		b := below(uint32(r), n-1)
		if b >= a {
			b++
		}
		if v.inflight.Load(bv.healthy[b]) < v.inflight.Load(bv.healthy[a]) {
			return b
		}
		return a
	case polRingHash:
		return ringLookup(bv.ring, h)
	case polMaglev:
		return int(bv.table[below(uint32(h>>32), len(bv.table))])
	}
	return int(bv.rr.Add(1) % uint32(n))
}
