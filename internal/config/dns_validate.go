package config

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// dnsRecordTypes are the static record types dnsZones[].records accept.
var dnsRecordTypes = []string{"A", "AAAA", "CNAME", "TXT", "MX", "SRV", "CAA", "PTR", "NS", "DS"}

// gslbPolicies are the values of gslbNames[].policy.
var gslbPolicies = []string{"WEIGHTED", "FAILOVER", "GEO", "LATENCY"}

// dnsZones validates dnsZones[] and how they relate to DNS frontends.
func (v *validator) dnsZones() {
	zones := map[string]int{}
	for i := range v.c.DNSZones {
		z := &v.c.DNSZones[i]
		p := at("dnsZones[%d]", i)
		if !v.dnsName(p+".name", z.Name, "gslb.example.") {
			continue
		}
		zn := CanonicalDNSName(z.Name)
		if first, dup := zones[zn]; dup {
			v.add(p+".name", "serve each zone once", "zone %q is already dnsZones[%d]", zn, first)
			continue
		}
		zones[zn] = i
		v.dnsZone(p, z)
	}
	v.dnsIdentity()
	v.dnsRateLimits()
	v.dnsTelemetry()
	v.tsigKeyClashes()
	var dnsFrontends int
	for _, f := range v.c.Frontends {
		if f.Protocol == "DNS" {
			dnsFrontends++
		}
	}
	switch {
	case len(v.c.DNSZones) > 0 && dnsFrontends == 0:
		v.add("dnsZones", "add a frontend with protocol: DNS, e.g. {name: dns, address: 0.0.0.0:53, protocol: DNS}",
			"no frontend serves the DNS zones")
	case len(v.c.DNSZones) == 0 && dnsFrontends > 0:
		for i, f := range v.c.Frontends {
			if f.Protocol == "DNS" {
				v.add(at("frontends[%d].protocol", i), "add dnsZones for it to serve, or remove the frontend",
					"a DNS frontend needs dnsZones")
			}
		}
	}
}

// dnsZone validates one zone whose name is valid.
func (v *validator) dnsZone(p string, z *DNSZone) {
	zone := CanonicalDNSName(z.Name)
	from := len(v.errs)
	recs := v.zoneFile(p, z, zone)
	v.dnsSOA(p+".soa", z.SOA, zone)
	if len(z.ZoneNameServers()) == 0 && (z.ZoneFile == nil || z.file != nil) {
		v.add(p+".nameServers", "list the zone's name servers, e.g. nameServers: [ns1."+zone+"], or give the apex NS records in zoneFile", "at least one name server is required")
	}
	for j, ns := range z.NameServers {
		v.dnsName(at("%s.nameServers[%d]", p, j), ns, "ns1."+zone)
	}
	v.dnssec(p+".dnssec", z.DNSSEC)

	owners := zoneOwners{v: v, names: map[string]zoneOwner{}}
	sets := map[string]zoneRecord{}
	cnames := map[string]cnameLink{} // owner → target, for loops
	for _, zr := range recs {
		v.dnsRecord(zr, z, &owners, sets, cnames)
	}
	v.cnameLoops(cnames)
	cuts := v.dnsCuts(z, recs)
	// A signed zone may be transferred: the transfer carries the static
	// part signed, with an NSEC chain (internal/gslb transfer_signed.go).
	v.dnsTransfer(p+".transfer", z.Transfer)
	for j := range z.GSLBNames {
		g := &z.GSLBNames[j]
		gp := at("%s.gslbNames[%d]", p, j)
		if name, ok := v.dnsOwner(gp+".name", z, g.Name); ok {
			owners.claim(gp+".name", name, zoneOwner{gslb: true})
			v.belowCut(gp+".name", name, cuts)
		}
		v.gslbName(gp, g)
	}
	v.fileRecordErrors(p, z, from)
}

// dnsSOA checks a zone's soa block (sp is its path; nil: defaults).
func (v *validator) dnsSOA(sp string, s *DNSSOA, zone string) {
	if s == nil {
		return
	}
	if s.MName != "" {
		v.dnsName(sp+".mname", s.MName, "ns1."+zone)
	}
	if s.RName != "" {
		v.dnsName(sp+".rname", s.RName, "hostmaster."+zone)
	}
	if s.Serial != nil {
		v.inRange(sp+".serial", *s.Serial, 0, 1<<32-1)
	}
	v.intRange(sp+".refresh", s.Refresh, 0, 1<<31-1)
	v.intRange(sp+".retry", s.Retry, 0, 1<<31-1)
	v.intRange(sp+".expire", s.Expire, 0, 1<<31-1)
	v.intRange(sp+".minimum", s.Minimum, 0, 86400)
}

