package gslb

import (
	"slices"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// placesClients reports whether n's answers depend on where the client
// is (GEO and LATENCY).
func (n *gname) placesClients() bool { return n.policy == geo || n.policy == latency }

// memberRegions returns the distinct regions of n's members, in member
// order.
func (n *gname) memberRegions() []string {
	var out []string
	for _, m := range n.members {
		if !slices.Contains(out, m.region) {
			out = append(out, m.region)
		}
	}
	return out
}

// latencyRegions returns the regions LATENCY places clients the geo
// database locates by coordinates in: every region with known
// coordinates (members' first, then regions[], then the built-in Google
// Cloud regions). A client goes to its nearest such region, whether or
// not members are there, and members are then ordered by that region's
// RTTs: the RTT table, not the great-circle distance to member regions
// (GEO's placement), decides. A client in Mumbai thus gets Tokyo (126
// ms) before Frankfurt (354 ms), though Frankfurt is nearer by distance.
func latencyRegions(p *plan.Plan, members []string, coords func(string) (float64, float64, bool)) []string {
	out := slices.Clone(members)
	add := func(r string) {
		if _, _, ok := coords(r); ok && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	if p.Config != nil {
		for _, r := range p.Config.Regions {
			add(r.Name)
		}
	}
	for _, r := range config.BuiltinRegions() {
		add(r)
	}
	return out
}
