package sim

import (
	"container/heap"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
)

// DNS is the authoritative DNS server a DNS simulation queries. In
// Spillway it is gslb.Server behind a thin adapter (internal/cli), so the
// simulation runs the server's own answering, member health, failback
// and TTL code; the simulator only supplies the virtual clock, the probe
// results of pool members' health checks and the engine View. sim does
// not import gslb, which does I/O. Implementations are called from one
// goroutine and must be deterministic for a seed.
type DNS interface {
	// Members lists every member of every GSLB name.
	Members() []DNSMember
	// Checks lists the health checks the server's prober would run.
	Checks() []DNSCheck
	// ObserveProbe feeds one result of Checks()[check], taken at now.
	ObserveProbe(check int, ok bool, detail string, now time.Time)
	// Weights returns the fraction of its weight each member of Members
	// gets at now with engine view v: 0 while down, else its failback
	// ramp step times its weight factor.
	Weights(now time.Time, v *engine.View) []float64
	// Query answers one query.
	Query(q DNSQuery) DNSAnswer
	// Placement says how GSLB name `name` places a client at address
	// addr (an ECS subnet's address, or the resolver's).
	Placement(name, addr string) DNSPlacement
}

// DNSPlacement is how a GEO or LATENCY name places the client of a run.
type DNSPlacement struct {
	// Client is the address placed: the ECS subnet's, else the
	// resolver's; Source says which ("ECS" or "resolver").
	Client string `json:"client"`
	Source string `json:"source"`
	// Places reports whether the name places clients (GEO, LATENCY).
	Places bool `json:"places"`
	// Matched reports whether a locations[] entry or the geoDatabase
	// placed the client; when it is false a GEO or LATENCY name answers
	// as WEIGHTED over all members.
	Matched bool `json:"matched"`
	// Entry is what placed it ("cidr 203.0.113.0/24", "geoDatabase") and
	// Region the client region it names.
	Entry  string `json:"entry,omitempty"`
	Region string `json:"region,omitempty"`
}

// DNSMember is one member of a GSLB name (a pool member, or a frontend
// of a backendService name).
type DNSMember struct {
	// Name is the GSLB name (canonical, with the trailing dot); Member
	// the member's name.
	Name, Member string
	Address      string
	Region       string
	// Checked reports whether the member has health checks of its own
	// (--down can fail those).
	Checked bool
	// TTL is the name's normal answer TTL: for that long after a
	// member's change, answers carry the transition TTL.
	TTL time.Duration
}

// DNSCheck is one probe target: it runs every Interval and its result
// decides the health checks of Members (indexes into DNS.Members).
type DNSCheck struct {
	Interval, Timeout time.Duration
	// Healthy and Unhealthy are the largest thresholds of the member
	// checks it decides (for the convergence horizon).
	Healthy, Unhealthy int
	Members            []int
}

// DNSQuery is one query: an address query for Name (as typed; relative
// names are not completed) at Now, with the engine's current View.
type DNSQuery struct {
	Name string
	// ClientSubnet is sent as EDNS Client Subnet ("" sends none).
	ClientSubnet string
	// Resolver is the address the query comes from: without ECS, GEO
	// and LATENCY names place the client by it.
	Resolver string
	Now      time.Time
	View     *engine.View
}

// DNSAnswer is the server's reply to a DNSQuery.
type DNSAnswer struct {
	// Rcode is the response code's mnemonic (NOERROR, NXDOMAIN, ...).
	Rcode string
	// Records are the answer's address records, in answer order.
	Records []DNSRecord
}

// DNSRecord is one address record of an answer.
type DNSRecord struct {
	Address string
	TTL     uint32
	// Member indexes DNS.Members (-1: no member has this address).
	Member int
}

// DNSOptions configure one DNS simulation.
type DNSOptions struct {
	// Name is the name queried, e.g. api.gslb.example.
	Name string
	// ClientSubnet is sent as EDNS Client Subnet (CIDR; "" sends none:
	// GEO and LATENCY names then place the client by Resolver).
	ClientSubnet string
	// Resolver is the address of the resolver the queries come from
	// (required): without ECS, GEO and LATENCY names place the client by
	// it, and answer as WEIGHTED when no locations entry matches it.
	Resolver string
	// Queries is the number of queries counted in count mode (Rate 0).
	Queries int
	// Rate (queries per second) and Duration select rate mode: queries
	// arrive evenly over Duration and Events apply.
	Rate     float64
	Duration time.Duration
	// Step is the timeline bucket width in rate mode (0: Duration/10).
	Step time.Duration
	Seed uint64
	// Down fail before counting starts: pool members (by name, address
	// or region) and, for backendService names, endpoints (zones,
	// regions, group names, instances or ip:port).
	Down []string
	// Events script failures and recoveries after counting starts (rate
	// mode), at offsets from the start of counting.
	Events []Event
}