// zoneOwner is what is at an owner name of a zone, to find CNAME
// clashes.
type zoneOwner struct {
	path  string
	cname bool
	gslb  bool
}

// zoneOwners maps a zone's owner names to what is there.
type zoneOwners struct {
	v     *validator
	names map[string]zoneOwner
}

// claim records o at name (from path), reporting a clash with a GSLB
// name or a CNAME already there.
func (zo *zoneOwners) claim(path, name string, o zoneOwner) {
	prev, ok := zo.names[name]
	switch {
	case !ok:
		o.path = path
		zo.names[name] = o
	case prev.gslb || o.gslb:
		zo.v.add(path, "give the GSLB name its own owner name", "%q is already used by %s", name, prev.path)
	case prev.cname || o.cname:
		zo.v.add(path, "a CNAME must be the only record at its name (RFC 1034 §3.6.2); rename one of them",
			"%q already has records at %s", name, prev.path)
	}
}

// dnsRecord checks one record set of zone z (zr: records[j] or a set
// of the zone file), noting its owner, its record set (sets: "name type"
// → where it first is) and its CNAME target.
func (v *validator) dnsRecord(zr zoneRecord, z *DNSZone, owners *zoneOwners, sets map[string]zoneRecord, cnames map[string]cnameLink) {
	r, rp := zr.r, zr.path
	name, ok := v.dnsOwner(rp+".name", z, r.Name)
	typeOK := r.Type != "" && v.enum(rp+".type", r.Type, dnsRecordTypes...)
	if r.Type == "" {
		v.add(rp+".type", "use one of "+strings.Join(dnsRecordTypes, ", "), "a type is required")
	}
	v.intRange(rp+".ttl", r.TTL, 0, 1<<31-1)
	if len(r.Rrdatas) == 0 {
		v.add(rp+".rrdatas", "give the record data, e.g. rrdatas: [\"192.0.2.1\"]", "at least one rrdata is required")
	}
	if !ok || !typeOK {
		return
	}
	key := name + " " + r.Type
	if first, dup := sets[key]; dup {
		if first.yaml >= 0 && zr.yaml >= 0 {
			v.add(rp, "merge the rrdatas into one record set", "%s %s is already records[%d]", name, r.Type, first.yaml)
		} else {
			v.add(rp, "keep the record set in one place, records[] or the zone file: sets are not merged",
				"%s %s is in both %s and %s", name, r.Type, first.path, zr.path)
		}
		return
	}
	sets[key] = zr
	if r.Type == "CNAME" {
		if name == CanonicalDNSName(z.Name) {
			v.add(rp+".name", "use CNAME below the apex; the apex has SOA and NS records", "a CNAME cannot be at the zone apex")
		}
		if len(r.Rrdatas) > 1 {
			v.add(rp+".rrdatas", "keep one target", "a CNAME has exactly one target, not %d", len(r.Rrdatas))
		}
	}
	owners.claim(rp+".name", name, zoneOwner{cname: r.Type == "CNAME"})
	for k, data := range r.Rrdatas {
		rr, err := ParseDNSRecord(name, r.Type, 0, data)
		if err != nil {
			v.add(at("%s.rrdatas[%d]", rp, k), rrdataFix(r.Type), "%q is not valid %s data: %v", data, r.Type, err)
			continue
		}
		if c, ok := rr.(*dns.CNAME); ok && k == 0 {
			cnames[name] = cnameLink{path: rp, target: CanonicalDNSName(c.Target)}
		}
	}
}

// ParseDNSRecord parses one rrdata of the given type in presentation
// format into a resource record owned by name.
func ParseDNSRecord(name, typ string, ttl uint32, rrdata string) (dns.RR, error) {
	if strings.ContainsAny(rrdata, "\n;") && typ != "TXT" {
		return nil, fmt.Errorf("unexpected newline or comment")
	}
	rr, err := dns.NewRR(name + " " + strconv.FormatUint(uint64(ttl), 10) + " IN " + typ + " " + rrdata)
	if err != nil {
		return nil, err
	}
	if rr == nil || dns.TypeToString[rr.Header().Rrtype] != typ {
		return nil, fmt.Errorf("empty data")
	}
	return rr, nil
}

