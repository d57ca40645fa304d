package route

import (
	"maps"
	"slices"
)

// Actions returns the table's distinct actions that send to a backend
// service (not redirects), in a stable order: the URL map's default, then
// each path matcher's default, path rules and route rules, in the order
// the table holds them. The dashboard lists the weighted splits among
// them.
func (t *Table) Actions() []*Action {
	var out []*Action
	seen := map[*Action]bool{}
	add := func(a *Action) {
		if a != nil && a.Redirect == nil && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	add(t.def)
	pms := []*pathMatcher{t.star}
	for _, w := range t.wild {
		pms = append(pms, w.pm)
	}
	for _, w := range t.wildPort {
		pms = append(pms, w.pm)
	}
	for _, host := range sortedKeys(t.exact) {
		pms = append(pms, t.exact[host])
	}
	for _, pm := range pms {
		if pm == nil {
			continue
		}
		add(pm.def)
		for _, path := range sortedKeys(pm.exact) {
			add(pm.exact[path])
		}
		for _, pr := range pm.prefixes {
			add(pr.action)
		}
		for _, r := range pm.routes {
			add(r.action)
		}
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
