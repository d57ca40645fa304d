package lint

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// routeAction is one route action of a URL map, with the path that names it.
type routeAction struct {
	path   string
	action *config.HTTPRouteAction
}

// routeActions lists every route action of a URL map: the default one,
// each path matcher's default, its path rules' and its route rules'.
func routeActions(um *config.URLMap) []routeAction {
	var out []routeAction
	add := func(path string, a *config.HTTPRouteAction) {
		if a != nil {
			out = append(out, routeAction{path, a})
		}
	}
	add("defaultRouteAction", um.DefaultRouteAction)
	for _, pm := range um.PathMatchers {
		p := "pathMatchers[" + pm.Name + "]"
		add(p+".defaultRouteAction", pm.DefaultRouteAction)
		for i, r := range pm.PathRules {
			add(fmt.Sprintf("%s.pathRules[%d].routeAction", p, i), r.RouteAction)
		}
		for _, r := range pm.RouteRules {
			add(fmt.Sprintf("%s.routeRules[priority %d].routeAction", p, r.Priority), r.RouteAction)
		}
	}
	return out
}

// serviceRegions lists the regions of a service's backends that can take
// traffic, sorted.
func serviceRegions(svc *plan.Service) []string {
	set := map[string]bool{}
	for _, b := range svc.Backends {
		if !b.ZeroCapacity() {
			set[b.Group.Region] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// singleRegionWeighted: a URL map picks one of its weightedBackendServices
// before it looks at health, and a retry stays on the picked service, so
// a service whose backends all live in one region fails its whole share
// when that region fails (seed 000: "If the 70% region goes down, 70% of
// requests fail with HTTP 503").
func singleRegionWeighted(p *plan.Plan) []Finding {
	var out []Finding
	for _, name := range slices.Sorted(maps.Keys(p.URLMaps)) {
		for _, ra := range routeActions(p.URLMaps[name].Config) {
			if f, ok := singleRegionSplit(p, name, ra); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

// singleRegionSplit checks one route action's weighted split.
func singleRegionSplit(p *plan.Plan, urlMap string, ra routeAction) (Finding, bool) {
	total := 0
	var single []string      // "bs-south (us-south1, weight 70)"
	var names []string       // the single-region services
	loss := map[string]int{} // region → weight that fails with it
	for _, w := range ra.action.WeightedBackendServices {
		svc := p.ServiceByName[config.RefName(w.BackendService)]
		if svc == nil || w.Weight <= 0 {
			continue
		}
		total += w.Weight
		if rs := serviceRegions(svc); len(rs) == 1 {
			single = append(single, fmt.Sprintf("%s (%s, weight %d)", svc.Name, rs[0], w.Weight))
			names = append(names, svc.Name)
			loss[rs[0]] += w.Weight
		}
	}
	if total == 0 || len(single) == 0 || len(ra.action.WeightedBackendServices) < 2 {
		return Finding{}, false
	}
	var fails []string
	for _, r := range slices.Sorted(maps.Keys(loss)) {
		fails = append(fails, fmt.Sprintf("%s fails, %s of these requests fail with 503", r, percent(loss[r], total)))
	}
	return Finding{
		Path: "urlMaps[" + urlMap + "]." + ra.path,
		Message: fmt.Sprintf("weighted backend services %s each have backends in one region only: the URL map picks a service by weight before it looks at health, and retries stay on that service, so when %s",
			strings.Join(single, ", "), strings.Join(fails, "; when ")),
		Fix: fmt.Sprintf("give each of %s backends in more than one region: the same zonal groups in every service, PREFERRED in its own region and DEFAULT elsewhere, with a serviceLbPolicy that sets autoCapacityDrain, as in examples/seed-70-30/with-policy.yaml",
			strings.Join(names, ", ")),
	}, true
}

// percent formats part/total as a percentage without needless decimals.
func percent(part, total int) string {
	v := 100 * float64(part) / float64(total)
	if v == float64(int(v)) {
		return fmt.Sprintf("%d%%", int(v))
	}
	return fmt.Sprintf("%.1f%%", v)
}
