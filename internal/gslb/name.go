package gslb

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/health"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/probe"
)

// policy is a GSLB name's answer policy.
type policy uint8

const (
	weighted policy = iota
	failover
	geo
	latency
)

// gname is a compiled GSLB name. Everything but state is immutable after
// New; state is replaced whole (copy on write) when a member's health or
// ramp changes, so the query path reads it without locks.
type gname struct {
	owner         string
	policy        policy
	answerCount   int
	ttl, transTTL uint32
	// window is how long after a member's state change answers keep the
	// transition TTL: one normal TTL, the longest a resolver can hold an
	// answer from before the change.
	window time.Duration
	ramp   Ramp // template: Period and Steps
	// members in configuration order.
	members []member
	// ladders are the failover ladders (tiers of member indexes, first
	// choice first). WEIGHTED has one ladder of one tier, FAILOVER one
	// ladder of priority tiers, GEO and LATENCY one ladder per client
	// region (regions by RTT, LATENCY's scaled by bias) plus a last one, a
	// single tier, for clients whose region is unknown.
	ladders [][][]int
	all     []int // every member index, in order
	// has4 and has6: whether any member is IPv4, IPv6.
	has4, has6 bool
	table      *locationTable // GEO and LATENCY only
	geo        *geoDB         // GEO and LATENCY with geoDatabase only
	// geoKeys maps the country and continent keys of locations to
	// client-region ladders (GEO with geoDatabase only).
	geoKeys map[geoKey]int
	// geoRegions are the regions with known coordinates the geo
	// database's coordinates place clients in: GEO's member regions, or
	// for LATENCY every known region (latencyRegions).
	geoRegions []geoRegion
	// clientRegions names the client region of each ladder but the last
	// (GEO and LATENCY).
	clientRegions []string
	service       *plan.Service // backendService names only

	// passive judges members that are Spillway frontends (passiveOn);
	// frontends[i] are the frontends whose requests judge member i.
	passive   PassivePolicy
	passiveOn bool
	frontends [][]string

	// layers, windows and degraded are guarded by Server.mu; state is
	// published from them.
	layers   []Layered
	windows  []PassiveWindow
	degraded []bool
	// fleetDown[i]: member i's backend service has no healthy capacity
	// in its region (pool members with a service only).
	fleetDown []bool
	state     atomic.Pointer[nameState]
}

// member is one pool member (or, for a backend service, one frontend).
type member struct {
	name     string
	addr     netip.Addr
	region   string
	regionID int // plan region index, -1 if unknown (backend service only)
	weight   float64
	// rttScale is 1 − bias/100 (LATENCY; else 1).
	rttScale float64
	fallback bool
	// rr and rrTrans are the member's answer at the name's TTL and at
	// its transition TTL, built once.
	rr, rrTrans dns.RR
	// targets are the probe targets of the member's health checks, and
	// checks their layers and hysteresis (same order).
	targets []probe.Target
	checks  []LayerCheck
	// service is the backend service whose fleet in region the member's
	// health follows as well (pool members with backendService; "" for
	// none).
	service string
}

// nameState is the published health of a name's members.
type nameState struct {
	members []memberState
	// stableAfter is when answers go back to the normal TTL.
	stableAfter time.Time
}

// memberState is one member's published state.
type memberState struct {
	healthy bool
	// factor is the fraction of its weight the member keeps: halved by
	// a failing deep check or a passive signal, zeroed by a failing
	// synthetic check.
	factor  float64
	changed time.Time // last change of healthy or factor (zero: never)
	ramp    Ramp
}

// newName compiles gslbNames[i] of zone z.
func newName(z *config.DNSZone, g *config.GSLBName, cfg *config.Config, p *plan.Plan) (*gname, error) {
	n := &gname{
		owner:       z.Owner(g.Name),
		answerCount: intOr(g.AnswerCount, config.DNSDefaultAnswerCount),
		ttl:         uint32(intOr(g.TTL, config.DNSDefaultGSLBTTL)),
		transTTL:    uint32(intOr(g.TransitionTTL, config.DNSDefaultTransitionTTL)),
	}
	n.window = time.Duration(n.ttl) * time.Second
	switch g.Policy {
	case "FAILOVER":
		n.policy = failover
	case "GEO":
		n.policy = geo
	case "LATENCY":
		n.policy = latency
	}
	steps := config.DNSDefaultFailbackSteps()
	rampSec := config.DNSDefaultRampSec
	if f := g.Failback; f != nil {
		rampSec = intOr(f.RampSec, rampSec)
		if len(f.Steps) > 0 {
			steps = slices.Clone(f.Steps)
		}
	}
	n.ramp = NewRamp(time.Duration(rampSec)*time.Second, steps)

	var priorities []int
	var err error
	if g.Pool != nil {
		priorities, err = n.poolMembers(g.Pool, cfg, p)
	} else {
		priorities, err = n.frontendMembers(g, p)
	}
	if err != nil {
		return nil, err
	}
	for i := range n.members {
		m := &n.members[i]
		m.rr, m.rrTrans = addressRR(n.owner, m.addr, n.ttl), addressRR(n.owner, m.addr, n.transTTL)
		n.has4, n.has6 = n.has4 || m.addr.Is4(), n.has6 || m.addr.Is6()
	}
	n.layers = make([]Layered, len(n.members))
	n.fleetDown = make([]bool, len(n.members))
	for i := range n.members {
		n.layers[i] = NewLayered(n.members[i].checks)
	}
	n.passivePolicy(g, p)

	all := make([]int, len(n.members))
	for i := range all {
		all[i] = i
	}
	n.all = all
	if err := n.buildLadders(g, all, priorities, p); err != nil {
		return nil, err
	}
	initial := make([]memberState, len(n.members))
	for i := range initial {
		// Unknown health is healthy (health.State): serve until a probe
		// says otherwise.
		initial[i] = memberState{healthy: true, factor: 1, ramp: n.ramp}
	}
	n.state.Store(n.newState(initial))
	return n, nil
}