// DNSResult is a DNS simulation's outcome. Counts, not shares: Members,
// Addresses and Regions count address records (an answer with
// answerCount 2 counts two), TTLs and Rcodes count answers.
type DNSResult struct {
	Name      string         `json:"name"`
	Queries   int            `json:"queries"`
	Members   map[string]int `json:"members"`
	Addresses map[string]int `json:"addresses"`
	Regions   map[string]int `json:"regions"`
	TTLs      map[string]int `json:"ttls"`
	Rcodes    map[string]int `json:"rcodes"`
	// Placement is how the name placed the client.
	Placement DNSPlacement `json:"placement"`
	// ConvergedAfter is the virtual time from the failure to the last
	// member weight change before counting.
	ConvergedAfter Duration `json:"convergedAfter"`
	// Transitions are the member weight changes of the names answered,
	// at offsets from the start of counting (negative: before).
	Transitions []DNSTransition `json:"transitions,omitempty"`
	// Timeline holds per-step counts in rate mode.
	Timeline []DNSBucket `json:"timeline,omitempty"`
	// MemberOrder lists the members of the queried name and of the
	// names its answers came from, in configuration order.
	MemberOrder []DNSMember `json:"-"`
}

// DNSBucket is one timeline step.
type DNSBucket struct {
	Start   Duration       `json:"start"`
	Queries int            `json:"queries"`
	Members map[string]int `json:"members"`
	TTLs    map[string]int `json:"ttls"`
	Rcodes  map[string]int `json:"rcodes"`
}

// DNSTransition is a change of a member's weight fraction.
type DNSTransition struct {
	At     Duration `json:"at"`
	Name   string   `json:"name"`
	Member string   `json:"member"`
	From   float64  `json:"from"`
	To     float64  `json:"to"`
}

// RunDNS simulates queries for o.Name against d, a DNS server compiled
// from the same config as p: pool members' health checks run on the
// virtual clock (members o.Down names fail them), so do the endpoints'
// (for backendService names), and queries are counted after convergence.
func RunDNS(p *plan.Plan, d DNS, o DNSOptions) (*DNSResult, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	s := newCore(p, o.Seed)
	r := &dnsRun{d: d, o: o, members: d.Members(), checks: d.Checks(), base: len(p.Endpoints)}
	r.down = make([]bool, len(r.members))
	s.dns = r
	if err := s.checkDNSTargets(o.Down, o.Events); err != nil {
		return nil, err
	}
	r.newResult(config.CanonicalDNSName(o.Name))
	r.res.Placement = placement(d, r.res.Name, o)
	s.convergeDNS()
	if o.Rate > 0 {
		s.runDNSRate()
	} else {
		for range o.Queries {
			r.query(s.now, s.view, nil)
		}
	}
	r.keepShownTransitions()
	return r.res, nil
}

// placement asks d how name places the run's client: the ECS subnet's
// address when o sends ECS, else the resolver's.
func placement(d DNS, name string, o DNSOptions) DNSPlacement {
	addr, source := o.Resolver, "resolver"
	if o.ClientSubnet != "" {
		addr, _, _ = strings.Cut(o.ClientSubnet, "/")
		source = "ECS"
	}
	pl := d.Placement(name, addr)
	pl.Client, pl.Source = addr, source
	return pl
}

// check validates o and sets its default (1,000 queries in count mode).
func (o *DNSOptions) check() error {
	if o.Name == "" {
		return fmt.Errorf("--dns needs a name, e.g. --dns api.gslb.example")
	}
	if _, err := netip.ParseAddr(o.Resolver); err != nil {
		return fmt.Errorf("--resolver %q: not an IP address (fix: give one address, such as 100.64.0.53)", o.Resolver)
	}
	if o.Queries <= 0 && o.Rate <= 0 {
		o.Queries = 1000
	}
	if o.Rate > 0 && o.Duration <= 0 {
		return fmt.Errorf("--rate needs --duration (for example --duration 60s)")
	}
	if len(o.Events) > 0 && o.Rate <= 0 {
		return fmt.Errorf("--at needs rate mode: add --rate QPS --duration D")
	}
	return nil
}

// checkDNSTargets fails on the first --down or event target that names
// no member or endpoint.
func (s *sim) checkDNSTargets(down []string, events []Event) error {
	for _, t := range down {
		if err := s.validateDNSTarget(t); err != nil {
			return fmt.Errorf("--down: %w", err)
		}
	}
	for _, ev := range events {
		for _, t := range ev.Targets {
			if err := s.validateDNSTarget(t); err != nil {
				return fmt.Errorf("event at %s: %w", ev.At, err)
			}
		}
	}
	return nil
}

