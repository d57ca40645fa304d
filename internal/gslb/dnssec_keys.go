package gslb

import (
	"errors"
	"fmt"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/dnssec"
)

// zoneKeys is a zone's managed key state (dnssec.keyDirectory) as the
// Server was built with it.
type zoneKeys struct {
	state  dnssec.KeyState
	policy dnssec.Policy
	// next is when the keys next change (zero: nothing scheduled): a new
	// Server must then be built (KeysDue).
	next time.Time
}

// enableManagedKeys brings zone i's managed keys to now (dnssec.Roll:
// making the first keys, or a rollover's successor, and saving the state)
// and publishes what the state says for now: the DNSKEY set of every
// published key, the CDS and CDNSKEY sets of the KSK the parent's DS
// should name; the active ZSK signs, the published KSKs sign the DNSKEY,
// CDS and CDNSKEY sets.
func (z *zone) enableManagedKeys(cz *config.DNSZone, i int, now time.Time) error {
	d := cz.DNSSEC
	pol := keyPolicy(d, z.maxTTL())
	ks, err := dnssec.Roll(d.KeyDirectory, z.origin, pol, now)
	if err != nil {
		return fmt.Errorf("gslb: dnsZones[%d].dnssec.keyDirectory %s: %w", i, d.KeyDirectory, err)
	}
	apex := z.nodes[z.origin]
	var zsk *signingKey
	var ksks []signingKey
	for j := range ks.State.Keys {
		kt := &ks.State.Keys[j]
		if !kt.InDNSKEY(now) {
			continue
		}
		dk := ks.DNSKEY(kt)
		apex.rrsets[dns.TypeDNSKEY] = append(apex.rrsets[dns.TypeDNSKEY], dk)
		sk := signingKey{key: ks.Keys[kt.Tag].Private, tag: kt.Tag}
		switch {
		case kt.Role == dnssec.RoleKSK:
			ksks = append(ksks, sk)
			if kt.InDS(now) {
				apex.rrsets[dns.TypeCDS] = append(apex.rrsets[dns.TypeCDS], cds(dk))
				apex.rrsets[dns.TypeCDNSKEY] = append(apex.rrsets[dns.TypeCDNSKEY], cdnskey(dk))
			}
		case kt.Signs(now):
			zsk = &sk
		}
	}
	if zsk == nil || len(ksks) == 0 {
		return fmt.Errorf("gslb: dnsZones[%d].dnssec.keyDirectory %s: %w", i, d.KeyDirectory,
			errors.New("the key state has no active ZSK or no published KSK (fix: restore the directory from a backup)"))
	}
	z.newSigner(*zsk, ksks)
	z.signer.keys = &zoneKeys{state: ks.State, policy: pol, next: ks.State.NextEvent(now, pol)}
	return nil
}

// cds returns the CDS record of KSK dk (SHA-256, as its DS).
func cds(dk *dns.DNSKEY) dns.RR {
	ds := dk.ToDS(dns.SHA256)
	ds.Hdr.Rrtype = dns.TypeCDS
	return &dns.CDS{DS: *ds}
}

// cdnskey returns the CDNSKEY record of KSK dk.
func cdnskey(dk *dns.DNSKEY) dns.RR {
	c := &dns.CDNSKEY{DNSKEY: *dk}
	c.Hdr.Rrtype = dns.TypeCDNSKEY
	return c
}

// keyPolicy is the key schedule dnssec d configures; maxTTL is the
// zone's longest TTL.
func keyPolicy(d *config.DNSZoneDNSSEC, maxTTL time.Duration) dnssec.Policy {
	sec := func(p *int, def int) time.Duration { return time.Duration(intOr(p, def)) * time.Second }
	return dnssec.Policy{
		ZSKLifetime: sec(d.ZSKLifetimeSec, config.DNSDefaultZSKLifetimeSec),
		KSKLifetime: sec(d.KSKLifetimeSec, 0),
		Propagation: sec(d.PropagationDelaySec, config.DNSDefaultPropagationDelaySec),
		MaxZoneTTL:  maxTTL,
		ParentDelay: sec(d.ParentDelaySec, config.DNSDefaultParentDelaySec),
	}
}

// maxTTL is the longest TTL z serves: its records, GSLB answers,
// negative answers and the DNSKEY set.
func (z *zone) maxTTL() time.Duration {
	ttl := max(uint32(dnssec.DNSKEYTTL), z.negSOA.Header().Ttl)
	for _, n := range z.nodes {
		for _, set := range n.rrsets {
			for _, rr := range set {
				ttl = max(ttl, rr.Header().Ttl)
			}
		}
		if n.cname != nil {
			ttl = max(ttl, n.cname.Hdr.Ttl)
		}
		if n.gslb != nil {
			ttl = max(ttl, n.gslb.ttl)
		}
	}
	return time.Duration(ttl) * time.Second
}

// KeysDue reports whether a zone's managed keys change at now or
// before: a Server built now (New) serves the new key state. The server
// composer rebuilds the DNS server when it is.
func (s *Server) KeysDue(now time.Time) bool {
	for _, z := range s.zones {
		if z.signer != nil && z.signer.keys != nil && !z.signer.keys.next.IsZero() && !now.Before(z.signer.keys.next) {
			return true
		}
	}
	return false
}

// KeyStatus returns the managed keys of each zone that has them, at now.
func (s *Server) KeyStatus(now time.Time) []dnssec.ZoneStatus {
	var out []dnssec.ZoneStatus
	for _, z := range s.zones {
		if z.signer != nil && z.signer.keys != nil {
			out = append(out, z.signer.keys.state.Status(now, z.signer.keys.policy))
		}
	}
	return out
}
