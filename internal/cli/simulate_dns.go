package cli

import (
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/sim"
)

// simDNS adapts gslb.Server to sim.DNS: the simulator queries the very
// Server `spillway serve` runs (gslb.Server.Exchange, without sockets),
// on the simulator's virtual clock, with a seeded random source and the
// simulator's engine View, and feeds its probe results through
// gslb.Server.ObserveProbe, the path the Server's own prober reports
// through.
type simDNS struct {
	srv *gslb.Server
	// now and view are the simulator's; the Server reads them through
	// its Options.Now and Options.View.
	now     time.Time
	view    *engine.View
	members []gslb.MemberInfo
	checks  []gslb.Check
	// byKey maps a member's "name address" to its index in members.
	byKey map[string]int
}

// newSimDNS compiles p's DNS zones into a Server driven by the simulator.
func newSimDNS(p *plan.Plan, seed uint64) (*simDNS, error) {
	if p.Config == nil || len(p.Config.DNSZones) == 0 {
		return nil, fmt.Errorf("--dns: the config has no dnsZones (fix: see docs/dns.md, or examples/dns/gslb.yaml)")
	}
	a := &simDNS{byKey: map[string]int{}}
	srv, err := gslb.New(p.Config, p, gslb.Options{
		Now:  func() time.Time { return a.now },
		Rand: rand.NewPCG(seed, seed^0x5eed5eed5eed5eed),
		View: func() *engine.View { return a.view },
	})
	if err != nil {
		return nil, fmt.Errorf("dnsZones: %w", err)
	}
	a.srv = srv
	a.members = srv.Members()
	a.checks = srv.Checks()
	for i, m := range a.members {
		a.byKey[m.Name+" "+m.Address.String()] = i
	}
	return a, nil
}

// Members implements sim.DNS.
func (a *simDNS) Members() []sim.DNSMember {
	out := make([]sim.DNSMember, len(a.members))
	for i, m := range a.members {
		out[i] = sim.DNSMember{Name: m.Name, Member: m.Member, Address: m.Address.String(), Region: m.Region, Checked: m.Checked, TTL: m.TTL}
	}
	return out
}

// Checks implements sim.DNS.
func (a *simDNS) Checks() []sim.DNSCheck {
	idx := map[[2]string]int{}
	for i, m := range a.members {
		idx[[2]string{m.Name, m.Member}] = i
	}
	out := make([]sim.DNSCheck, len(a.checks))
	for i, c := range a.checks {
		sc := sim.DNSCheck{Interval: c.Target.Spec.Interval, Timeout: c.Target.Spec.Timeout}
		for _, m := range c.Members {
			sc.Healthy = max(sc.Healthy, m.Thresholds.Healthy)
			sc.Unhealthy = max(sc.Unhealthy, m.Thresholds.Unhealthy)
			if j, ok := idx[[2]string{m.Name, m.Member}]; ok {
				sc.Members = append(sc.Members, j)
			}
		}
		out[i] = sc
	}
	return out
}

// ObserveProbe implements sim.DNS.
func (a *simDNS) ObserveProbe(check int, ok bool, detail string, now time.Time) {
	a.now = now
	a.srv.ObserveProbe(a.checks[check].Target, ok, detail, now)
}

// Weights implements sim.DNS.
func (a *simDNS) Weights(now time.Time, v *engine.View) []float64 {
	a.now, a.view = now, v
	out := make([]float64, len(a.members))
	for i, m := range a.members {
		out[i], _ = a.srv.Weight(m.Name, m.Member)
	}
	return out
}

// Placement implements sim.DNS.
func (a *simDNS) Placement(name, addr string) sim.DNSPlacement {
	ip, _ := netip.ParseAddr(addr)
	pl := a.srv.Placement(name, ip)
	return sim.DNSPlacement{Places: pl.Places, Matched: pl.Matched, Entry: pl.Entry, Region: pl.Region}
}

