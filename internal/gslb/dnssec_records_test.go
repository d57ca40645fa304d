package gslb_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// Delegations and wildcards in a signed zone (the DNSSEC and records work
// met here). A referral's NS set belongs to the child and is not signed;
// the parent signs the DS set, or proves there is none with an NSEC at the
// cut (RFC 4035 §3.1.4). A wildcard answer is signed with the query name
// as owner (online signing needs no wildcard proof), and a name below the
// cut never gets a denial from the parent.
func TestDNSSECDelegationAndWildcard(t *testing.T) {
	y, k := signedYAML(t)
	y = strings.Replace(y, "  records:\n", `  records:
  - {name: sub, type: NS, rrdatas: [ns.sub.gslb.example.]}
  - {name: ns.sub, type: A, rrdatas: ["192.0.2.53"]}
  - {name: secure, type: NS, rrdatas: [ns.secure.gslb.example.]}
  - {name: ns.secure, type: A, rrdatas: ["192.0.2.54"]}
  - {name: secure, type: DS, rrdatas: ["12345 13 2 3a1b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70819"]}
  - {name: "*.wild", type: A, rrdatas: ["192.0.2.7"]}
`, 1)
	s := compile(t, y, gslb.Options{})
	dk := k.DNSKEY("gslb.example.")
	now := time.Now()
	ask := func(name string, qtype uint16) *dns.Msg {
		r := s.Exchange(doQuery(name, qtype, false), src, now)
		if r == nil {
			t.Fatalf("%s: no reply", name)
		}
		return r
	}
	for _, c := range []struct {
		name string
		ns   []uint16 // types of the authority section, RRSIGs left out
		sig  []uint16 // of those, the signed ones
	}{
		{"www.sub.gslb.example.", []uint16{dns.TypeNS, dns.TypeNSEC}, []uint16{dns.TypeNSEC}},
		{"sub.gslb.example.", []uint16{dns.TypeNS, dns.TypeNSEC}, []uint16{dns.TypeNSEC}},
		{"x.secure.gslb.example.", []uint16{dns.TypeNS, dns.TypeDS}, []uint16{dns.TypeDS}},
	} {
		r := ask(c.name, dns.TypeA)
		if r.Authoritative || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
			t.Errorf("%s: want a referral (NOERROR, AA clear, no answer): %v", c.name, r)
			continue
		}
		var types, signed []uint16
		var rest []dns.RR
		for i, rr := range r.Ns {
			rt := rr.Header().Rrtype
			if rt == dns.TypeRRSIG {
				continue
			}
			if len(types) == 0 || types[len(types)-1] != rt {
				types = append(types, rt)
			}
			if rt != dns.TypeNS {
				rest = append(rest, r.Ns[i])
			}
			if i+1 < len(r.Ns) && r.Ns[i+1].Header().Rrtype == dns.TypeRRSIG && r.Ns[i+1].(*dns.RRSIG).TypeCovered == rt {
				signed = append(signed, rt)
			}
		}
		if !slices.Equal(types, c.ns) || !slices.Equal(signed, c.sig) {
			t.Errorf("%s: authority types %v (signed %v), want %v (signed %v)", c.name, types, signed, c.ns, c.sig)
		}
		// The signed part verifies.
		var tail []dns.RR
		for i, rr := range r.Ns {
			if rr.Header().Rrtype != dns.TypeNS {
				tail = r.Ns[i:]
				break
			}
		}
		verifySection(t, tail, dk, now)
		if nsec, ok := rest[0].(*dns.NSEC); ok && !slices.Equal(nsec.TypeBitMap, []uint16{dns.TypeNS, dns.TypeRRSIG, dns.TypeNSEC}) {
			t.Errorf("%s: NSEC at the cut %v, want types NS RRSIG NSEC", c.name, nsec)
		}
	}
	// A wildcard answer: signed, owner the query name.
	r := ask("anything.wild.gslb.example.", dns.TypeA)
	if len(r.Answer) != 2 || r.Answer[0].Header().Name != "anything.wild.gslb.example." {
		t.Fatalf("wildcard: %v", r)
	}
	verifySection(t, r.Answer, dk, now)
}
