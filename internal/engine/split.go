package engine

import (
	"hash/fnv"
	"math"
	"slices"
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
	// client[k] is the index in clients of the level that entry k belongs
	// to when that level's zone choice depends on the client, else -1.
	// Nil when no level does.
	client  []int32
	clients []clientLevel
	// Shares are the fractions over all clients of the region.
	Shares []Share
	// Status is 0 when the split can serve, else the HTTP status the
	// balancer answers with (503) and Reason says why.
	Status int
	Reason string
}

// clientLevel is a WATERFALL_BY_REGION level whose zone choice depends on
// the client: each client reaches `proxies` second-layer proxies of the
// region, each homed in one zone (drawn in proportion to capacity from a
// hash of the client, the region and the proxy), and a proxy sends to its
// home zone what that zone can keep and spreads the rest (docs/semantics.md
// §2.4).
type clientLevel struct {
	lo, hi   float64 // the level's span of Split.cum
	salt     uint64  // hash of the level's region
	proxies  int
	backends []int       // the level's backends; home and sub index them
	home     []float64   // cumulative homing probabilities
	sub      [][]float64 // per home backend: cumulative fractions
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

// rung is one step of a cascade: something that keeps up to `health` of
// the traffic offered to the cascade, takes at most `capacity` (in the
// unit of demand), and overfills in proportion to `weight`.
type rung struct {
	health, capacity, weight float64
}

// cascade hands one unit of traffic down an ordered list of rungs. Each
// rung takes up to its health and what it cannot keep falls to the next;
// when every rung is degraded (the takes add up to less than 1) they are
// normalised, so traffic still goes wherever something is healthy. When
// demand is known, a rung takes at most its capacity, the excess spills to
// the next rung with health, then back up to any rung with room left (an
// earlier rung can have room when a degraded later one overflowed), and
// what no rung has room for overfills in proportion to weight. It returns
// nil when no rung has health.
func cascade(rs []rung, demand float64) []float64 {
	out := make([]float64, len(rs))
	rem, total := 1.0, 0.0
	for k, r := range rs {
		out[k] = math.Min(rem, r.health)
		rem -= out[k]
		total += out[k]
	}
	if total == 0 {
		return nil
	}
	if rem > 1e-12 {
		for k := range out {
			out[k] /= total
		}
	}
	if demand <= 0 {
		return out
	}
	carry := 0.0
	taken := make([]float64, len(rs))
	for k, r := range rs {
		want := out[k]*demand + carry
		if r.health == 0 {
			carry = want
			continue
		}
		taken[k] = math.Min(want, math.Max(0, r.capacity))
		carry = want - taken[k]
	}
	for k, r := range rs {
		if carry <= 1e-9 {
			break
		}
		if room := math.Max(0, r.capacity) - taken[k]; r.health > 0 && room > 0 {
			add := math.Min(room, carry)
			taken[k] += add
			carry -= add
		}
	}
	if carry > 1e-9 {
		sum := 0.0
		for _, r := range rs {
			if r.health > 0 {
				sum += r.weight
			}
		}
		for k, r := range rs {
			if r.health > 0 && sum > 0 {
				taken[k] += carry * r.weight / sum
			}
		}
	}
	for k := range out {
		out[k] = taken[k] / demand
	}
	return out
}

// fill caps a distribution x (fractions summing to 1) of `amount` at each
// entry's room, moving the excess to entries with room in proportion to
// weight w, and overfilling in proportion to w when every entry is full.
// It reports whether any cap was reached. amount 0 means no demand is
// known and x is returned as it is.
func fill(x []float64, amount float64, room, w []float64) ([]float64, bool) {
	if amount <= 0 {
		return x, false
	}
	load := make([]float64, len(x))
	over := false
	for i := range x {
		load[i] = x[i] * amount
		if load[i] > math.Max(0, room[i])+1e-9 {
			over = true
		}
	}
	if !over {
		return x, false
	}
	full := make([]bool, len(x))
	for range x { // each round fills at least one more entry
		excess := 0.0
		for i := range load {
			if r := math.Max(0, room[i]); !full[i] && load[i] > r+1e-9 {
				excess += load[i] - r
				load[i], full[i] = r, true
			}
		}
		if excess <= 1e-9 {
			break
		}
		sum := 0.0
		for i := range load {
			if !full[i] {
				sum += w[i]
			}
		}
		if sum == 0 { // everything full: overfill in proportion
			for i := range load {
				sum += w[i]
			}
			for i := range load {
				if sum > 0 {
					load[i] += excess * w[i] / sum
				}
			}
			break
		}
		for i := range load {
			if !full[i] {
				load[i] += excess * w[i] / sum
			}
		}
	}
	out := make([]float64, len(x))
	for i := range load {
		out[i] = load[i] / amount
	}
	return out, true
}

// computeSplit turns health, drain, capacity and demand into a split. The
// model (docs/semantics.md has the full derivation):
//
//  1. Levels: PREFERRED backends before DEFAULT ones; within a tier,
//     regions by proximity to the client. Drained and zero-capacity
//     backends are left out.
//  2. Health (Google's failoverHealthThreshold T, read as Envoy's
//     overprovisioning factor 1/T): a level's health is
//     min(1, capacity-weighted healthy share / T), and the levels share
//     the traffic by cascade.
//  3. Capacity (only when a demand rate is known): a level takes at most
//     its remaining RATE capacity; the excess spills down the ladder and
//     overfills in proportion to capacity when everything is full.
//  4. Inside a level, by the service LB policy's algorithm: see inLevel.
func computeSplit(in *splitInput, p *plan.Plan) Split {
	svc := in.svc
	levels := splitLevels(in, p)
	rungs := levelRungs(in, levels, svc.FailoverThreshold)
	shares := cascade(rungs, in.demand)
	if shares == nil {
		return Split{Status: 503, Reason: "no healthy backend in backend service " + svc.Name}
	}
	var sp Split
	for lv, l := range levels {
		if shares[lv] <= 0 {
			continue
		}
		sp.addLevel(in, p, lv, l, shares[lv])
	}
	if !sp.normalize() {
		return Split{Status: 503, Reason: "no healthy backend in backend service " + svc.Name}
	}
	return sp
}

// splitLevels groups the backends that can take traffic (not drained, not
// zero-capacity) into levels, PREFERRED before DEFAULT and, within a
// tier, regions by proximity to the client (ties by name).
func splitLevels(in *splitInput, p *plan.Plan) []*level {
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
	return levels
}

// levelRungs measures each level for the cascade, with failover
// threshold T. Health per level: min(1, capacity-weighted healthy share /
// T). A backend ramping back after an undrain (spillway.undrainRampSec)
// counts with the ramp's share of its capacity (bv.weight), like a partly
// healthy backend: a level whose backends all ramp keeps only part of its
// traffic, while one ramping zone among healthy ones costs the level
// nothing it can absorb.
func levelRungs(in *splitInput, levels []*level, T float64) []rung {
	rungs := make([]rung, len(levels))
	for k, l := range levels {
		full, healthy := 0.0, 0.0
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
		rungs[k] = rung{health: l.health, capacity: l.capacity, weight: l.weight * l.health}
	}
	return rungs
}

// addLevel appends the shares of level l (number lv), which takes the
// fraction share of the traffic, and how its clients pick when that
// depends on the client; it takes what the level is given from the
// backends' remaining capacity.
func (sp *Split) addLevel(in *splitInput, p *plan.Plan, lv int, l *level, share float64) {
	x, cl := inLevel(in, p, l, share*in.demand)
	lo := len(sp.Shares)
	for k, i := range l.backends {
		if f := share * x[k]; f > 0 {
			sp.Shares = append(sp.Shares, Share{Backend: i, Fraction: f, Level: lv})
			if in.demand > 0 {
				in.remaining[i] -= f * in.demand
			}
		}
	}
	if cl != nil && len(sp.Shares) > lo {
		if sp.client == nil {
			sp.client = make([]int32, lo, len(sp.Shares))
			for k := range sp.client {
				sp.client[k] = -1
			}
		}
		for range sp.Shares[lo:] {
			sp.client = append(sp.client, int32(len(sp.clients)))
		}
		sp.clients = append(sp.clients, *cl)
	} else if sp.client != nil {
		for range sp.Shares[lo:] {
			sp.client = append(sp.client, -1)
		}
	}
}

// normalize scales the shares to sum to 1 and builds the cumulative
// fractions picks draw from, and each client level's span of them. It
// returns false when no share is positive.
func (sp *Split) normalize() bool {
	sum := 0.0
	for _, s := range sp.Shares {
		sum += s.Fraction
	}
	if sum == 0 {
		return false
	}
	acc := 0.0
	for k := range sp.Shares {
		sp.Shares[k].Fraction /= sum
		acc += sp.Shares[k].Fraction
		sp.cum = append(sp.cum, acc)
		sp.backend = append(sp.backend, sp.Shares[k].Backend)
	}
	sp.cum[len(sp.cum)-1] = 1
	// Each client level's span of cum.
	for k, c := range sp.client {
		if c < 0 {
			continue
		}
		cl := &sp.clients[c]
		if k == 0 || sp.client[k-1] != c {
			cl.lo = 0
			if k > 0 {
				cl.lo = sp.cum[k-1]
			}
		}
		cl.hi = sp.cum[k]
	}
	return true
}

// inLevel distributes a level's traffic (`amount` requests per second, 0
// when no demand is known) over its backends, returning the fractions in
// the order of l.backends and, for a WATERFALL_BY_REGION level whose zone
// choice depends on the client, how a client's proxies pick:
//
//   - SPRAY_TO_REGION: in proportion to capacity × availability, where a
//     backend's availability is min(1, healthy share / T) times its undrain
//     ramp.
//   - WATERFALL_BY_REGION: each client reaches plan.SecondLayerProxies
//     proxies of the region, each homed in a zone in proportion to
//     capacity; a proxy keeps at home what the home zone can keep (its
//     availability) and spreads the rest like SPRAY_TO_REGION over the
//     other zones. Over all clients every zone fills in proportion to
//     capacity; one client uses the zones of its proxies.
//   - WATERFALL_BY_ZONE: the zones are ordered for the client region (the
//     "closest" zone first; Spillway does not know where zones are, so
//     the order is a stable hash of client region and zone) and traffic
//     cascades through them like levels: the first zone takes what it can
//     keep and, when demand is known, up to its capacity, then the next.
//
// Capacity (when amount > 0): a backend takes at most its remaining RATE
// capacity; the excess moves to backends with room, and when all are full
// the excess overfills in proportion to capacity. A level where a cap binds
// serves every client alike.
func inLevel(in *splitInput, p *plan.Plan, l *level, amount float64) ([]float64, *clientLevel) {
	n := len(l.backends)
	T := in.svc.FailoverThreshold
	avail := make([]float64, n) // usable share of each backend
	w := make([]float64, n)     // overfill and spread weight
	room := make([]float64, n)
	for k, i := range l.backends {
		bv := in.backends[i]
		avail[k] = math.Min(1, bv.share/T) * bv.weight / bv.b.Weight
		w[k] = bv.b.Weight * avail[k]
		room[k] = in.remaining[i]
	}
	if n == 1 {
		return []float64{1}, nil
	}
	switch in.svc.Algorithm {
	case plan.WaterfallByZone:
		order := zoneOrder(in, l)
		rs := make([]rung, n)
		for j, k := range order {
			rs[j] = rung{health: avail[k], capacity: room[k], weight: w[k]}
		}
		y := cascade(rs, amount)
		x := make([]float64, n)
		for j, k := range order {
			if y != nil {
				x[k] = y[j]
			}
		}
		return x, nil
	case plan.SprayToRegion:
		x, _ := fill(normalise(slices.Clone(w)), amount, room, w)
		return x, nil
	}
	// WATERFALL_BY_REGION.
	home := make([]float64, n)
	for k, i := range l.backends {
		home[k] = in.backends[i].b.Weight
	}
	home = normalise(home)
	cl := &clientLevel{proxies: max(1, p.SecondLayerProxies), backends: l.backends, sub: make([][]float64, n)}
	x := make([]float64, n)
	for h := range n {
		sub := make([]float64, n)
		sub[h] = avail[h]
		rest := 0.0
		for k := range n {
			if k != h {
				rest += w[k]
			}
		}
		for k := range n {
			if k != h && rest > 0 {
				sub[k] = (1 - avail[h]) * w[k] / rest
			}
		}
		sub = normalise(sub)
		for k := range n {
			x[k] += home[h] * sub[k]
		}
		cl.sub[h] = cumulative(sub)
	}
	x = normalise(x)
	if y, capped := fill(x, amount, room, w); capped {
		return y, nil
	}
	cl.home = cumulative(home)
	hs := fnv.New64a()
	hs.Write([]byte(p.Regions[l.region]))
	cl.salt = hs.Sum64()
	return x, cl
}

// zoneOrder returns the positions in l.backends in WATERFALL_BY_ZONE
// order for the split's client region: by a stable hash of (client
// region, zone), so different client regions favour different zones and
// a deployment is reproducible.
func zoneOrder(in *splitInput, l *level) []int {
	n := len(l.backends)
	order := make([]int, n)
	keys := make([]uint32, n)
	for k, i := range l.backends {
		order[k] = k
		h := fnv.New32a()
		h.Write([]byte(in.salt))
		h.Write([]byte{'/'})
		h.Write([]byte(in.backends[i].b.Group.Zone))
		keys[k] = h.Sum32()
	}
	sort.SliceStable(order, func(a, b int) bool { return keys[order[a]] < keys[order[b]] })
	return order
}

// normalise scales x to sum to 1 (all zeros stay zeros).
func normalise(x []float64) []float64 {
	sum := 0.0
	for _, v := range x {
		sum += v
	}
	if sum > 0 {
		for i := range x {
			x[i] /= sum
		}
	}
	return x
}

// cumulative returns the running sums of x (which sums to 1), with every
// entry from the last positive one on set to exactly 1, so a draw in
// [0, 1) never lands on a zero-width entry.
func cumulative(x []float64) []float64 {
	c := make([]float64, len(x))
	acc, last := 0.0, 0
	for i, v := range x {
		acc += v
		c[i] = acc
		if v > 0 {
			last = i
		}
	}
	for i := last; i < len(c); i++ {
		c[i] = 1
	}
	return c
}

// search returns the index of the entry of cum that draw x in [0, 1)
// falls in.
func search(cum []float64, x float64) int {
	i := 0
	for i < len(cum)-1 && x >= cum[i] {
		i++
	}
	return i
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
