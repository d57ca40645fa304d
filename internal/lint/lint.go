// Package lint finds the operational caveats of a valid config: patterns
// that load and route as written but surprise operators under failure (the
// seed article's caveats). It is pure: it reads a compiled plan.
package lint

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// Finding is one piece of advice.
type Finding struct {
	// Path names the resource, e.g. "backendServices[bs-south-pref]".
	Path string
	// Message says what will happen; Fix says what to change.
	Message, Fix string
}

// String formats the finding as "PATH: MESSAGE (fix: FIX)".
func (f Finding) String() string { return f.Path + ": " + f.Message + " (fix: " + f.Fix + ")" }

// Check returns the findings for p, in a stable order; o adds what the
// config cannot say (the stated load).
func Check(p *plan.Plan, o Options) []Finding {
	var out []Finding
	out = append(out, singleRegionWeighted(p)...)
	out = append(out, rateBelowLoad(p, o)...)
	out = append(out, drainLimit(p)...)
	out = append(out, sharedUtilization(p)...)
	out = append(out, failoverStepUp(p)...)
	return out
}

// drainLimit: auto-capacity drain never drains more than 50% of a
// service's backends, so a region holding more than half of them cannot
// be drained as a whole (seed 000, caveat 1).
func drainLimit(p *plan.Plan) []Finding {
	var out []Finding
	for _, svc := range p.Services {
		if !svc.AutoDrain {
			continue
		}
		n := len(svc.Backends)
		limit := n / 2
		per := map[string]int{}
		for _, b := range svc.Backends {
			per[b.Group.Region]++
		}
		for _, r := range slices.Sorted(maps.Keys(per)) {
			if c := per[r]; c > limit {
				out = append(out, Finding{
					Path:    "backendServices[" + svc.Name + "]",
					Message: fmt.Sprintf("a full outage of %s (%d of %d backends) cannot be drained: auto-capacity drain stops at 50%% (%d backends), the other %d stay \"drain blocked\" and keep taking traffic that fails over request by request", r, c, n, limit, c-limit),
					Fix:     fmt.Sprintf("give the other regions at least as many zonal groups as %s, so no region holds more than half of the service's backends", r),
				})
			}
		}
	}
	return out
}

// sharedUtilization: a group used by several backend services with
// balancingMode UTILIZATION is steered by load that no single service
// controls, and autoscaling on load-balancer utilization contradicts
// itself (seed 000, caveat 5).
func sharedUtilization(p *plan.Plan) []Finding {
	users := map[string][]string{}
	util := map[string]bool{}
	for _, svc := range p.Services {
		for _, b := range svc.Backends {
			users[b.Group.Name] = append(users[b.Group.Name], svc.Name)
			// On a network endpoint group UTILIZATION can only be a
			// serverless group's (config refuses it on others), which
			// has no utilization to autoscale on.
			if b.Mode == "UTILIZATION" && b.Group.Kind == "instanceGroup" {
				util[b.Group.Name] = true
			}
		}
	}
	var out []Finding
	for _, g := range slices.Sorted(maps.Keys(users)) {
		if len(users[g]) > 1 && util[g] {
			out = append(out, Finding{
				Path:    "group " + g,
				Message: "is shared by backend services " + strings.Join(users[g], ", ") + " with balancingMode UTILIZATION: each service sees the other's load as its own, and an autoscaler on load-balancer utilization would get contradicting signals",
				Fix:     "use balancingMode RATE with per-service targets on shared groups, or autoscale on CPU or a custom metric",
			})
		}
	}
	return out
}

// failoverStepUp: with a weighted split over services that prefer
// different regions, a full outage of one region moves its share onto the
// others within seconds, far faster than autoscaling (seed 000, caveat 3).
func failoverStepUp(p *plan.Plan) []Finding {
	var out []Finding
	for _, name := range slices.Sorted(maps.Keys(p.URLMaps)) {
		a := p.URLMaps[name].Config.DefaultRouteAction
		if a == nil || len(a.WeightedBackendServices) < 2 {
			continue
		}
		total := 0
		share := map[string]int{} // preferred region → weight
		for _, w := range a.WeightedBackendServices {
			svc := p.ServiceByName[config.RefName(w.BackendService)]
			if svc == nil || w.Weight == 0 {
				continue
			}
			r := preferredRegion(svc)
			if r == "" {
				continue
			}
			share[r] += w.Weight
			total += w.Weight
		}
		if len(share) < 2 || total == 0 {
			continue
		}
		for _, r := range slices.Sorted(maps.Keys(share)) {
			step := float64(total) / float64(share[r])
			if step < 2 {
				continue
			}
			out = append(out, Finding{
				Path:    "urlMaps[" + name + "]",
				Message: fmt.Sprintf("%s normally serves %.0f%% of this split; if every other region fails it serves 100%%, a %.1f× step-up within seconds of the health checks failing", r, 100*float64(share[r])/float64(total), step),
				Fix:     fmt.Sprintf("pre-size %s (instances, connection limits, NAT) for 100%% of peak load; autoscaling reacts in minutes", r),
			})
		}
	}
	return out
}

// preferredRegion is the single region of a service's PREFERRED backends
// ("" when there are none or they span regions).
func preferredRegion(svc *plan.Service) string {
	r := ""
	for _, b := range svc.Backends {
		if !b.Preferred {
			continue
		}
		if r != "" && r != b.Group.Region {
			return ""
		}
		r = b.Group.Region
	}
	return r
}
