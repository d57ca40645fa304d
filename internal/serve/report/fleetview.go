package report

import (
	"cmp"
	"slices"

	"github.com/spillwaylb/spillway/internal/control"
)

// SummaryGroups returns the groups of h, each once (a group several
// services use appears in each), with the endpoints found down.
func SummaryGroups(h *Health) []control.SummaryGroup {
	if h == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []control.SummaryGroup
	for _, svc := range h.Services {
		for _, b := range svc.Backends {
			if seen[b.Group] {
				continue
			}
			seen[b.Group] = true
			g := control.SummaryGroup{Name: b.Group, Zone: b.Zone, Members: len(b.Endpoints)}
			for _, e := range b.Endpoints {
				if e.HealthState == "UNHEALTHY" {
					g.Down = append(g.Down, e.IPAddress)
				} else {
					g.Healthy++
				}
			}
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b control.SummaryGroup) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