// newResult starts the result for the name owner, showing owner's
// members.
func (r *dnsRun) newResult(owner string) {
	r.res = &DNSResult{Name: owner, Members: map[string]int{}, Addresses: map[string]int{}, Regions: map[string]int{},
		TTLs: map[string]int{}, Rcodes: map[string]int{"NOERROR": 0}}
	r.shown = make([]bool, len(r.members))
	for i, m := range r.members {
		if m.Name == owner {
			r.show(i)
		}
	}
}

// convergeDNS brings the simulation to the start of counting: every
// check passes first (its phase spread over its interval), then the
// --down targets fail and the virtual clock runs for the convergence
// horizon. It records ConvergedAfter and moves the transitions' origin
// to the start of counting.
func (s *sim) convergeDNS() {
	r := s.dns
	s.warmStart()
	for i, c := range r.checks {
		r.d.ObserveProbe(i, true, "", s.now)
		// Phases spread over the interval, in whole milliseconds.
		off := time.Duration(s.rng.Int64N(max(int64(c.Interval/time.Millisecond), 1))) * time.Millisecond
		heap.Push(&s.queue, &event{at: s.now.Add(off), kind: evDNSProbe, ep: r.base + i})
	}
	r.weights = r.d.Weights(s.now, s.view)
	failAt := s.now
	r.start = failAt
	s.setDown(r.o.Down, true)
	s.advance(s.now.Add(s.dnsHorizon()))
	r.res.ConvergedAfter = Duration(r.lastChange.Sub(failAt))
	if r.lastChange.IsZero() {
		r.res.ConvergedAfter = 0
	}
	// Transitions are reported from the start of counting.
	r.start = s.now
	for i := range r.res.Transitions {
		r.res.Transitions[i].At -= Duration(s.now.Sub(failAt))
	}
}

// keepShownTransitions drops the transitions of members not shown.
func (r *dnsRun) keepShownTransitions() {
	kept := r.res.Transitions[:0]
	for _, t := range r.res.Transitions {
		for _, m := range r.res.MemberOrder {
			if m.Name == t.Name && m.Member == t.Member {
				kept = append(kept, t)
				break
			}
		}
	}
	r.res.Transitions = kept
}

// dnsRun is the DNS part of a simulation.
type dnsRun struct {
	d       DNS
	o       DNSOptions
	members []DNSMember
	checks  []DNSCheck
	// base is the event ep of check 0 (endpoint probes come first).
	base    int
	down    []bool    // per member
	weights []float64 // last sampled, per member
	shown   []bool    // per member: in res.MemberOrder
	res     *DNSResult
	// start is the origin of transition times; lastChange the time of
	// the last weight change.
	start, lastChange time.Time
}

// matchMembers returns the members a --down target names: by member
// name, address or region.
func (r *dnsRun) matchMembers(t string) []int {
	var out []int
	for i, m := range r.members {
		if t == m.Member || t == m.Address || (m.Region != "" && t == m.Region) {
			out = append(out, i)
		}
	}
	return out
}

// validateDNSTarget checks that a --down target fails something: a
// member with health checks or an endpoint.
func (s *sim) validateDNSTarget(t string) error {
	if len(s.matchEndpoints(t)) > 0 {
		return nil
	}
	ms := s.dns.matchMembers(t)
	for _, i := range ms {
		if s.dns.members[i].Checked {
			return nil
		}
	}
	if len(ms) > 0 {
		m := s.dns.members[ms[0]]
		return fmt.Errorf("%q is member %s of %s, which has no health check of its own, so nothing can fail it (fix: fail the endpoints behind it, e.g. its region's zones, or give the member a healthCheck)", t, m.Member, m.Name)
	}
	var names []string
	for _, m := range s.dns.members {
		if m.Checked && !slices.Contains(names, m.Member) {
			names = append(names, m.Member)
		}
	}
	hint := "the config has no pool member with a health check"
	if len(names) > 0 {
		hint = "use a pool member's name, address or region, e.g. " + strings.Join(names, ", ")
	}
	return fmt.Errorf("%q matches no pool member (name, address or region) and no endpoint (fix: %s; for backendService names, %s)", t, hint, s.endpointHint())
}

// setDown marks the members targets name as failing (or not) their checks.
func (r *dnsRun) setDown(targets []string, down bool) {
	for _, t := range targets {
		for _, i := range r.matchMembers(t) {
			r.down[i] = down
		}
	}
}

