package gslb

import (
	"slices"
	"time"

	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/health"
	"github.com/spillwaylb/spillway/internal/probe"
)

// report is the Prober's callback: it steps the health of every member
// the target decides. It is quick (a lock and a small copy), as the probe
// contract asks.
func (s *Server) report(r probe.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range s.targets[r.Target] {
		s.observeLocked(ref.name, ref.member, r.OK, r.Detail, r.At)
	}
}

// observeLocked feeds one probe result to member i of n. A failure while
// the member ramps back rolls the ramp back: the member is down again and
// needs the healthy threshold of successes to start a new ramp. Caller
// must hold s.mu.
func (s *Server) observeLocked(n *gname, i int, ok bool, detail string, now time.Time) {
	m := &n.members[i]
	hs := &n.health[i]
	was := hs.Healthy()
	hs.Observe(ok, detail, now, m.thresholds)
	changed := hs.Healthy() != was
	cur := n.state.Load().members[i]
	errRate := 0.0
	if !ok {
		errRate = 1
	}
	if r := cur.ramp; hs.Healthy() && !changed && r.Observe(errRate, now) {
		*hs = health.State{}
		hs.Observe(false, detail, now, m.thresholds)
		changed = true
		s.log.Info("gslb: ramp rolled back", "name", n.owner, "member", m.name, "detail", detail)
	}
	if !changed {
		return
	}
	s.setLocked(n, i, hs.Healthy(), now)
	s.log.Info("gslb: member health changed", "name", n.owner, "member", m.name, "healthy", hs.Healthy(), "detail", detail)
}

// setLocked publishes member i of n as healthy or not from now: a member
// coming back starts its ramp. Caller must hold s.mu.
func (s *Server) setLocked(n *gname, i int, healthy bool, now time.Time) {
	old := n.state.Load()
	ms := slices.Clone(old.members)
	ms[i].healthy, ms[i].changed = healthy, now
	ms[i].ramp = n.ramp
	if healthy {
		ms[i].ramp.Start(now)
	}
	n.state.Store(n.newState(ms))
}

// ObserveErrorRate feeds a passive error rate (0..1, e.g. measured by the
// proxy) for member of GSLB name owner at the Server's now. During the
// member's ramp a rate above DefaultMaxErrorRate rolls it back: a member
// with a health check is down until its probes pass again; one without
// restarts its ramp from the first step. It reports whether the member
// was rolled back.
func (s *Server) ObserveErrorRate(owner, member string, rate float64) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.names {
		if n.owner != owner {
			continue
		}
		for i := range n.members {
			if n.members[i].name != member {
				continue
			}
			r := n.state.Load().members[i].ramp
			if !r.Observe(rate, now) {
				return false
			}
			if n.members[i].target != nil {
				hs := &n.health[i]
				*hs = health.State{}
				hs.Observe(false, "error rate", now, n.members[i].thresholds)
				s.setLocked(n, i, false, now)
			} else {
				s.setLocked(n, i, true, now)
			}
			return true
		}
	}
	return false
}

// syncView applies the engine's View to backendService names when it has
// changed since the last call: a frontend's region is healthy while the
// service has a healthy, undrained backend with capacity there.
func (s *Server) syncView(now time.Time) {
	if s.view == nil {
		return
	}
	v := s.view()
	if v == nil || v == s.lastView.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v == s.lastView.Load() {
		return
	}
	for _, n := range s.names {
		if n.service == nil {
			continue
		}
		st := n.state.Load()
		for i := range n.members {
			if h := regionHealthy(v, n.service.Name, n.members[i].region); h != st.members[i].healthy {
				s.setLocked(n, i, h, now)
				st = n.state.Load()
				s.log.Info("gslb: region health changed", "name", n.owner, "frontend", n.members[i].name, "healthy", h)
			}
		}
	}
	s.lastView.Store(v)
}

// regionHealthy reports whether service has healthy capacity in region
// according to v (any region when region is "").
func regionHealthy(v *engine.View, service, region string) bool {
	svc := v.Plan.ServiceByName[service]
	if svc == nil {
		return false
	}
	for _, b := range svc.Backends {
		if region != "" && b.Group.Region != region || b.ZeroCapacity() {
			continue
		}
		if bs := v.Backend(svc.ID, b.Index); bs.Healthy > 0 && !bs.Drained {
			return true
		}
	}
	return false
}