// poolMembers adds the members of an explicit pool, with their health
// checks, and returns their priorities.
func (n *gname) poolMembers(pool *config.GSLBPool, cfg *config.Config, p *plan.Plan) ([]int, error) {
	var priorities []int
	for i := range pool.Members {
		cm := &pool.Members[i]
		addr, err := netip.ParseAddr(cm.Address)
		if err != nil {
			return nil, fmt.Errorf("gslb: %s: member %q: %w", n.owner, cm.Name, err)
		}
		m := member{name: cm.Name, addr: addr.Unmap(), region: cm.Region, regionID: -1, service: config.RefName(cm.BackendService),
			weight: float64(intOr(cm.Weight, config.DNSDefaultWeight)), fallback: cm.Fallback, rttScale: 1}
		if n.policy == latency && cm.Bias != nil {
			m.rttScale = 1 - float64(*cm.Bias)/100
		}
		checks := cm.HealthChecks
		if cm.HealthCheck != "" {
			checks = []config.GSLBMemberCheck{{Name: cm.HealthCheck}}
		}
		for _, c := range checks {
			if c.Calculated != nil {
				if err := n.calculatedTargets(&m, c, cfg, p); err != nil {
					return nil, err
				}
				continue
			}
			if err := n.probeTarget(&m, c, m.addr, cfg, p); err != nil {
				return nil, err
			}
		}
		n.members = append(n.members, m)
		priorities = append(priorities, cm.Priority)
	}
	return priorities, nil
}

// frontendMembers adds a member per frontend with a specific address, for
// a name that answers with a backend service's frontends, and returns
// their priorities (all 0).
func (n *gname) frontendMembers(g *config.GSLBName, p *plan.Plan) ([]int, error) {
	svc := p.ServiceByName[config.RefName(g.BackendService)]
	if svc == nil {
		return nil, fmt.Errorf("gslb: %s: unknown backend service %q", n.owner, g.BackendService)
	}
	n.service = svc
	var priorities []int
	for _, f := range p.Frontends {
		addr, ok := config.GSLBFrontendAddr(f.Config)
		if !ok {
			continue
		}
		n.members = append(n.members, member{name: f.Name, addr: addr.Unmap(), region: f.Region,
			regionID: f.RegionID, weight: 1, rttScale: 1})
		priorities = append(priorities, 0)
	}
	if len(n.members) == 0 {
		return nil, fmt.Errorf("gslb: %s: no HTTP or HTTPS frontend with a specific IP address to answer", n.owner)
	}
	return priorities, nil
}

// buildLadders builds the name's ladders by its policy: one of all
// members (WEIGHTED), tiers by priority (FAILOVER), one per client region
// (GEO, LATENCY).
func (n *gname) buildLadders(g *config.GSLBName, all, priorities []int, p *plan.Plan) error {
	switch n.policy {
	case weighted:
		n.ladders = [][][]int{{all}}
	case failover:
		n.ladders = [][][]int{tiersBy(all, func(i int) float64 { return float64(priorities[i]) })}
	case geo, latency:
		return n.geoLadders(g, all, p)
	}
	return nil
}