// probe runs DNS check ev.ep at now: it fails while any member it
// decides is down. It then moves ev to the check's next run.
func (r *dnsRun) probe(ev *event, now time.Time) {
	i := ev.ep - r.base
	c := r.checks[i]
	ok := true
	for _, m := range c.Members {
		ok = ok && !r.down[m]
	}
	detail := ""
	if !ok {
		detail = "simulated failure"
	}
	r.d.ObserveProbe(i, ok, detail, now)
	ev.at = ev.at.Add(max(c.Interval, time.Millisecond))
}

// show adds member i to the members the result lists.
func (r *dnsRun) show(i int) {
	if r.shown[i] {
		return
	}
	r.shown[i] = true
	r.res.MemberOrder = append(r.res.MemberOrder, r.members[i])
	slices.SortStableFunc(r.res.MemberOrder, func(a, b DNSMember) int { return r.index(a) - r.index(b) })
	m := r.members[i]
	r.res.Members[m.Member] += 0
	r.res.Addresses[m.Address] += 0
	if m.Region != "" {
		r.res.Regions[m.Region] += 0
	}
}

// index returns m's index in Members.
func (r *dnsRun) index(m DNSMember) int {
	for i := range r.members {
		if r.members[i] == m {
			return i
		}
	}
	return -1
}

// sample records the members whose weight changed since the last sample.
func (r *dnsRun) sample(now time.Time, v *engine.View) {
	w := r.d.Weights(now, v)
	for i := range w {
		if i < len(r.weights) && w[i] != r.weights[i] {
			m := r.members[i]
			r.res.Transitions = append(r.res.Transitions, DNSTransition{At: Duration(now.Sub(r.start)), Name: m.Name, Member: m.Member, From: r.weights[i], To: w[i]})
			r.lastChange = now
		}
	}
	r.weights = w
}

// query sends one query at now and counts its answer in the result and
// in bucket b (nil in count mode).
func (r *dnsRun) query(now time.Time, v *engine.View, b *DNSBucket) {
	a := r.d.Query(DNSQuery{Name: r.o.Name, ClientSubnet: r.o.ClientSubnet, Resolver: r.o.Resolver, Now: now, View: v})
	res := r.res
	res.Queries++
	res.Rcodes[a.Rcode]++
	if b != nil {
		b.Queries++
		b.Rcodes[a.Rcode]++
	}
	for k, rec := range a.Records {
		if k == 0 {
			ttl := strconv.FormatUint(uint64(rec.TTL), 10)
			res.TTLs[ttl]++
			if b != nil {
				b.TTLs[ttl]++
			}
		}
		res.Addresses[rec.Address]++
		name := rec.Address
		if rec.Member >= 0 {
			r.show(rec.Member)
			m := r.members[rec.Member]
			name = m.Member
			if m.Region != "" {
				res.Regions[m.Region]++
			}
		}
		res.Members[name]++
		if b != nil {
			b.Members[name]++
		}
	}
}

// dnsHorizon is long enough for every health check, DNS or endpoint, to
// cross its thresholds and for answers to return to the normal TTL.
func (s *sim) dnsHorizon() time.Duration {
	h := s.horizon()
	for _, c := range s.dns.checks {
		h = max(h, c.Interval*time.Duration(max(c.Healthy, c.Unhealthy)+1)+c.Timeout)
	}
	var ttl time.Duration
	for _, m := range s.dns.members {
		ttl = max(ttl, m.TTL)
	}
	return h + ttl
}

// runDNSRate sends o.Rate queries per second for o.Duration.
func (s *sim) runDNSRate() {
	r := s.dns
	start := s.now
	step := r.o.Step
	if step <= 0 {
		step = max(r.o.Duration/10, time.Nanosecond)
	}
	for _, ev := range r.o.Events {
		heap.Push(&s.queue, &event{at: start.Add(ev.At), kind: evScript, script: ev})
	}
	total := int(r.o.Rate * r.o.Duration.Seconds())
	interval := time.Duration(float64(time.Second) / r.o.Rate)
	var b *DNSBucket
	for i := range total {
		t := start.Add(time.Duration(i) * interval)
		s.advance(t)
		r.sample(t, s.view)
		if bs := start.Add(time.Duration(len(r.res.Timeline)) * step); b == nil || !t.Before(bs) {
			r.res.Timeline = append(r.res.Timeline, DNSBucket{Start: Duration(bs.Sub(start)), Members: map[string]int{}, TTLs: map[string]int{}, Rcodes: map[string]int{}})
			b = &r.res.Timeline[len(r.res.Timeline)-1]
		}
		r.query(t, s.view, b)
	}
	s.advance(start.Add(r.o.Duration))
	r.sample(s.now, s.view)
}