// rrdataFix is the fix hint for bad rrdata of a type.
func rrdataFix(typ string) string {
	switch typ {
	case "A":
		return `write an IPv4 address, e.g. "192.0.2.1"`
	case "AAAA":
		return `write an IPv6 address, e.g. "2001:db8::1"`
	case "CNAME":
		return `write a domain name, e.g. "www.example.com."`
	case "TXT":
		return `quote the text, e.g. "\"v=spf1 -all\""`
	case "MX":
		return `write PREFERENCE EXCHANGE, e.g. "10 mail.example.com."`
	case "CAA", "PTR", "NS", "DS":
		return rrdataFixMore(typ)
	}
	return `write PRIORITY WEIGHT PORT TARGET, e.g. "0 5 5060 sip.example.com."`
}

// gslbName validates one gslbNames[] entry.
func (v *validator) gslbName(p string, g *GSLBName) {
	geo := g.Policy == "GEO" || g.Policy == "LATENCY"
	v.enum(p+".policy", g.Policy, gslbPolicies...)
	v.intRange(p+".answerCount", g.AnswerCount, 1, 64)
	v.intRange(p+".ttl", g.TTL, 0, 86400)
	v.intRange(p+".transitionTtl", g.TransitionTTL, 0, 86400)
	ttl, tttl := DNSDefaultGSLBTTL, DNSDefaultTransitionTTL
	if g.TTL != nil {
		ttl = *g.TTL
	}
	if g.TransitionTTL != nil {
		tttl = *g.TransitionTTL
	}
	if tttl > ttl && (g.TTL != nil || g.TransitionTTL != nil) {
		v.add(p+".transitionTtl", fmt.Sprintf("use at most the ttl, %d", ttl), "transitionTtl %d is longer than ttl %d", tttl, ttl)
	}
	switch {
	case g.Pool != nil && g.BackendService != "":
		v.add(p, "keep either pool or backendService", "pool and backendService are exclusive")
	case g.Pool == nil && g.BackendService == "":
		v.add(p, "add pool: {members: [...]} or backendService: NAME", "a pool or a backend service is required")
	case g.Pool != nil:
		v.gslbPool(p+".pool", g.Pool, g.Policy)
	default:
		v.serviceRef(p+".backendService", g.BackendService)
		if len(v.gslbFrontends()) == 0 {
			v.add(p+".backendService", "give an HTTP or HTTPS frontend an IP address (not 0.0.0.0) and a region",
				"no frontend can be answered: answers need an HTTP or HTTPS frontend with a specific IP address")
		}
	}
	v.gslbFailback(p+".failback", g.Failback)
	v.gslbLocations(p, g)
	if len(g.Locations) > 0 && !geo {
		v.add(p+".locations", "set policy: GEO or LATENCY, or remove the locations", "locations are only used by the GEO and LATENCY policies")
	}
	if g.GeoDatabase != "" && !geo {
		v.add(p+".geoDatabase", "set policy: GEO or LATENCY, or remove the geoDatabase", "a geoDatabase is only used by the GEO and LATENCY policies")
	}
	if ps := g.Passive; ps != nil {
		pp := p + ".passive"
		v.intRange(pp+".windowSec", ps.WindowSec, 1, 3600)
		v.floatRange(pp+".maxErrorRate", ps.MaxErrorRate, 0, 1)
		v.intRange(pp+".maxP95LatencyMs", ps.MaxP95LatencyMs, 1, 600000)
		v.intRange(pp+".minRequests", ps.MinRequests, 1, 1<<30)
	}
}

// gslbFailback checks a GSLB name's failback block (at fp; nil: the
// defaults).
func (v *validator) gslbFailback(fp string, f *GSLBFailback) {
	if f == nil {
		return
	}
	v.intRange(fp+".rampSec", f.RampSec, 0, 3600)
	for k, s := range f.Steps {
		sp := at("%s.steps[%d]", fp, k)
		switch {
		case s < 1 || s > 100:
			v.add(sp, "use a percentage between 1 and 100", "%d is out of range", s)
		case k > 0 && s <= f.Steps[k-1]:
			v.add(sp, "list increasing percentages, e.g. [10, 25, 50, 100]", "%d does not increase on %d", s, f.Steps[k-1])
		}
	}
	if n := len(f.Steps); n > 0 && f.Steps[n-1] != 100 {
		v.add(at("%s.steps[%d]", fp, n-1), "end the steps with 100", "the last step must be 100, not %d", f.Steps[n-1])
	}
}

