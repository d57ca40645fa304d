package engine

import (
	"hash/fnv"
	"math"
	"sort"
	"sync/atomic"

	"github.com/spillwaylb/spillway/internal/plan"
)

// A level is one rung of a service's failover ladder: the non-drained
// backends of one preference tier in one region. Levels are ordered
// PREFERRED before DEFAULT, then by proximity to the client region.
type level struct {
	preferred bool
	region    int
	backends  []int // backend indexes
	weight    float64
	health    float64 // min(1, healthy share / failover threshold)
	capacity  float64 // remaining RATE capacity (+Inf when unlimited)
	share     float64 // fraction of the service's traffic sent here
}

// Share is one backend's fraction of a split, for explanation and tests.
type Share struct {
	Backend  int     // index in Service.Backends
	Fraction float64 // of the service's traffic from this client region
	Level    int     // rung of the failover ladder (0 = first choice)
}

// Split is the precomputed distribution of one service's traffic from one
// client region over its backends.
type Split struct {
	// draws counts View.NextDraw calls (atomic; first, for alignment).
	draws   uint64
	cum     []float64 // cumulative fractions, last = 1
	backend []int
	Shares  []Share
	// Status is 0 when the split can serve, else the HTTP status the
	// balancer answers with (503) and Reason says why.
	Status int
	Reason string
}

// splitInput is what computeSplit needs besides the plan.
type splitInput struct {
	svc       *plan.Service
	backends  []*backendView
	client    int // region index, or -1 for "no region"
	demand    float64
	remaining []float64 // per backend RATE capacity left; updated
	salt      string
}

// computeSplit turns health, drain, capacity and demand into a split. The
// model (docs/semantics.md has the full derivation):
//
//  1. Levels: PREFERRED backends before DEFAULT ones; within a tier,
//     regions by proximity to the client. Drained and zero-capacity
//     backends are left out.
//  2. Health (Google's failoverHealthThreshold T, read as Envoy's
//     overprovisioning factor 1/T): a level's health is
//     min(1, capacity-weighted healthy share / T). Levels take traffic in
//     order, each up to its health; what a level cannot keep fails over to
//     the next. If every level is degraded the shares are normalised, so
//     traffic still goes wherever something is healthy.
//  3. Capacity (only when a demand rate is known): a level takes at most
//     its remaining RATE capacity; the excess spills to the next level
//     with health, and when everything is full the excess overfills in
//     proportion to capacity.
//  4. Inside a level, SPRAY_TO_REGION spreads over backends in proportion
//     to capacity × min(1, healthy share / T); the waterfall algorithms
//     send to the proxy's home zone first (up to its health and capacity)
//     and spread only what it cannot take.
func computeSplit(in *splitInput, p *plan.Plan) Split {
	svc := in.svc
	T := svc.FailoverThreshold
	var levels []*level
	for _, bv := range in.backends {
		b := bv.b
		if bv.drain.Drained || b.ZeroCapacity() {
			continue
		}
		var l *level
		for _, x := range levels {
			if x.preferred == b.Preferred && x.region == b.Group.RegionID {
				l = x
			}
		}
		if l == nil {
			l = &level{preferred: b.Preferred, region: b.Group.RegionID}
			levels = append(levels, l)
		}
		l.backends = append(l.backends, b.Index)
	}
	dist := func(r int) float64 {
		if in.client < 0 {
			return 0
		}
		return p.Distance[in.client][r]
	}
	sort.SliceStable(levels, func(i, j int) bool {
		a, b := levels[i], levels[j]
		if a.preferred != b.preferred {
			return a.preferred
		}
		if da, db := dist(a.region), dist(b.region); da != db {
			return da < db
		}
		return p.Regions[a.region] < p.Regions[b.region]
	})

	// Health per level: min(1, capacity-weighted healthy share / T). A
	// backend ramping back after an undrain (spillway.undrainRampSec)
	// counts with the ramp's share of its capacity (bv.weight), like a
	// partly healthy backend: a level whose backends all ramp keeps only
	// part of its traffic, while one ramping zone among healthy ones
	// costs the level nothing it can absorb.
	for _, l := range levels {
		full, healthy := 0.0, 0.0
		l.capacity = 0
		for _, i := range l.backends {
			bv := in.backends[i]
			full += bv.b.Weight
			healthy += bv.weight * bv.share
			l.weight += bv.weight
			l.capacity += in.remaining[i]
		}
		if full > 0 {
			l.health = math.Min(1, healthy/full/T)
		}
	}
	rem, total := 1.0, 0.0
	for _, l := range levels {
		l.share = math.Min(rem, l.health)
		rem -= l.share
		total += l.share
	}
	if total == 0 {
		return Split{Status: 503, Reason: "no healthy backend in backend service " + svc.Name}
	}
	if rem > 1e-12 {
		for _, l := range levels {
			l.share /= total
		}
	}

	// Capacity.
	if in.demand > 0 {
		carry := 0.0
		taken := make([]float64, len(levels))
		for k, l := range levels {
			want := l.share*in.demand + carry
			if l.health == 0 {
				taken[k], carry = 0, want
				continue
			}
			take := math.Min(want, math.Max(0, l.capacity))
			taken[k], carry = take, want-take
		}
		// What spilled past the last level goes back up the ladder to
		// any healthy level with room left (an earlier level can have
		// room when a degraded later one overflowed), before overfilling.
		for k, l := range levels {
			if carry <= 1e-9 {
				break
			}
			if l.health == 0 {
				continue
			}
			room := math.Max(0, l.capacity) - taken[k]
			if room > 0 {
				add := math.Min(room, carry)
				taken[k] += add
				carry -= add
			}
		}
		if carry > 1e-9 {
			sum := 0.0
			for _, l := range levels {
				if l.health > 0 {
					sum += l.weight * l.health
				}
			}
			for k, l := range levels {
				if l.health > 0 && sum > 0 {
					taken[k] += carry * l.weight * l.health / sum
				}
			}
		}
		for k, l := range levels {
			l.share = taken[k] / in.demand
		}
	}

	// Inside each level.
	var sp Split
	add := func(i, lv int, f float64) {
		if f <= 0 {
			return
		}
		sp.Shares = append(sp.Shares, Share{Backend: i, Fraction: f, Level: lv})
		if in.demand > 0 {
			in.remaining[i] -= f * in.demand
		}
	}
	for lv, l := range levels {
		if l.share <= 0 {
			continue
		}
		// avail is a backend's usable share: its health against the
		// threshold, times its undrain ramp.
		avail := func(i int) float64 {
			bv := in.backends[i]
			return math.Min(1, bv.share/T) * bv.weight / bv.b.Weight
		}
		spread := func(amount float64, skip int) {
			sum := 0.0
			for _, i := range l.backends {
				if i != skip {
					sum += in.backends[i].b.Weight * avail(i)
				}
			}
			if sum == 0 {
				if skip >= 0 {
					add(skip, lv, amount)
				}
				return
			}
			for _, i := range l.backends {
				if i != skip {
					add(i, lv, amount*in.backends[i].b.Weight*avail(i)/sum)
				}
			}
		}
		if svc.Algorithm == plan.SprayToRegion || len(l.backends) == 1 {
			spread(l.share, -1)
			continue
		}
		home := homeBackend(in, p, l)
		keep := l.share * avail(home)
		if in.demand > 0 {
			keep = math.Min(keep, math.Max(0, in.remaining[home])/in.demand)
		}
		add(home, lv, keep)
		spread(l.share-keep, home)
	}
	sum := 0.0
	for _, s := range sp.Shares {
		sum += s.Fraction
	}
	if sum == 0 {
		return Split{Status: 503, Reason: "no healthy backend in backend service " + svc.Name}
	}
	acc := 0.0
	for k := range sp.Shares {
		sp.Shares[k].Fraction /= sum
		acc += sp.Shares[k].Fraction
		sp.cum = append(sp.cum, acc)
		sp.backend = append(sp.backend, sp.Shares[k].Backend)
	}
	sp.cum[len(sp.cum)-1] = 1
	return sp
}

