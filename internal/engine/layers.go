package engine

import (
	"github.com/spillwaylb/spillway/internal/plan"
)

// regionSplit is the split of one service's traffic over the backends
// (zones) of one region: what a regional layer in that region draws
// from once an edge has chosen the region (View.PickInRegion).
type regionSplit struct {
	cum     []float64
	backend []int
	status  int
	reason  string
}

// buildRegionSplits computes sv's per-region splits: for region r, the
// shares that the split of r's own clients gives to r's backends,
// normalised (so the zones of r take an edge's traffic in the
// proportions the waterfall gives them for local clients). When that
// split gives r nothing (r spills all its own clients away: drained or
// below the failover threshold), the backends of r that still have a
// healthy endpoint and are not drained share in proportion to weight
// times healthy share, so that a request an edge sent anyway (its own
// view differed) is served if it can be.
func (sv *serviceView) buildRegionSplits(regions []string) {
	sv.regions = make([]regionSplit, len(regions))
	for r := range regions {
		rs := &sv.regions[r]
		weight := make([]float64, len(sv.backends))
		total := 0.0
		for _, sh := range sv.splits[r].Shares {
			if sv.backends[sh.Backend].b.Group.RegionID == r && sh.Fraction > 0 {
				weight[sh.Backend] += sh.Fraction
				total += sh.Fraction
			}
		}
		if total == 0 {
			for i, bv := range sv.backends {
				if bv.b.Group.RegionID == r && len(bv.healthy) > 0 && !bv.drain.Drained && !bv.b.ZeroCapacity() {
					weight[i] = bv.weight * bv.share
					total += weight[i]
				}
			}
		}
		if total == 0 {
			rs.status, rs.reason = 503, "no healthy backend of backend service "+sv.svc.Name+" in region "+regions[r]
			continue
		}
		acc := 0.0
		for i, w := range weight {
			if w == 0 || len(sv.backends[i].healthy) == 0 {
				continue
			}
			acc += w / total
			rs.cum = append(rs.cum, acc)
			rs.backend = append(rs.backend, i)
		}
		if n := len(rs.cum); n > 0 {
			rs.cum[n-1] = 1
		} else {
			rs.status, rs.reason = 503, "no healthy backend of backend service "+sv.svc.Name+" in region "+regions[r]
		}
	}
}

// PickInRegion chooses a backend (zone) and endpoint of service inside
// region: the decision of a regional layer, to which an edge has sent a
// request for that region. The zone is drawn from the region's split
// (see buildRegionSplits) with u, or with the affinity key under
// RING_HASH and MAGLEV, as PickClient draws; the endpoint as PickClient
// picks it. PickInRegion does not allocate.
func (v *View) PickInRegion(service, region int, u, key uint64, hasKey bool) Decision {
	sv := &v.services[service]
	d := Decision{Service: sv.svc}
	if region < 0 || region >= len(sv.regions) {
		d.Status, d.Reason = 503, "no region for the regional layer"
		return d
	}
	rs := &sv.regions[region]
	if rs.status != 0 {
		d.Status, d.Reason = rs.status, rs.reason
		return d
	}
	draw, h := sv.policy.draws(u, key, hasKey)
	bv := sv.backends[rs.backend[search(rs.cum, unit(draw))]]
	d.Backend = bv.b
	d.Endpoint = bv.healthy[v.endpoint(sv.policy, bv, u, h)]
	return d
}

// PickExceptInRegion is PickInRegion for a retry inside the region: it
// avoids endpoint avoid as PickExcept does, but never leaves the region.
func (v *View) PickExceptInRegion(service, region int, u uint64, avoid *plan.Endpoint) Decision {
	d := v.PickInRegion(service, region, u, 0, false)
	if d.Status != 0 || d.Endpoint != avoid {
		return d
	}
	sv := &v.services[service]
	bv := sv.backends[d.Backend.Index]
	if n := len(bv.healthy); n >= 2 {
		k := (indexOf(bv.healthy, avoid) + 1 + below(uint32(mix64(u^saltRetry)>>32), n-1)) % n
		d.Endpoint = bv.healthy[k]
		return d
	}
	rs := &sv.regions[region]
	for _, i := range rs.backend {
		if cand := sv.backends[i]; cand != bv && len(cand.healthy) > 0 {
			d.Backend = cand.b
			d.Endpoint = cand.healthy[int(cand.rr.Add(1)%uint32(len(cand.healthy)))]
			return d
		}
	}
	return d
}

func indexOf(l []*plan.Endpoint, e *plan.Endpoint) int {
	for i, x := range l {
		if x == e {
			return i
		}
	}
	return 0
}

// PickAvoiding is PickClient for an edge that must not send the request
// to some regions (avoid[r] true: the region's regional layer is
// unreachable, or it already failed this request): when the draw lands
// in an avoided region, the request goes to the backend the failover
// order would use next (PREFERRED first, then the nearest region; not
// drained, with capacity and a healthy endpoint) outside the avoided
// regions. With no such backend the decision is a 503. avoid may be
// shorter than the plan's regions (missing entries: not avoided).
func (v *View) PickAvoiding(service int, c Client, u, key uint64, hasKey bool, avoid []bool) Decision {
	d, bv, _ := v.pick(service, c, u, key, hasKey)
	if d.Status != 0 || !avoided(avoid, bv.b.Group.RegionID) {
		return d
	}
	sv := &v.services[service]
	var best *backendView
	for _, cand := range sv.backends {
		if avoided(avoid, cand.b.Group.RegionID) || cand.drain.Drained || cand.b.ZeroCapacity() || len(cand.healthy) == 0 {
			continue
		}
		if best == nil || v.closer(c.Region, cand.b, best.b) {
			best = cand
		}
	}
	if best == nil {
		return Decision{Service: sv.svc, Status: 503, Reason: "no healthy backend of backend service " + sv.svc.Name + " outside the regions already tried"}
	}
	d.Backend = best.b
	d.Endpoint = best.healthy[int(best.rr.Add(1)%uint32(len(best.healthy)))]
	return d
}

func avoided(avoid []bool, r int) bool { return r >= 0 && r < len(avoid) && avoid[r] }
