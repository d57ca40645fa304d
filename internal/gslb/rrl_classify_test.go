package gslb

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/rrl"
)

// What the limiter counts each kind of reply by.
func TestClassify(t *testing.T) {
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	soa := rr("example. 300 IN SOA ns1.example. host.example. 1 2 3 4 5")
	nxnsec := rr(`x.example. 300 IN NSEC \000.x.example. RRSIG NSEC NXNAME`)
	nodnsec := rr(`www.example. 300 IN NSEC \000.www.example. A RRSIG NSEC`)
	reply := func(qname string, qtype uint16, rcode int, answer, ns []dns.RR) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(qname, qtype)
		m.Response, m.Rcode, m.Answer, m.Ns = true, rcode, answer, ns
		return m
	}
	truncated := reply("Big.example.", dns.TypeTXT, dns.RcodeSuccess, nil, nil)
	truncated.Truncated = true
	zoneQ := &Query{zone: "example."}
	for _, tc := range []struct {
		desc  string
		m     *dns.Msg
		q     *Query
		class rrl.Class
		qtype uint16
		name  string
	}{
		{"answer", reply("WWW.example.", dns.TypeA, 0, []dns.RR{rr("www.example. 30 IN A 192.0.2.1")}, nil), &Query{Name: "www.example.", zone: "example."}, rrl.Answer, dns.TypeA, "www.example."},
		{"wildcard answer: its owner", reply("r1.w.example.", dns.TypeA, 0, []dns.RR{rr("r1.w.example. 30 IN A 192.0.2.1")}, nil), &Query{Name: "*.w.example.", zone: "example."}, rrl.Answer, dns.TypeA, "*.w.example."},
		{"answer without q", reply("www.example.", dns.TypeA, 0, []dns.RR{rr("www.example. 30 IN A 192.0.2.1")}, nil), nil, rrl.Answer, dns.TypeA, "www.example."},
		{"truncated", truncated, zoneQ, rrl.Answer, dns.TypeTXT, "Big.example."},
		{"NXDOMAIN: the zone", reply("r1.sub.example.", dns.TypeA, dns.RcodeNameError, nil, []dns.RR{soa}), zoneQ, rrl.NXDomain, 0, "example."},
		{"compact denial", reply("x.example.", dns.TypeA, 0, nil, []dns.RR{soa, nxnsec}), zoneQ, rrl.NXDomain, 0, "example."},
		{"compact denial, NSEC asked", reply("x.example.", dns.TypeNSEC, 0, []dns.RR{nxnsec}, nil), zoneQ, rrl.NXDomain, 0, "example."},
		{"NODATA", reply("www.example.", dns.TypeMX, 0, nil, []dns.RR{soa}), zoneQ, rrl.NoData, 0, "example."},
		{"signed NODATA", reply("www.example.", dns.TypeMX, 0, nil, []dns.RR{soa, nodnsec}), zoneQ, rrl.NoData, 0, "example."},
		{"referral: the cut", reply("a.b.child.example.", dns.TypeA, 0, nil, []dns.RR{rr("child.example. 300 IN NS ns.child.example.")}), zoneQ, rrl.Referral, 0, "child.example."},
		{"REFUSED", reply("other.", dns.TypeA, dns.RcodeRefused, nil, nil), &Query{}, rrl.Error, 0, ""},
		{"FORMERR", reply("x.", dns.TypeA, dns.RcodeFormatError, nil, nil), nil, rrl.Error, 0, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, qt, name := classify(tc.m, tc.q)
			if c != tc.class || qt != tc.qtype || name != tc.name {
				t.Errorf("classify = %v %d %q, want %v %d %q", c, qt, name, tc.class, tc.qtype, tc.name)
			}
		})
	}
}