// gslbPool validates a pool.
func (v *validator) gslbPool(p string, pool *GSLBPool, policy string) {
	geo := policy == "GEO" || policy == "LATENCY"
	if len(pool.Members) == 0 {
		v.add(p+".members", "add members: [{name: a, address: 192.0.2.1}]", "at least one member is required")
	}
	if len(pool.Members) > DNSMaxMembers {
		v.add(p+".members", fmt.Sprintf("split the pool; at most %d members", DNSMaxMembers), "%d members are too many", len(pool.Members))
	}
	names := map[string]int{}
	for k := range pool.Members {
		m := &pool.Members[k]
		mp := at("%s.members[%d]", p, k)
		if v.name(mp+".name", m.Name, "pool member", "iad-edge") {
			if first, dup := names[m.Name]; dup {
				v.add(mp+".name", "give each member its own name", "%q is already the name of members[%d]", m.Name, first)
			}
			names[m.Name] = k
		}
		if m.Address == "" {
			v.add(mp+".address", "write an IP address, e.g. 192.0.2.10", "an address is required")
		} else if a, err := netip.ParseAddr(m.Address); err != nil || a.Zone() != "" {
			v.add(mp+".address", "write an IPv4 or IPv6 address without a port, e.g. 192.0.2.10", "%q is not an IP address", m.Address)
		}
		v.intRange(mp+".weight", m.Weight, 0, 10000)
		v.inRange(mp+".priority", int64(m.Priority), 0, 100)
		if geo && m.Region == "" {
			v.add(mp+".region", "say where the member is, e.g. region: us-east1", "the %s policy needs a region for every member", policy)
		}
		v.gslbBias(mp+".bias", m.Bias, policy)
		if m.BackendService != "" {
			v.serviceRef(mp+".backendService", m.BackendService)
		}
		if m.HealthCheck != "" {
			v.gslbHealthCheck(mp+".healthCheck", m.HealthCheck)
		}
		v.gslbMemberChecks(mp, m)
	}
}

// gslbLayers are the values of members[].healthChecks[].layer.
var gslbLayers = []string{DNSLayerShallow, DNSLayerDeep, DNSLayerSynthetic}

// gslbMemberChecks validates a member's layered health checks.
func (v *validator) gslbMemberChecks(mp string, m *GSLBMember) {
	if len(m.HealthChecks) == 0 {
		return
	}
	if m.HealthCheck != "" {
		v.add(mp+".healthChecks", "move healthCheck into healthChecks as {name: "+m.HealthCheck+", layer: SHALLOW}",
			"healthCheck and healthChecks are exclusive")
	}
	if len(m.HealthChecks) > DNSMaxMemberChecks {
		v.add(mp+".healthChecks", fmt.Sprintf("keep at most %d checks", DNSMaxMemberChecks), "%d checks are too many", len(m.HealthChecks))
	}
	seen := map[string]int{}
	for k, c := range m.HealthChecks {
		cp := at("%s.healthChecks[%d]", mp, k)
		v.enum(cp+".layer", c.Layer, gslbLayers...)
		if c.Calculated != nil {
			v.gslbCalculated(cp, c)
			continue
		}
		if c.Name == "" {
			v.add(cp+".name", "name a healthChecks[] entry, e.g. {name: hc-deep, layer: DEEP}", "a health check name is required")
			continue
		}
		name := RefName(c.Name)
		if first, dup := seen[name]; dup {
			v.add(cp+".name", "list each health check once", "%q is already healthChecks[%d]", name, first)
			continue
		}
		seen[name] = k
		v.gslbHealthCheck(cp+".name", c.Name)
	}
}

// gslbHealthCheck checks a member's health check reference: it must exist
// and probe a fixed port, because a member is an address without a port.
func (v *validator) gslbHealthCheck(p, ref string) {
	_, name := v.ref(p, ref, "health check", map[string]map[string]int{"healthChecks": v.hcs})
	if name == "" {
		return
	}
	hc := &v.c.HealthChecks[v.hcs[name]]
	if _, ok := FixedProbePort(hc); !ok {
		v.add(p, "set the health check's port (e.g. httpHealthCheck: {port: 80})",
			"health check %q probes the serving port, which a DNS pool member does not have", name)
	}
}

