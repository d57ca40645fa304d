package gslb

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// zone is a compiled dnsZones[] entry: immutable after New.
type zone struct {
	origin string
	// nodes holds every name that exists in the zone, including empty
	// non-terminals (names with no records but with names below them),
	// so that NXDOMAIN and NODATA are told apart.
	nodes map[string]*node
	// negSOA is the SOA put in the authority section of negative answers,
	// with the TTL of RFC 2308 §5: min(SOA TTL, SOA minimum).
	negSOA dns.RR
	// signer signs answers when the zone has DNSSEC (dnssec.go).
	signer *signer
	// cuts are the delegations below the apex (owners of NS record sets);
	// wild is whether any name is a wildcard (records.go).
	cuts map[string]bool
	wild bool
	// xfr is the zone's transfer setup (transfer.go), nil without one.
	xfr *xfr
	// stats are the zone's query counters (telemetry.go), nil without
	// Options.Stats.
	stats *ZoneStats
}

// node is one owner name.
type node struct {
	rrsets map[uint16][]dns.RR
	cname  *dns.CNAME
	gslb   *gname
}

// soaTTL is the TTL of the SOA record itself.
const soaTTL = 300

// newZone compiles z.
func newZone(z *config.DNSZone, cfg *config.Config, p *plan.Plan) (*zone, []*gname, error) {
	origin := config.CanonicalDNSName(z.Name)
	zn := &zone{origin: origin, nodes: map[string]*node{}}
	soa := zoneSOA(z, origin)
	apex := zn.at(origin)
	apex.rrsets[dns.TypeSOA] = []dns.RR{soa}
	neg := dns.Copy(soa)
	neg.Header().Ttl = min(soa.Hdr.Ttl, soa.Minttl)
	zn.negSOA = neg
	for _, ns := range z.ZoneNameServers() {
		apex.rrsets[dns.TypeNS] = append(apex.rrsets[dns.TypeNS], &dns.NS{
			Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: config.DNSDefaultRecordTTL},
			Ns:  config.CanonicalDNSName(ns)})
	}
	recs := z.StaticRecords()
	for i := range recs {
		if err := zn.addRecords(z, &recs[i]); err != nil {
			return nil, nil, err
		}
	}
	zn.findCuts()
	var names []*gname
	for i := range z.GSLBNames {
		g, err := newName(z, &z.GSLBNames[i], cfg, p)
		if err != nil {
			return nil, nil, err
		}
		zn.at(g.owner).gslb = g
		zn.wild = zn.wild || config.IsWildcardDNSName(g.owner)
		names = append(names, g)
	}
	return zn, names, nil
}

// at returns the node of name, making it, and the empty non-terminals
// between it and the apex, on first use.
func (z *zone) at(name string) *node {
	n := z.nodes[name]
	if n == nil {
		n = &node{rrsets: map[uint16][]dns.RR{}}
		z.nodes[name] = n
		// Empty non-terminals up to the apex exist too.
		for parent := name; parent != z.origin; {
			i, end := dns.NextLabel(parent, 0)
			if end {
				break
			}
			parent = parent[i:]
			if _, ok := z.nodes[parent]; !ok {
				z.nodes[parent] = &node{rrsets: map[uint16][]dns.RR{}}
			}
		}
	}
	return n
}

// zoneSOA returns the SOA record of zone z: the defaults, the first name
// server as MNAME, and what z's soa block sets.
func zoneSOA(z *config.DNSZone, origin string) *dns.SOA {
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: soaTTL},
		Serial: config.DNSDefaultSOASerial, Refresh: config.DNSDefaultSOARefresh, Retry: config.DNSDefaultSOARetry,
		Expire: config.DNSDefaultSOAExpire, Minttl: config.DNSDefaultSOAMinimum, Mbox: "hostmaster." + origin}
	if ns := z.ZoneNameServers(); len(ns) > 0 {
		soa.Ns = config.CanonicalDNSName(ns[0])
	}
	if s := z.ZoneSOA(); s != nil {
		if s.MName != "" {
			soa.Ns = config.CanonicalDNSName(s.MName)
		}
		if s.RName != "" {
			soa.Mbox = config.CanonicalDNSName(s.RName)
		}
		if s.Serial != nil {
			soa.Serial = uint32(*s.Serial)
		}
		soa.Refresh = uint32(intOr(s.Refresh, int(soa.Refresh)))
		soa.Retry = uint32(intOr(s.Retry, int(soa.Retry)))
		soa.Expire = uint32(intOr(s.Expire, int(soa.Expire)))
		soa.Minttl = uint32(intOr(s.Minimum, int(soa.Minttl)))
	}
	return soa
}

// addRecords adds the static record set r of zone cz.
func (z *zone) addRecords(cz *config.DNSZone, r *config.DNSRecord) error {
	name := cz.Owner(r.Name)
	ttl := uint32(intOr(r.TTL, config.DNSDefaultRecordTTL))
	n := z.at(name)
	for _, data := range r.Rrdatas {
		rr, err := config.ParseDNSRecord(name, r.Type, ttl, data)
		if err != nil {
			return fmt.Errorf("gslb: zone %s: %s %s %q: %w", z.origin, name, r.Type, data, err)
		}
		rr.Header().Name = name
		if c, ok := rr.(*dns.CNAME); ok {
			c.Target = strings.ToLower(c.Target)
			n.cname = c
			continue
		}
		t := rr.Header().Rrtype
		if ns, ok := rr.(*dns.NS); ok {
			ns.Ns = strings.ToLower(ns.Ns)
		}
		n.rrsets[t] = append(n.rrsets[t], rr)
	}
	return nil
}

// zoneSet finds the zone of a name: the longest served zone that is a
// suffix of it.
type zoneSet map[string]*zone

// forQuestion returns the zone that answers qname (canonical) for qtype,
// or nil: the zone qname falls in, except that a DS query at a served
// zone's apex goes to the zone above it when that one is served too. DS
// belongs to the parent side of a cut (RFC 4035 §3.1.4.1), and the
// child's apex would answer it with a NODATA signed by the child's key,
// which validators take as a broken chain. BIND, Knot and NSD answer it
// from the parent the same way.
func (zs zoneSet) forQuestion(qname string, qtype uint16) *zone {
	z := zs.find(qname)
	if z == nil || qtype != dns.TypeDS || z.origin != qname || qname == "." {
		return z
	}
	next, end := dns.NextLabel(qname, 0)
	parent := zs["."]
	if !end {
		parent = zs.find(qname[next:])
	}
	if parent == nil {
		return z
	}
	return parent
}

// find returns the zone qname (canonical) falls in, or nil.
func (zs zoneSet) find(qname string) *zone {
	for off := 0; ; {
		if z := zs[qname[off:]]; z != nil {
			return z
		}
		next, end := dns.NextLabel(qname, off)
		if end {
			return zs["."]
		}
		off = next
	}
}
