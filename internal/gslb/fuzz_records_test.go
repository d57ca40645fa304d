package gslb_test

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// FuzzRecordsHandler: queries against wildcards, a delegation, transfers
// and CH identity names are answered without a panic; replies unpack, fit
// UDP, and names at or below the delegation (but DS at the cut) are
// referred, never answered authoritatively.
func FuzzRecordsHandler(f *testing.F) {
	yaml := xfrYAML(`{allow: [127.0.0.0/8]}`) +
		"spillway:\n  dnsIdentity: {version: v1, id: edge}\n"
	s := compile(f, yaml, gslb.Options{})
	h := s.Handler()
	ixfr := query("gslb.example.", dns.TypeIXFR, 0, "")
	ixfr.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "gslb.example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET}, Ns: "a.", Mbox: "b.", Serial: 7}}
	ch := query("version.bind.", dns.TypeTXT, 0, "")
	ch.Question[0].Qclass = dns.ClassCHAOS
	fuzzHandler(f, h, []*dns.Msg{
		query("a.b.wild.gslb.example.", dns.TypeA, 0, ""),
		query("x.cn.gslb.example.", dns.TypeA, 1232, ""),
		query("api.svc.gslb.example.", dns.TypeAAAA, 0, ""),
		query("www.sub.gslb.example.", dns.TypeA, 0, ""),
		query("sub.gslb.example.", dns.TypeDS, 0, ""),
		query("gslb.example.", dns.TypeAXFR, 0, ""),
		query("80.2.0.192.in-addr.arpa.", dns.TypePTR, 0, ""),
		ixfr, ch,
	}, true, func(t *testing.T, r, out *dns.Msg, tcp bool) {
		if len(out.Question) == 1 && out.Rcode == dns.RcodeSuccess && len(out.Answer) == 0 {
			q := out.Question[0]
			name := strings.ToLower(q.Name)
			if q.Qclass == dns.ClassINET && (strings.HasSuffix(name, ".sub.gslb.example.") || name == "sub.gslb.example." && q.Qtype != dns.TypeDS) &&
				q.Qtype != dns.TypeAXFR && q.Qtype != dns.TypeIXFR && out.Authoritative {
				t.Fatalf("%s %s below the delegation answered with AA: %v", q.Name, dns.TypeToString[q.Qtype], out)
			}
		}
	})
}