// resolverCandidates are the addresses the simulated resolver may take
// by default, in order: documentation ranges first (RFC 5737), then
// shared and private ones, none of which a geo database places.
var resolverCandidates = []string{"192.0.2.53", "198.51.100.53", "203.0.113.53", "100.64.0.53", "10.0.0.53", "172.16.0.53", "192.168.0.53"}

// defaultResolver returns the simulated resolver's address when
// --resolver is not given: the first candidate that no locations[] CIDR
// of any GSLB name of cfg contains (so GEO and LATENCY names do not
// place it), else the first 10.X.0.53 that none contains.
func defaultResolver(cfg *config.Config) string {
	var cidrs []netip.Prefix
	for _, z := range cfg.DNSZones {
		for _, n := range z.GSLBNames {
			for _, l := range n.Locations {
				if pfx, err := netip.ParsePrefix(l.CIDR); err == nil {
					cidrs = append(cidrs, pfx.Masked())
				}
			}
		}
	}
	outside := func(a netip.Addr) bool {
		for _, p := range cidrs {
			if p.Contains(a) {
				return false
			}
		}
		return true
	}
	for _, c := range resolverCandidates {
		if a := netip.MustParseAddr(c); outside(a) {
			return c
		}
	}
	for x := 1; x < 256; x++ {
		if a := netip.AddrFrom4([4]byte{10, byte(x), 0, 53}); outside(a) {
			return a.String()
		}
	}
	return "2001:db8::53" // every 10.X.0.53 is placed: an IPv6 resolver
}

// Query implements sim.DNS: an A query (AAAA when the name is a GSLB
// name with IPv6 members only), with ECS when q.ClientSubnet is set.
func (a *simDNS) Query(q sim.DNSQuery) sim.DNSAnswer {
	a.now, a.view = q.Now, q.View
	name := config.CanonicalDNSName(q.Name)
	msg := new(dns.Msg)
	msg.SetQuestion(name, a.qtype(name))
	if q.ClientSubnet != "" {
		if pfx, err := netip.ParsePrefix(q.ClientSubnet); err == nil {
			msg.SetEdns0(gslb.MaxUDPSize, false)
			e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(pfx.Bits()), Address: pfx.Masked().Addr().AsSlice()}
			if pfx.Addr().Is6() {
				e.Family = 2
			}
			opt := msg.IsEdns0()
			opt.Option = append(opt.Option, e)
		}
	}
	src, _ := netip.ParseAddr(q.Resolver)
	r := a.srv.Exchange(msg, src, q.Now)
	if r == nil {
		return sim.DNSAnswer{Rcode: "NOANSWER"}
	}
	ans := sim.DNSAnswer{Rcode: dns.RcodeToString[r.Rcode]}
	for _, rr := range r.Answer {
		var addr netip.Addr
		switch rr := rr.(type) {
		case *dns.A:
			addr, _ = netip.AddrFromSlice(rr.A.To4())
		case *dns.AAAA:
			addr, _ = netip.AddrFromSlice(rr.AAAA)
		default:
			continue
		}
		member, ok := a.byKey[rr.Header().Name+" "+addr.String()]
		if !ok {
			member = -1
		}
		ans.Records = append(ans.Records, sim.DNSRecord{Address: addr.String(), TTL: rr.Header().Ttl, Member: member})
	}
	return ans
}

// qtype is AAAA for a GSLB name whose members are all IPv6, else A.
func (a *simDNS) qtype(name string) uint16 {
	v4, v6 := false, false
	for _, m := range a.members {
		if m.Name == name {
			v4 = v4 || m.Address.Is4()
			v6 = v6 || m.Address.Is6()
		}
	}
	if v6 && !v4 {
		return dns.TypeAAAA
	}
	return dns.TypeA
}

