package gslb

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/health"
	"github.com/spillwaylb/spillway/internal/probe"
)

// report is the Prober's callback: it steps the health of every member
// the target decides. It is quick (a lock and a small copy), as the probe
// contract asks.
func (s *Server) report(r probe.Result) { s.ObserveProbe(r.Target, r.OK, r.Detail, r.At) }

// ObserveProbe feeds one result of probing t (one of Checks' targets),
// taken at now, to every member health check t decides: the same path
// the Server's own prober reports through, so the simulator can drive
// member health on a virtual clock. Results for unknown targets are
// ignored.
func (s *Server) ObserveProbe(t probe.Target, ok bool, detail string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range s.targets[t] {
		s.observeLocked(ref.name, ref.member, ref.check, ok, detail, now)
	}
}

// Check is one probe target of the Server's pool members and the member
// health checks its results decide.
type Check struct {
	Target  probe.Target
	Members []CheckedMember
}

// CheckedMember is one member health check a probe target decides.
type CheckedMember struct {
	// Name is the GSLB name (canonical owner) and Member the member.
	Name, Member string
	Layer        Layer
	Thresholds   health.Thresholds
}

// Checks returns the probe targets the Server's prober runs, in
// configuration order, with the member checks each decides.
func (s *Server) Checks() []Check {
	out := make([]Check, 0, len(s.checks))
	for _, t := range s.checks {
		c := Check{Target: t}
		for _, ref := range s.targets[t] {
			lc := ref.name.members[ref.member].checks[ref.check]
			c.Members = append(c.Members, CheckedMember{Name: ref.name.owner, Member: ref.name.members[ref.member].name,
				Layer: lc.Layer, Thresholds: lc.Thresholds})
		}
		out = append(out, c)
	}
	return out
}

// MemberInfo describes one member of a GSLB name: a pool member, or for a
// backendService name one of the frontends it answers with.
type MemberInfo struct {
	// Name is the GSLB name (canonical owner); Member the member's (or
	// frontend's) name.
	Name, Member string
	Address      netip.Addr
	Region       string
	// TTL and TransitionTTL are the name's answer TTLs.
	TTL, TransitionTTL time.Duration
	// Checked reports whether the member has health checks of its own.
	Checked bool
}

// Members returns every member of every GSLB name, names in
// configuration order and members in pool order.
func (s *Server) Members() []MemberInfo {
	var out []MemberInfo
	for _, n := range s.names {
		for _, m := range n.members {
			out = append(out, MemberInfo{Name: n.owner, Member: m.name, Address: m.addr, Region: m.region,
				TTL: time.Duration(n.ttl) * time.Second, TransitionTTL: time.Duration(n.transTTL) * time.Second,
				Checked: len(m.checks) > 0})
		}
	}
	return out
}

// observeLocked feeds one result of health check c to member i of n.
// Probe results go through the checks' hysteresis during a failback ramp
// too: a member that ramps back goes down after the unhealthy threshold
// of failures in a row (3 by default), like any other, not after one (a
// single lost probe would otherwise restart a ramp of minutes); it then
// needs the healthy threshold of successes to start a new ramp. A
// passive error spike during the ramp still rolls it back at once
// (ObserveErrorRate, ObservePassive). Deep and synthetic results change
// the member's weight factor. Caller must hold s.mu.
func (s *Server) observeLocked(n *gname, i, c int, ok bool, detail string, now time.Time) {
	m := &n.members[i]
	l := &n.layers[i]
	was := n.memberUp(i)
	l.Observe(c, ok, detail, now)
	if up := n.memberUp(i); up != was {
		s.setLocked(n, i, up, now)
		s.log.Info("gslb: member health changed", "name", n.owner, "member", m.name, "healthy", up, "detail", detail)
	}
	s.refreshFactorLocked(n, i, now)
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

// memberFactor is the fraction of its weight member i of n keeps: the
// layered checks' factor, halved again while the passive signal says
// the member is degraded. Caller must hold s.mu.
func (n *gname) memberFactor(i int) float64 {
	f := n.layers[i].Factor()
	if n.degraded[i] {
		f /= 2
	}
	return f
}

// refreshFactorLocked publishes member i's weight factor when it has
// changed. A member coming back from 0 (its synthetic check passes
// again) ramps back like a recovered one. Caller must hold s.mu.
func (s *Server) refreshFactorLocked(n *gname, i int, now time.Time) {
	f := n.memberFactor(i)
	old := n.state.Load()
	prev := old.members[i].factor
	if prev == f {
		return
	}
	ms := slices.Clone(old.members)
	ms[i].factor, ms[i].changed = f, now
	if prev == 0 && ms[i].healthy {
		ms[i].ramp = n.ramp
		ms[i].ramp.Start(now)
	}
	n.state.Store(n.newState(ms))
	s.log.Info("gslb: member weight factor changed", "name", n.owner, "member", n.members[i].name, "factor", f)
}

// rollbackLocked rolls member i of n back after its ramp failed: a
// member with shallow checks is down until they pass again; one without
// restarts its ramp from the first step. Caller must hold s.mu.
func (s *Server) rollbackLocked(n *gname, i int, detail string, now time.Time) {
	if l := &n.layers[i]; l.HasShallow() {
		l.Fail(detail, now)
		s.setLocked(n, i, false, now)
	} else {
		s.setLocked(n, i, !n.fleetDown[i], now)
	}
	s.log.Info("gslb: ramp rolled back", "name", n.owner, "member", n.members[i].name, "detail", detail)
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
			s.rollbackLocked(n, i, "error rate", now)
			return true
		}
	}
	return false
}