// FixedProbePort returns the port a health check probes when it does not
// depend on a serving port, mirroring how the plan compiles health checks.
func FixedProbePort(hc *HealthCheck) (int, bool) {
	def := 80
	var port *int
	var spec string
	present := false
	switch hc.Type {
	case "HTTPS", "HTTP2":
		def = 443
		h := hc.HTTPSHealthCheck
		if hc.Type == "HTTP2" {
			h = hc.HTTP2HealthCheck
		}
		if h != nil {
			port, spec, present = h.Port, h.PortSpecification, true
		}
	case "TCP":
		if t := hc.TCPHealthCheck; t != nil {
			port, spec, present = t.Port, t.PortSpecification, true
		}
	case "GRPC", "GRPC_WITH_TLS":
		if hc.Type == "GRPC_WITH_TLS" {
			def = 443
		}
		if g := hc.GRPCBlock(); g != nil {
			port, spec, present = g.Port, g.PortSpecification, true
		}
	default:
		if h := hc.HTTPHealthCheck; h != nil {
			port, spec, present = h.Port, h.PortSpecification, true
		}
	}
	switch {
	case !present:
		return def, true
	case spec == "USE_SERVING_PORT":
		return 0, false
	case port != nil:
		return *port, true
	case spec == "USE_FIXED_PORT":
		return def, true
	}
	return 0, false
}

// gslbFrontends returns the indexes of frontends a backendService GSLB
// name can answer with: HTTP or HTTPS, with a specific IP address.
func (v *validator) gslbFrontends() []int {
	var out []int
	for i := range v.c.Frontends {
		if _, ok := GSLBFrontendAddr(&v.c.Frontends[i]); ok {
			out = append(out, i)
		}
	}
	return out
}

// GSLBFrontendAddr returns the IP address a GSLB name answers for
// frontend f, and whether f can be answered at all (HTTP or HTTPS, with a
// specific, not unspecified, IP address).
func GSLBFrontendAddr(f *Frontend) (netip.Addr, bool) {
	if f.Protocol != "" && f.Protocol != "HTTP" && f.Protocol != "HTTPS" {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(f.Address)
	if err != nil || ap.Addr().IsUnspecified() {
		return netip.Addr{}, false
	}
	return ap.Addr(), true
}

// dnsName checks that s is a domain name; it reports whether s is usable.
func (v *validator) dnsName(path, s, example string) bool {
	if s == "" {
		v.add(path, "write a domain name, e.g. "+example, "a name is required")
		return false
	}
	if _, ok := dns.IsDomainName(s); !ok || strings.ContainsAny(s, " \t*\\") {
		v.add(path, "write a domain name, e.g. "+example, "%q is not a domain name", s)
		return false
	}
	return true
}

// dnsOwner checks an owner name inside zone z and returns it canonical.
func (v *validator) dnsOwner(path string, z *DNSZone, name string) (string, bool) {
	if name == "" {
		v.add(path, `write a name relative to the zone ("www"), absolute ("www.`+CanonicalDNSName(z.Name)+`") or "@" for the apex`, "a name is required")
		return "", false
	}
	// A wildcard (RFC 4592) is "*" as the leftmost label, and only there.
	if rest, wild := strings.CutPrefix(name, "*"); wild && (rest == "" || rest[0] == '.') {
		if rest = strings.TrimPrefix(rest, "."); rest != "" && !v.dnsName(path, rest, "*.www."+CanonicalDNSName(z.Name)) {
			return "", false
		}
	} else if name != "@" && !v.dnsName(path, name, "www."+CanonicalDNSName(z.Name)) {
		return "", false
	}
	o := z.Owner(name)
	if zone := CanonicalDNSName(z.Name); !InDNSZone(o, zone) {
		v.add(path, fmt.Sprintf("use a name that ends in %s, or write it relative to the zone", zone), "%q is outside zone %s", name, zone)
		return "", false
	}
	return o, true
}

// cnameLink is a CNAME record of a zone: where it is and its target.
type cnameLink struct{ path, target string }

// cnameLoops reports every CNAME chain of a zone that comes back to a
// name it passed (the server would follow it to its chain limit,
// answering the same records again), once, at the record that starts the
// loop in the config's order.
func (v *validator) cnameLoops(cnames map[string]cnameLink) {
	reported := map[string]bool{}
	for _, start := range slices.Sorted(maps.Keys(cnames)) {
		seen := map[string]bool{start: true}
		chain := []string{start}
		for name := cnames[start].target; ; name = cnames[name].target {
			chain = append(chain, name)
			if seen[name] {
				if !reported[name] {
					for _, n := range chain[slices.Index(chain, name):] {
						reported[n] = true
					}
					v.add(cnames[name].path+".rrdatas[0]", "point one CNAME of the chain at a name with records",
						"CNAME chain %s loops", strings.Join(chain[slices.Index(chain, name):], " → "))
				}
				break
			}
			if _, ok := cnames[name]; !ok {
				break
			}
			seen[name] = true
		}
	}
}
