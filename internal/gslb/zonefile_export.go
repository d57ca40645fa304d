package gslb

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// ExportZone writes zone name of cfg (compiled into p) to w as an RFC
// 1035 master file: $ORIGIN, then the static part as it is served (the
// SOA, the apex NS set, records[] and the zone file's sets), apex first
// and then in canonical order. GSLB names are decided per query, so they
// are written as comments (policy, TTL and members), not as records: a
// load of the file next to the same gslbNames then gives the same zone.
// DNSSEC records are not written (Spillway signs online). source names
// the configuration in the file's header.
func ExportZone(cfg *config.Config, p *plan.Plan, name, source string, w io.Writer) error {
	want := config.CanonicalDNSName(name)
	for i := range cfg.DNSZones {
		cz := &cfg.DNSZones[i]
		if config.CanonicalDNSName(cz.Name) != want {
			continue
		}
		z, _, err := newZone(cz, cfg, p)
		if err != nil {
			return err
		}
		bw := bufio.NewWriter(w)
		fmt.Fprintf(bw, "; zone %s, exported by spillway dns export from %s\n", want, source)
		fmt.Fprintf(bw, "; static records only: GSLB names are answered per query and are listed as comments at the end\n")
		fmt.Fprintf(bw, "$ORIGIN %s\n", want)
		for _, rr := range z.staticRecords() {
			fmt.Fprintln(bw, rr.String())
		}
		writeGSLBComments(bw, cz)
		return bw.Flush()
	}
	return fmt.Errorf("zone %s is not a dnsZones[] entry (fix: give one of the zones' names to --zone)", want)
}

// staticRecords returns z's static records: the SOA, then every record
// set by owner (the apex first, then canonical order) and type, without
// DNSSEC records.
func (z *zone) staticRecords() []dns.RR {
	names := make([]string, 0, len(z.nodes))
	for name := range z.nodes {
		names = append(names, name)
	}
	z.sortApexFirst(names)
	rrs := []dns.RR{z.nodes[z.origin].rrsets[dns.TypeSOA][0]}
	for _, name := range names {
		n := z.nodes[name]
		if n.cname != nil {
			rrs = append(rrs, n.cname)
		}
		types := make([]uint16, 0, len(n.rrsets))
		for t := range n.rrsets {
			switch t {
			case dns.TypeSOA, dns.TypeDNSKEY, dns.TypeCDS, dns.TypeCDNSKEY:
			default:
				types = append(types, t)
			}
		}
		slices.Sort(types)
		for _, t := range types {
			rrs = append(rrs, n.rrsets[t]...)
		}
	}
	return rrs
}

// writeGSLBComments lists the GSLB names as comments.
func writeGSLBComments(w io.Writer, cz *config.DNSZone) {
	if len(cz.GSLBNames) == 0 {
		return
	}
	fmt.Fprintln(w, ";")
	fmt.Fprintln(w, "; GSLB names (answered per query from health, weights and the client's location; not records):")
	for i := range cz.GSLBNames {
		cg := &cz.GSLBNames[i]
		policy := cg.Policy
		if policy == "" {
			policy = "WEIGHTED"
		}
		ttl := config.DNSDefaultGSLBTTL
		if cg.TTL != nil {
			ttl = *cg.TTL
		}
		fmt.Fprintf(w, ";   %s policy %s ttl %d", cz.Owner(cg.Name), policy, ttl)
		if cg.BackendService != "" {
			fmt.Fprintf(w, ": the frontends of backend service %s\n", cg.BackendService)
			continue
		}
		var ms []string
		if cg.Pool != nil {
			for _, m := range cg.Pool.Members {
				ms = append(ms, m.Name+" "+m.Address)
			}
		}
		fmt.Fprintf(w, ": members %s\n", strings.Join(ms, ", "))
	}
}