// simulateDNS runs a DNS simulation of p.
func simulateDNS(p *plan.Plan, o sim.DNSOptions) (*sim.DNSResult, error) {
	if o.ClientSubnet != "" {
		pfx, err := netip.ParsePrefix(o.ClientSubnet)
		if err != nil {
			return nil, fmt.Errorf("--client-subnet %q: want a CIDR such as 198.51.100.0/24: %w", o.ClientSubnet, err)
		}
		o.ClientSubnet = pfx.Masked().String()
	}
	if o.Resolver == "" {
		o.Resolver = defaultResolver(p.Config)
	}
	d, err := newSimDNS(p, o.Seed)
	if err != nil {
		return nil, err
	}
	owner := config.CanonicalDNSName(o.Name)
	if !inServedZone(p.Config, owner) {
		var zones []string
		for _, z := range p.Config.DNSZones {
			zones = append(zones, config.CanonicalDNSName(z.Name))
		}
		return nil, fmt.Errorf("--dns %q: not in a served zone; the server would answer REFUSED (fix: use a name in %s)", o.Name, strings.Join(zones, ", "))
	}
	return sim.RunDNS(p, d, o)
}

// inServedZone reports whether name (canonical) is in one of cfg's zones.
func inServedZone(cfg *config.Config, name string) bool {
	for _, z := range cfg.DNSZones {
		if config.InDNSZone(name, config.CanonicalDNSName(z.Name)) {
			return true
		}
	}
	return false
}

// printDNSResult prints a DNS simulation's tables.
func printDNSResult(w io.Writer, o sim.DNSOptions, r *sim.DNSResult) {
	printDNSHeader(w, o, r)
	printDNSMembers(w, r)
	printDNSCounts(w, r)
	printDNSTransitions(w, r)
	printDNSTimeline(w, r)
}

// printDNSHeader prints the run's one-line summary.
func printDNSHeader(w io.Writer, o sim.DNSOptions, r *sim.DNSResult) {
	mode := fmt.Sprintf("%d queries after convergence", r.Queries)
	if o.Rate > 0 {
		mode = fmt.Sprintf("%d queries at %.0f qps over %s", r.Queries, o.Rate, o.Duration)
	}
	client := "none (no ECS)"
	if o.ClientSubnet != "" {
		client = o.ClientSubnet
	}
	down := "nothing"
	if len(o.Down) > 0 {
		down = strings.Join(o.Down, ", ")
	}
	fmt.Fprintf(w, "DNS %s · client subnet %s · down: %s · %s · converged %s after the failure · seed %d\n",
		r.Name, client, down, mode, time.Duration(r.ConvergedAfter).Round(time.Millisecond), o.Seed)
	fmt.Fprintf(w, "%s\n\n", placementLine(r.Placement))
}

// placementLine says which address placed the client and what it
// matched.
func placementLine(pl sim.DNSPlacement) string {
	who := "resolver " + pl.Client
	if pl.Source == "ECS" {
		who = "ECS subnet address " + pl.Client
	}
	switch {
	case !pl.Places:
		return "client: " + who + " (this name's answers do not depend on the client: it is not GEO or LATENCY)"
	case !pl.Matched:
		return "client placed by " + who + ": it matches no locations entry, so the name answers as WEIGHTED over all members"
	}
	return "client placed by " + who + ": it matches locations " + pl.Entry + " → client region " + pl.Region
}

// printDNSMembers prints the answers per member.
func printDNSMembers(w io.Writer, r *sim.DNSResult) {
	fmt.Fprintf(w, "%-16s %-18s %-18s %-24s %9s %7s\n", "MEMBER", "ADDRESS", "REGION", "NAME", "ANSWERS", "SHARE")
	listed := map[string]bool{}
	for _, m := range r.MemberOrder {
		region := m.Region
		if region == "" {
			region = "-"
		}
		fmt.Fprintf(w, "%-16s %-18s %-18s %-24s %9d %7s\n", m.Member, m.Address, region, m.Name, r.Members[m.Member], pct(r.Members[m.Member], r.Queries))
		listed[m.Member] = true
	}
	for _, k := range slices.Sorted(maps.Keys(r.Members)) {
		if !listed[k] {
			fmt.Fprintf(w, "%-16s %-18s %-18s %-24s %9d %7s\n", "(unknown)", k, "-", "-", r.Members[k], pct(r.Members[k], r.Queries))
		}
	}
}