// geoLadders builds one ladder per client region: member regions by
// RTT from it (LATENCY: scaled by each member's bias), nearest first.
func (n *gname) geoLadders(g *config.GSLBName, all []int, p *plan.Plan) error {
	clients := map[string]int{}
	var names []string
	add := func(r string) int {
		if i, ok := clients[r]; ok {
			return i
		}
		clients[r] = len(names)
		names = append(names, r)
		return len(names) - 1
	}
	var locs []location
	for _, l := range g.Locations {
		switch {
		case l.Country != "":
			n.setGeoKey(countryKey(l.Country), add(l.Region))
		case l.Continent != "":
			n.setGeoKey(continentKey(l.Continent), add(l.Region))
		default:
			pfx, err := netip.ParsePrefix(l.CIDR)
			if err != nil {
				continue // rejected by validation
			}
			locs = append(locs, location{prefix: pfx.Masked(), region: add(l.Region)})
		}
	}
	for _, m := range n.members {
		add(m.region)
	}
	coords := regionCoords(p)
	var placed []string // regions the database's coordinates place clients in
	if g.GeoDatabase != "" {
		placed = n.memberRegions()
		if n.policy == latency {
			placed = latencyRegions(p, placed, coords)
		}
		for _, r := range placed {
			add(r)
		}
	}
	n.table = newLocationTable(locs)
	n.clientRegions = names
	dist := regionDistance(p)
	for _, client := range names {
		n.ladders = append(n.ladders, tiersBy(all, func(i int) float64 {
			return dist(client, n.members[i].region) * n.members[i].rttScale
		}))
	}
	n.ladders = append(n.ladders, [][]int{all})
	if g.GeoDatabase != "" {
		db, err := openGeoDB(g.GeoDatabase)
		if err != nil {
			return fmt.Errorf("gslb: %s: geoDatabase: %w", n.owner, err)
		}
		n.geo = db
		for _, r := range placed {
			if lat, lon, ok := coords(r); ok {
				n.geoRegions = append(n.geoRegions, geoRegion{ladder: clients[r], lat: lat, lon: lon})
			}
		}
	}
	return nil
}

// setGeoKey maps a country or continent key to a client-region ladder.
func (n *gname) setGeoKey(k geoKey, ladder int) {
	if n.geoKeys == nil {
		n.geoKeys = map[geoKey]int{}
	}
	n.geoKeys[k] = ladder
}

// tiersBy groups members into tiers of equal key, lowest key first
// (+Inf, an unknown distance, last; ties between groups keep member
// order).
func tiersBy(members []int, key func(int) float64) [][]int {
	sorted := slices.Clone(members)
	slices.SortStableFunc(sorted, func(a, b int) int { return cmp.Compare(key(a), key(b)) })
	var tiers [][]int
	for i, m := range sorted {
		if i == 0 || key(m) != key(sorted[i-1]) {
			tiers = append(tiers, nil)
		}
		tiers[len(tiers)-1] = append(tiers[len(tiers)-1], m)
	}
	return tiers
}

// regionDistance returns the proximity metric between two regions: the
// engine's (plan.Plan.RTTMs: round-trip ms from rttMs, the built-in table
// or coordinates; +Inf when unknown), also for regions outside the plan.
func regionDistance(p *plan.Plan) func(a, b string) float64 {
	return p.RTTMs
}

// regionCoords returns a region's coordinates: from the regions list,
// else the built-in Google Cloud region locations.
func regionCoords(p *plan.Plan) func(region string) (lat, lon float64, ok bool) {
	coords := map[string][2]float64{}
	if p.Config != nil {
		for _, r := range p.Config.Regions {
			if r.Latitude != nil && r.Longitude != nil {
				coords[r.Name] = [2]float64{*r.Latitude, *r.Longitude}
			}
		}
	}
	return func(r string) (float64, float64, bool) {
		if c, ok := coords[r]; ok {
			return c[0], c[1], true
		}
		return plan.KnownRegionLocation(r)
	}
}

// probeTarget adds one of m's probe targets, from layered check c,
// probing addr.
func (n *gname) probeTarget(m *member, c config.GSLBMemberCheck, addr netip.Addr, cfg *config.Config, p *plan.Plan) error {
	name := config.RefName(c.Name)
	var hc *plan.HealthCheck
	for _, h := range p.HealthChecks {
		if h.Name == name {
			hc = h
		}
	}
	var ch *config.HealthCheck
	for i := range cfg.HealthChecks {
		if cfg.HealthChecks[i].Name == name {
			ch = &cfg.HealthChecks[i]
		}
	}
	if hc == nil || ch == nil {
		return fmt.Errorf("gslb: %s: member %q: unknown health check %q", n.owner, m.name, name)
	}
	port, ok := config.FixedProbePort(ch)
	if !ok || port == 0 {
		return fmt.Errorf("gslb: %s: member %q: health check %q has no fixed port", n.owner, m.name, name)
	}
	m.targets = append(m.targets, probe.Target{
		Addr: netip.AddrPortFrom(addr, uint16(port)).String(),
		Spec: probe.Spec{Type: hc.Type, Interval: hc.Interval, Timeout: hc.Timeout, Path: hc.Path,
			Host: hc.Host, Response: hc.Response, Request: hc.Request, ProxyHeader: hc.ProxyHeader,
			GRPCService: hc.GRPCService},
	})
	lc := LayerCheck{Thresholds: health.Thresholds{Healthy: config.DNSDefaultHealthyThreshold, Unhealthy: config.DNSDefaultUnhealthyThreshold}}
	switch c.Layer {
	case config.DNSLayerDeep:
		lc.Layer = Deep
		lc.Thresholds.Unhealthy = config.DNSDefaultDeepUnhealthyThreshold
	case config.DNSLayerSynthetic:
		lc.Layer = Synthetic
		lc.Thresholds = health.Thresholds{Healthy: config.DNSDefaultSyntheticHealthyThreshold, Unhealthy: config.DNSDefaultSyntheticUnhealthyThreshold}
	}
	lc.Thresholds.Healthy = intOr(ch.HealthyThreshold, lc.Thresholds.Healthy)
	lc.Thresholds.Unhealthy = intOr(ch.UnhealthyThreshold, lc.Thresholds.Unhealthy)
	m.checks = append(m.checks, lc)
	return nil
}