// homeBackend is the backend in the zone a waterfall proxy favours in a
// level's region. Spillway is one proxy; it models Google's second-layer
// proxy for a region as sitting in one of that region's zones, chosen by a
// stable hash of (client region, region), so a given deployment is
// reproducible and different client regions favour different zones.
func homeBackend(in *splitInput, p *plan.Plan, l *level) int {
	idx := append([]int(nil), l.backends...)
	sort.Slice(idx, func(a, b int) bool {
		return in.backends[idx[a]].b.Group.Zone < in.backends[idx[b]].b.Group.Zone
	})
	h := fnv.New32a()
	h.Write([]byte(in.salt))
	h.Write([]byte{'/'})
	h.Write([]byte(p.Regions[l.region]))
	return idx[int(h.Sum32()%uint32(len(idx)))]
}

// weyl is 2⁶⁴/φ. The multiples k·weyl (mod 2⁶⁴), read as fractions of
// 2⁶⁴, are the golden-ratio Weyl sequence: the most evenly spread
// sequence there is in [0, 1).
const weyl = 0x9E3779B97F4A7C15

// NextDraw returns the draw for the next pick from a service's split for
// a client region (-1 for none): the split's next golden-ratio Weyl value.
// Picking with it instead of a random number keeps the realised split
// close to the computed one at any sample size: over n picks each backend's
// count is within a few requests of its fraction × n, where independent
// random draws wander by about √n (±30 requests at n = 1,000, which is the
// difference between matching the seed's table and not). Endpoint choices
// inside the backend still hash the draw (mix64), so they stay random.
// A new View starts a new sequence; the proxy and the simulator both pick
// with NextDraw, so the simulator still predicts the proxy.
func (v *View) NextDraw(service, clientRegion int) uint64 {
	return atomic.AddUint64(&v.Split(service, clientRegion).draws, 1) * weyl
}
