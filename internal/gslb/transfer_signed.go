package gslb

import (
	"bytes"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// Transfers of a signed zone. Answers are signed online, with a compact
// denial made per query (dnssec.go); a secondary cannot do that, so what
// it gets is the static part signed as a zone file would be: every
// authoritative record set with its RRSIG, the DNSKEY, and a classic
// NSEC chain (RFC 4034 §4) through the names the transfer holds, in
// canonical order. Delegation NS sets and glue are not signed (RFC 4035
// §2.2). The signatures are made when the transfer is served (from the
// signature cache when it has them) and run sigValidity from then.

// signedTransfer returns the records of a transfer of signed zone z at
// now, split into messages: SOA first and last, each name's sets with
// their RRSIGs, then its NSEC and the NSEC's RRSIG.
func (z *zone) signedTransfer(soa *dns.SOA, now time.Time) [][]dns.RR {
	names := z.transferNames()
	chain := slices.DeleteFunc(slices.Clone(names), func(name string) bool {
		return z.cutAbove(name, dns.TypeDS) != "" // glue has no NSEC
	})
	slices.SortFunc(chain, canonicalCompare)
	next := make(map[string]string, len(chain))
	for i, name := range chain {
		next[name] = chain[(i+1)%len(chain)]
	}
	rrs := []dns.RR{soa}
	for _, name := range names {
		n := z.nodes[name]
		below := z.cutAbove(name, dns.TypeDS) != "" // glue
		for _, set := range nodeSets(n) {
			if set[0].Header().Rrtype != dns.TypeSOA {
				rrs = append(rrs, set...)
			}
			if below || set[0].Header().Rrtype == dns.TypeNS && z.cuts[name] {
				continue // the child's, or glue: not signed
			}
			rrs = z.signer.appendSigs(rrs, set, now)
		}
		if below {
			continue
		}
		nsec := &dns.NSEC{
			Hdr:        dns.RR_Header{Name: name, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: z.negSOA.Header().Ttl},
			NextDomain: next[name],
			TypeBitMap: nodeTypes(n),
		}
		rrs = append(rrs, nsec)
		rrs = z.signer.appendSigs(rrs, []dns.RR{nsec}, now)
	}
	return chunkRecords(append(rrs, soa))
}

// transferNames returns the names of z with static records, the apex
// first, then in zone-file order (compareNames). Names below a cut (glue)
// are included; GSLB names and empty non-terminals are not.
func (z *zone) transferNames() []string {
	names := make([]string, 0, len(z.nodes))
	for name, n := range z.nodes {
		if len(n.rrsets) > 0 || n.cname != nil {
			names = append(names, name)
		}
	}
	z.sortApexFirst(names)
	return names
}

// nodeSets returns n's static record sets, the SOA first (at the apex),
// then by type; a CNAME is a set of one.
func nodeSets(n *node) [][]dns.RR {
	var sets [][]dns.RR
	if n.cname != nil {
		sets = append(sets, []dns.RR{n.cname})
	}
	for _, t := range setTypes(n, 0) {
		if rrs := n.rrsets[t]; len(rrs) > 0 {
			sets = append(sets, rrs)
		}
	}
	slices.SortStableFunc(sets, func(a, b []dns.RR) int {
		return boolInt(b[0].Header().Rrtype == dns.TypeSOA) - boolInt(a[0].Header().Rrtype == dns.TypeSOA)
	})
	return sets
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// canonicalCompare orders names canonically (RFC 4034 §6.1): label by
// label from the right, each as lower-cased octets, a name before the
// names below it. Names that do not pack (not expected: they come from a
// validated zone) compare as their text.
func canonicalCompare(a, b string) int {
	la, oka := wireLabels(a)
	lb, okb := wireLabels(b)
	if !oka || !okb {
		return bytes.Compare([]byte(a), []byte(b))
	}
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if c := bytes.Compare(la[i], lb[j]); c != 0 {
			return c
		}
	}
	return len(la) - len(lb)
}

// wireLabels returns name's labels as lower-cased octets (escapes
// decoded), leftmost first.
func wireLabels(name string) ([][]byte, bool) {
	buf := make([]byte, 256)
	off, err := dns.PackDomainName(dns.CanonicalName(name), buf, 0, nil, false)
	if err != nil {
		return nil, false
	}
	var labels [][]byte
	for i := 0; i < off && buf[i] != 0; i += int(buf[i]) + 1 {
		labels = append(labels, bytes.ToLower(buf[i+1:i+1+int(buf[i])]))
	}
	return labels, true
}

// sortApexFirst sorts zone names as a transfer sends them: the apex
// first, then in zone-file order (compareNames).
func (z *zone) sortApexFirst(names []string) {
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == z.origin:
			return -1
		case b == z.origin:
			return 1
		}
		return compareNames(a, b)
	})
}
