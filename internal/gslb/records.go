package gslb

import (
	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
)

// findCuts records z's delegations (NS record sets below the apex) and
// whether it has wildcards. Validation keeps everything but DS at a cut
// and A/AAAA glue below it out of the delegated zone.
func (z *zone) findCuts() {
	for name, n := range z.nodes {
		if name != z.origin && len(n.rrsets[dns.TypeNS]) > 0 {
			if z.cuts == nil {
				z.cuts = map[string]bool{}
			}
			z.cuts[name] = true
		}
		if config.IsWildcardDNSName(name) {
			z.wild = true
		}
	}
}

// cutAbove returns the delegation name falls in (name itself or an
// ancestor below the apex), or "" when the zone answers for name. A DS
// query at a cut is the parent side's (RFC 4035 §3.1.4.1): it is
// answered from the zone, not referred.
func (z *zone) cutAbove(name string, qtype uint16) string {
	if len(z.cuts) == 0 {
		return ""
	}
	found := ""
	for off := 0; name[off:] != z.origin; {
		if z.cuts[name[off:]] && (off > 0 || qtype != dns.TypeDS) {
			found = name[off:] // the highest cut wins
		}
		next, end := dns.NextLabel(name, off)
		if end {
			break
		}
		off = next
	}
	return found
}

// wildcard returns the node a wildcard synthesizes name from, for a name
// with no node of its own (RFC 4592 §3.3.1): the closest encloser is the
// longest existing ancestor (empty non-terminals included, so they block
// wildcards above them) and the source of synthesis is "*." and it; nil
// when that does not exist. It also returns the source's owner name.
func (z *zone) wildcard(name string) (*node, string) {
	if !z.wild {
		return nil, ""
	}
	for off := 0; ; {
		next, end := dns.NextLabel(name, off)
		if end {
			return nil, ""
		}
		ce := name[next:]
		if z.nodes[ce] != nil {
			owner := "*." + ce
			return z.nodes[owner], owner
		}
		if ce == z.origin {
			return nil, ""
		}
		off = next
	}
}

// synthesize gives answers taken from a wildcard the query name as owner
// (copies: the zone's records are shared).
func synthesize(answers []dns.RR, owner string, wild bool) {
	if !wild {
		return
	}
	for i, rr := range answers {
		rr = dns.Copy(rr)
		rr.Header().Name = owner
		answers[i] = rr
	}
}

// referral makes m a referral to the delegation at cut: no AA (unless a
// CNAME of the zone's own was answered on the way), the delegation's NS
// records in authority and their in-zone addresses as glue.
func (s *Server) referral(m *dns.Msg, z *zone, cut string) {
	m.Authoritative = len(m.Answer) > 0
	ns := z.nodes[cut].rrsets[dns.TypeNS]
	m.Ns = append(m.Ns, ns...)
	if z.signer != nil {
		// A signed parent says whether the child is signed: its DS set
		// (signed by sign), or an NSEC at the cut showing there is none.
		m.Ns = append(m.Ns, z.nodes[cut].rrsets[dns.TypeDS]...)
	}
	m.Extra = s.glue(m.Extra, z, ns)
}
