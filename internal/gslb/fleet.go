package gslb

import (
	"time"

	"github.com/spillwaylb/spillway/internal/engine"
)

// memberUp reports whether member i of n is up: its layered checks pass
// and, for a member following a backend service, the service has
// healthy capacity in its region. Caller must hold s.mu.
func (n *gname) memberUp(i int) bool {
	return n.layers[i].Healthy() && !n.fleetDown[i]
}

// syncFleetLocked applies View v to the pool members of n that follow a
// backend service's fleet (members[].backendService). Caller must hold
// s.mu.
func (s *Server) syncFleetLocked(n *gname, v *engine.View, now time.Time) {
	for i := range n.members {
		m := &n.members[i]
		if m.service == "" {
			continue
		}
		down := !regionHealthy(v, m.service, m.region)
		if down == n.fleetDown[i] {
			continue
		}
		was := n.memberUp(i)
		n.fleetDown[i] = down
		if up := n.memberUp(i); up != was {
			s.setLocked(n, i, up, now)
		}
		s.log.Info("gslb: member fleet health changed", "name", n.owner, "member", m.name,
			"service", m.service, "region", m.region, "capacity", !down)
	}
}