// passivePolicy sets up the passive signal: which frontends judge each
// member, and the policy.
func (n *gname) passivePolicy(g *config.GSLBName, p *plan.Plan) {
	n.frontends = make([][]string, len(n.members))
	n.windows = make([]PassiveWindow, len(n.members))
	n.degraded = make([]bool, len(n.members))
	ps := g.Passive
	if ps == nil {
		ps = &config.GSLBPassive{}
	}
	if ps.Enable != nil && !*ps.Enable {
		return
	}
	maxErr := config.DNSDefaultPassiveMaxErrorRate
	if ps.MaxErrorRate != nil {
		maxErr = *ps.MaxErrorRate
	}
	n.passive = PassivePolicy{
		Window:       time.Duration(intOr(ps.WindowSec, config.DNSDefaultPassiveWindowSec)) * time.Second,
		MaxErrorRate: maxErr,
		MaxP95:       time.Duration(intOr(ps.MaxP95LatencyMs, config.DNSDefaultPassiveMaxP95LatencyMs)) * time.Millisecond,
		MinRequests:  uint64(intOr(ps.MinRequests, config.DNSDefaultPassiveMinRequests)),
	}
	for i, m := range n.members {
		if n.service != nil {
			n.frontends[i] = []string{m.name}
		} else {
			n.frontends[i] = frontendsAt(p, m.addr)
		}
		if len(n.frontends[i]) > 0 {
			n.passiveOn = true
		}
		n.windows[i].Window = n.passive.Window
	}
}

// PassiveFrontends returns the names of the HTTP/HTTPS frontends of plan
// p whose request outcomes a DNS GSLB name of p's config depends on (the
// frontends of backendService names, and those at a pool member's
// address), unless the name turns its passive signal off. The composer
// counts those frontends' requests (PassiveCounters) and feeds them to
// Server.ObservePassive.
func PassiveFrontends(p *plan.Plan) []string {
	if p == nil || p.Config == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(names []string) {
		for _, f := range names {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	for _, z := range p.Config.DNSZones {
		for _, g := range z.GSLBNames {
			if g.Passive != nil && g.Passive.Enable != nil && !*g.Passive.Enable {
				continue
			}
			if g.Pool == nil {
				for _, f := range p.Frontends {
					if _, ok := config.GSLBFrontendAddr(f.Config); ok {
						add([]string{f.Name})
					}
				}
				continue
			}
			for _, m := range g.Pool.Members {
				if a, err := netip.ParseAddr(m.Address); err == nil {
					add(frontendsAt(p, a.Unmap()))
				}
			}
		}
	}
	return out
}

// frontendsAt returns the HTTP/HTTPS frontends listening on addr.
func frontendsAt(p *plan.Plan, addr netip.Addr) []string {
	var out []string
	for _, f := range p.Frontends {
		if a, ok := config.GSLBFrontendAddr(f.Config); ok && a.Unmap() == addr {
			out = append(out, f.Name)
		}
	}
	return out
}

// newState publishes member states, computing when answers are stable.
func (n *gname) newState(ms []memberState) *nameState {
	st := &nameState{members: ms}
	for i := range ms {
		if c := ms[i].changed; !c.IsZero() && c.Add(n.window).After(st.stableAfter) {
			st.stableAfter = c.Add(n.window)
		}
		if e := ms[i].ramp.End(); e.After(st.stableAfter) {
			st.stableAfter = e
		}
	}
	return st
}

// addressRR builds an A or AAAA record.
func addressRR(owner string, a netip.Addr, ttl uint32) dns.RR {
	if a.Is4() {
		return &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: a.AsSlice()}
	}
	return &dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: a.AsSlice()}
}

// intOr returns *p, or def when p is nil.
func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}