// ObservePassive feeds the cumulative request counters of Spillway's own
// frontends (PassiveCounters.Sample, by frontend name), sampled at the
// Server's now; the composer calls it every few seconds. Each member that
// is one of those frontends (or whose address is theirs) is judged over
// its name's passive window: an error rate or p95 latency above the
// policy halves its weight until a window is good again, and during a
// failback ramp an error rate above DefaultMaxErrorRate rolls it back.
func (s *Server) ObservePassive(samples map[string]PassiveSample) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.names {
		if !n.passiveOn {
			continue
		}
		for i, fes := range n.frontends {
			var sum PassiveSample
			have := false
			for _, f := range fes {
				if smp, ok := samples[f]; ok {
					sum.Add(&smp)
					have = true
				}
			}
			if !have {
				continue
			}
			n.windows[i].Add(now, sum)
			st := n.windows[i].Stats()
			if deg := n.passive.Degraded(st, n.degraded[i]); deg != n.degraded[i] {
				n.degraded[i] = deg
				s.log.Info("gslb: passive signal", "name", n.owner, "member", n.members[i].name, "degraded", deg,
					"requests", st.Requests, "errorRate", st.ErrorRate, "p95", st.P95)
				s.refreshFactorLocked(n, i, now)
			}
			if st.Requests >= n.passive.MinRequests {
				if r := n.state.Load().members[i].ramp; r.Observe(st.ErrorRate, now) {
					s.rollbackLocked(n, i, "passive error rate", now)
				}
			}
		}
	}
}

// Weight returns the share member of GSLB name owner gets at now,
// relative to its configured weight (1 = full): 0 while it is down,
// else its ramp fraction × its weight factor (halved by failing deep
// checks or the passive signal, 0 while a synthetic check fails). ok is
// false for an unknown name or member.
func (s *Server) Weight(owner, member string) (w float64, ok bool) {
	now := s.now()
	s.syncView(now)
	for _, n := range s.names {
		if n.owner != config.CanonicalDNSName(owner) {
			continue
		}
		st := n.state.Load()
		for i := range n.members {
			if n.members[i].name == member {
				ms := st.members[i]
				if !ms.healthy {
					return 0, true
				}
				return ms.ramp.Weight(now) * ms.factor, true
			}
		}
	}
	return 0, false
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
			s.syncFleetLocked(n, v, now)
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

// PrimeWait bounds how long a fresh server waits for its first probes
// before it answers (Prime).
const PrimeWait = 2 * time.Second

// primeParallel bounds the probes Prime runs at once.
const primeParallel = 64

// Prime probes every member health check once, concurrently, and waits
// up to wait for the results, so a fresh server does not answer a dead
// member until its first scheduled probe (which comes at a random offset
// within the check's interval, up to minutes away). A member's first
// result sets its health directly, as in the proxy. Probes still running
// at the deadline are abandoned and say nothing: their members stay
// unknown, answered as healthy, until the prober's first result. Members
// that already have a state (carried over a reload) are not probed.
func (s *Server) Prime(ctx context.Context, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sem := make(chan struct{}, primeParallel)
	var wg sync.WaitGroup
	for _, t := range s.checks {
		if s.known(t) {
			continue
		}
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			r := s.prober.Check(ctx, t)
			if ctx.Err() != nil {
				return // cut short by the deadline: no verdict
			}
			s.report(r)
		})
	}
	wg.Wait()
}

// known reports whether every member check target t decides has a
// result already.
func (s *Server) known(t probe.Target) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range s.targets[t] {
		if !ref.name.layers[ref.member].Known(ref.check) {
			return false
		}
	}
	return true
}

// memberOf returns the name of the member whose answer record rr is
// ("" when none is).
func (n *gname) memberOf(rr dns.RR) string {
	for i := range n.members {
		if m := &n.members[i]; m.rr == rr || m.rrTrans == rr {
			return m.name
		}
	}
	return ""
}

// MemberHealth is one member's published health.
type MemberHealth struct {
	// Name is the GSLB name, Member the member's name.
	Name, Member string
	Healthy      bool
}

// Health returns every member's published health, names in
// configuration order and members in pool order.
func (s *Server) Health() []MemberHealth {
	var out []MemberHealth
	for _, n := range s.names {
		st := n.state.Load()
		for i, m := range n.members {
			out = append(out, MemberHealth{Name: n.owner, Member: m.name, Healthy: st.members[i].healthy})
		}
	}
	return out
}
