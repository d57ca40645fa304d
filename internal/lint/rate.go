package lint

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// Options are the facts about traffic that a config does not hold.
type Options struct {
	// Rate is the stated steady load in requests per second that each
	// URL map's default route receives (0: unknown, no load advice). A
	// weighted split divides it by weight.
	Rate float64
}

// offered returns each service's share of rate: what the URL maps'
// default routes send it (defaultService, or defaultRouteAction's
// weighted split).
func offered(p *plan.Plan, rate float64) map[string]float64 {
	out := map[string]float64{}
	for _, name := range slices.Sorted(maps.Keys(p.URLMaps)) {
		um := p.URLMaps[name].Config
		if a := um.DefaultRouteAction; a != nil && len(a.WeightedBackendServices) > 0 {
			total := 0
			for _, w := range a.WeightedBackendServices {
				total += max(w.Weight, 0)
			}
			for _, w := range a.WeightedBackendServices {
				if total > 0 && w.Weight > 0 {
					out[config.RefName(w.BackendService)] += rate * float64(w.Weight) / float64(total)
				}
			}
			continue
		}
		if um.DefaultService != "" {
			out[config.RefName(um.DefaultService)] += rate
		}
	}
	return out
}

// tier is the backends a service fills first: its PREFERRED backends, or
// else the region with the most RATE capacity.
type tier struct {
	what     string // "its PREFERRED backends (us-south1)"
	capacity float64
}

// rateCapacity sums the RATE capacity of backends (+Inf when one of them
// sets no rate target).
func rateCapacity(bs []*plan.Backend) float64 {
	sum := 0.0
	for _, b := range bs {
		if b.ZeroCapacity() {
			continue
		}
		if b.Mode != "RATE" || math.IsInf(b.Capacity, 1) {
			return math.Inf(1)
		}
		sum += b.Capacity
	}
	return sum
}

// firstTier finds the backends a service fills before it spills over.
func firstTier(svc *plan.Service) tier {
	var pref []*plan.Backend
	byRegion := map[string][]*plan.Backend{}
	for _, b := range svc.Backends {
		if b.Preferred {
			pref = append(pref, b)
		}
		byRegion[b.Group.Region] = append(byRegion[b.Group.Region], b)
	}
	if len(pref) > 0 {
		rs := map[string]bool{}
		for _, b := range pref {
			rs[b.Group.Region] = true
		}
		regions := slices.Sorted(maps.Keys(rs))
		return tier{"its PREFERRED backends (" + strings.Join(regions, ", ") + ")", rateCapacity(pref)}
	}
	best := tier{capacity: -1}
	for _, r := range slices.Sorted(maps.Keys(byRegion)) {
		if c := rateCapacity(byRegion[r]); c > best.capacity {
			best = tier{"the largest region (" + r + ")", c}
		}
	}
	return best
}

// rateBelowLoad: RATE capacity is a target; offered load above the
// target of the backends a service fills first spills over to the next
// ones (other regions) in steady state, distorting the split (seed 000,
// caveat 2: "if you set maxRatePerEndpoint too close to your normal
// steady-state request rate, routine traffic ... will spill over").
func rateBelowLoad(p *plan.Plan, o Options) []Finding {
	if o.Rate <= 0 {
		return nil
	}
	load := offered(p, o.Rate)
	var out []Finding
	for _, name := range slices.Sorted(maps.Keys(load)) {
		svc := p.ServiceByName[name]
		if svc == nil {
			continue
		}
		if f, ok := rateFinding(svc, load[name], o.Rate); ok {
			out = append(out, f)
		}
	}
	return out
}

// rateFinding compares one service's share of the load with its capacity.
func rateFinding(svc *plan.Service, share, rate float64) (Finding, bool) {
	total := rateCapacity(svc.Backends)
	t := firstTier(svc)
	path := "backendServices[" + svc.Name + "]"
	fix := fmt.Sprintf("raise maxRatePerInstance, maxRatePerEndpoint or maxRate on %s's RATE backends so that the capacity of %%s is well above the peak load (more than %s rps), or use balancingMode UTILIZATION on instance groups", svc.Name, num(share))
	lead := fmt.Sprintf("gets %s rps of the stated load (--rate %s)", num(share), num(rate))
	switch {
	case math.IsInf(total, 1) || total <= 0:
		return Finding{}, false
	case share > total:
		return Finding{Path: path, Message: fmt.Sprintf("%s, above the RATE capacity of all its backends together (%s rps): every backend runs over its target and there is no spare capacity to spill into", lead, num(total)),
			Fix: fmt.Sprintf(fix, "the service")}, true
	case t.capacity > 0 && !math.IsInf(t.capacity, 1) && share > t.capacity:
		return Finding{Path: path, Message: fmt.Sprintf("%s, above the RATE capacity of %s (%s rps): %s rps spill over to backends in other regions in steady state, with nothing failed", lead, t.what, num(t.capacity), num(share-t.capacity)),
			Fix: fmt.Sprintf(fix, t.what)}, true
	}
	return Finding{}, false
}

// num formats a rate without needless decimals.
func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