// printDNSCounts prints the answers per region, TTL and rcode.
func printDNSCounts(w io.Writer, r *sim.DNSResult) {
	if len(r.Regions) > 0 {
		fmt.Fprintf(w, "\n%-18s %9s %7s\n", "REGION", "ANSWERS", "SHARE")
		for _, reg := range slices.Sorted(maps.Keys(r.Regions)) {
			fmt.Fprintf(w, "%-18s %9d %7s\n", reg, r.Regions[reg], pct(r.Regions[reg], r.Queries))
		}
	}
	ttls := ttlOrder(r.TTLs)
	fmt.Fprintf(w, "\n%-18s %9s %7s\n", "TTL", "ANSWERS", "SHARE")
	for _, t := range ttls {
		fmt.Fprintf(w, "%-18s %9d %7s\n", t+"s", r.TTLs[t], pct(r.TTLs[t], r.Queries))
	}
	fmt.Fprintln(w)
	rc := []string{"NOERROR", "NXDOMAIN", "SERVFAIL"}
	for _, k := range slices.Sorted(maps.Keys(r.Rcodes)) {
		if k != "NOERROR" && k != "NXDOMAIN" && k != "SERVFAIL" {
			rc = append(rc, k)
		}
	}
	var parts []string
	for _, k := range rc {
		parts = append(parts, fmt.Sprintf("%s %d (%s)", k, r.Rcodes[k], strings.TrimSpace(pct(r.Rcodes[k], r.Queries))))
	}
	fmt.Fprintf(w, "rcodes: %s\n", strings.Join(parts, " · "))
	if empty := r.Rcodes["NOERROR"] - sumTTLs(r.TTLs); empty > 0 {
		fmt.Fprintf(w, "  %d NOERROR answers had no address (NODATA)\n", empty)
	}
}

// printDNSTransitions prints the member weight changes, if any.
func printDNSTransitions(w io.Writer, r *sim.DNSResult) {
	if len(r.Transitions) == 0 {
		return
	}
	fmt.Fprintln(w, "\nmember weight changes (T+ from the start of counting; weight = ramp step × weight factor)")
	for _, t := range r.Transitions {
		fmt.Fprintf(w, "  %-10s %-16s %3.0f%% → %3.0f%%\n", time.Duration(t.At).Round(time.Millisecond), t.Member, 100*t.From, 100*t.To)
	}
}

// printDNSTimeline prints each step's shares, if there is a timeline.
func printDNSTimeline(w io.Writer, r *sim.DNSResult) {
	if len(r.Timeline) == 0 {
		return
	}
	var allTTL []string
	seen := map[string]int{}
	for _, b := range r.Timeline {
		for t, n := range b.TTLs {
			seen[t] += n
		}
	}
	allTTL = ttlOrder(seen)
	fmt.Fprintf(w, "\ntimeline (share of each step's answers)\n%-8s", "T+")
	for _, m := range r.MemberOrder {
		fmt.Fprintf(w, " %10s", m.Member)
	}
	for _, t := range allTTL {
		fmt.Fprintf(w, " %8s", "TTL "+t)
	}
	fmt.Fprintln(w)
	for _, b := range r.Timeline {
		fmt.Fprintf(w, "%-8s", time.Duration(b.Start))
		for _, m := range r.MemberOrder {
			fmt.Fprintf(w, " %10s", pct(b.Members[m.Member], b.Queries))
		}
		for _, t := range allTTL {
			fmt.Fprintf(w, " %8s", pct(b.TTLs[t], b.Queries))
		}
		fmt.Fprintln(w)
	}
}

// ttlOrder returns the TTL keys of m, numerically descending.
func ttlOrder(m map[string]int) []string {
	k := slices.Sorted(maps.Keys(m))
	num := func(s string) int { n, _ := strconv.Atoi(s); return n }
	slices.SortStableFunc(k, func(a, b string) int { return num(b) - num(a) })
	return k
}

// sumTTLs is the number of answers with at least one address.
func sumTTLs(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}
