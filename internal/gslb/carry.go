package gslb

import "slices"

// CarryState hands s, a Server built for a reloaded config and not yet
// running, the member health of old, the generation it replaces: for
// every member of a name that both configs have (same owner name, member
// name, address and health checks), its checks' hysteresis state, its
// passive verdict, its published health, weight factor and failback ramp,
// and when they last changed (so the transition TTL keeps running).
// Members that are new, renamed, moved or checked differently start
// unknown, as in a fresh process. Without it a reload answered a member
// that was down at full weight until its first probe, and a member
// mid-ramp at 100%.
func (s *Server) CarryState(old *Server) {
	if old == nil {
		return
	}
	s.carrySerials(old)
	s.carryRateLimits(old)
	old.mu.Lock()
	defer old.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	byOwner := make(map[string]*gname, len(old.names))
	for _, n := range old.names {
		byOwner[n.owner] = n
	}
	for _, n := range s.names {
		on := byOwner[n.owner]
		if on == nil {
			continue
		}
		ost := on.state.Load()
		ms := slices.Clone(n.state.Load().members)
		carried := false
		for i := range n.members {
			j := on.memberIndex(&n.members[i])
			if j < 0 {
				continue
			}
			n.layers[i] = on.layers[j].clone()
			// The passive decision carries; its window starts empty
			// (old keeps filling its own until it stops).
			n.degraded[i] = on.degraded[j]
			n.fleetDown[i] = on.fleetDown[j]
			ms[i] = ost.members[j]
			carried = true
		}
		if carried {
			n.state.Store(n.newState(ms))
		}
	}
}

// memberIndex returns the index of the member of n that is m (same name,
// address and health checks, and the same backend service fleet), -1 if
// none.
func (n *gname) memberIndex(m *member) int {
	for j := range n.members {
		o := &n.members[j]
		if o.name == m.name && o.addr == m.addr && slices.Equal(o.checks, m.checks) && slices.Equal(o.targets, m.targets) &&
			o.service == m.service && (m.service == "" || o.region == m.region) {
			return j
		}
	}
	return -1
}
