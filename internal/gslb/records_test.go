package gslb_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// recordsYAML has wildcards, a delegation with glue and a DS, CAA and a
// reverse zone.
const recordsYAML = header + `
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: ns1, type: A, rrdatas: ["127.0.0.1"]}
  - {name: www, type: A, rrdatas: ["192.0.2.80"]}
  - {name: "*.wild", type: A, rrdatas: ["192.0.2.7"]}
  - {name: "*.wild", type: MX, rrdatas: ["10 mail.gslb.example."]}
  - {name: real.wild, type: TXT, rrdatas: ["\"real\""]}
  - {name: x.y.wild, type: TXT, rrdatas: ["\"deep\""]}
  - {name: "*.cn", type: CNAME, rrdatas: [www.gslb.example.]}
  - {name: sub, type: NS, ttl: 3600, rrdatas: [ns1.sub.gslb.example., ns.other.example.]}
  - {name: sub, type: DS, rrdatas: ["12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]}
  - {name: ns1.sub, type: A, rrdatas: ["192.0.2.53"]}
  - {name: ns1.sub, type: AAAA, rrdatas: ["2001:db8::53"]}
  - {name: "@", type: CAA, rrdatas: ["0 issue \"letsencrypt.org\"", "0 iodef \"mailto:sec@gslb.example\""]}
  gslbNames:
  - name: "*.svc"
    pool: {members: [{name: a, address: 192.0.2.1}]}
- name: 2.0.192.in-addr.arpa.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: "80", type: PTR, rrdatas: [www.gslb.example.]}
`

func TestRecordsWildcard(t *testing.T) {
	_, addr := start(t, recordsYAML, gslb.Options{})
	for _, c := range []struct {
		name  string
		qtype uint16
		rcode int
		want  []string // answer records, presentation format
	}{
		// Synthesized from *.wild, owned by the query name (RFC 4592 §3.3.1).
		{"a.wild.gslb.example.", dns.TypeA, 0, []string{"a.wild.gslb.example.\t300\tIN\tA\t192.0.2.7"}},
		{"A.b.Wild.gslb.example.", dns.TypeA, 0, []string{"a.b.wild.gslb.example.\t300\tIN\tA\t192.0.2.7"}},
		{"a.wild.gslb.example.", dns.TypeMX, 0, []string{"a.wild.gslb.example.\t300\tIN\tMX\t10 mail.gslb.example."}},
		{"a.wild.gslb.example.", dns.TypeTXT, 0, nil}, // NODATA from the wildcard
		// An existing name is not matched by the wildcard.
		{"real.wild.gslb.example.", dns.TypeA, 0, nil},
		// The closest encloser of z.y.wild is the empty non-terminal
		// y.wild; there is no *.y.wild, so the name does not exist
		// (RFC 4592 §2.2.1).
		{"z.y.wild.gslb.example.", dns.TypeA, dns.RcodeNameError, nil},
		{"y.wild.gslb.example.", dns.TypeA, 0, nil},
		// The wildcard itself answers as a name too.
		{"*.wild.gslb.example.", dns.TypeA, 0, []string{"*.wild.gslb.example.\t300\tIN\tA\t192.0.2.7"}},
		// A CNAME at a wildcard is followed.
		{"foo.cn.gslb.example.", dns.TypeA, 0, []string{"foo.cn.gslb.example.\t300\tIN\tCNAME\twww.gslb.example.", "www.gslb.example.\t300\tIN\tA\t192.0.2.80"}},
		// A wildcard GSLB name.
		{"api.svc.gslb.example.", dns.TypeA, 0, []string{"api.svc.gslb.example.\t30\tIN\tA\t192.0.2.1"}},
		// Names no wildcard covers still do not exist.
		{"nope.gslb.example.", dns.TypeA, dns.RcodeNameError, nil},
	} {
		r := exchange(t, "udp", addr, query(c.name, c.qtype, 0, ""))
		var got []string
		for _, rr := range r.Answer {
			got = append(got, rr.String())
		}
		if r.Rcode != c.rcode || !r.Authoritative || strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s %s: rcode %d aa %v answer\n%s\nwant rcode %d answer\n%s", c.name, dns.TypeToString[c.qtype],
				r.Rcode, r.Authoritative, strings.Join(got, "\n"), c.rcode, strings.Join(c.want, "\n"))
		}
		if len(r.Answer) == 0 && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA) {
			t.Errorf("%s: negative answer without SOA: %v", c.name, r.Ns)
		}
	}
}

func TestRecordsDelegation(t *testing.T) {
	_, addr := start(t, recordsYAML, gslb.Options{})
	for _, c := range []struct {
		name  string
		qtype uint16
	}{
		{"sub.gslb.example.", dns.TypeNS},
		{"sub.gslb.example.", dns.TypeA},
		{"www.sub.gslb.example.", dns.TypeA},
		{"ns1.sub.gslb.example.", dns.TypeA}, // glue is not answered authoritatively
		{"a.b.sub.gslb.example.", dns.TypeDS},
		{"sub.gslb.example.", dns.TypeANY},
	} {
		for _, network := range []string{"udp", "tcp"} {
			r := exchange(t, network, addr, query(c.name, c.qtype, 1232, ""))
			if r.Rcode != dns.RcodeSuccess || r.Authoritative || len(r.Answer) != 0 {
				t.Errorf("%s %s %s: want a referral (NOERROR, AA clear, no answer), got\n%v", network, c.name, dns.TypeToString[c.qtype], r)
				continue
			}
			var ns, glue []string
			for _, rr := range r.Ns {
				ns = append(ns, rr.String())
			}
			for _, rr := range r.Extra {
				if rr.Header().Rrtype != dns.TypeOPT {
					glue = append(glue, rr.String())
				}
			}
			wantNS := "sub.gslb.example.\t3600\tIN\tNS\tns1.sub.gslb.example.\nsub.gslb.example.\t3600\tIN\tNS\tns.other.example."
			wantGlue := "ns1.sub.gslb.example.\t300\tIN\tA\t192.0.2.53\nns1.sub.gslb.example.\t300\tIN\tAAAA\t2001:db8::53"
			if strings.Join(ns, "\n") != wantNS || strings.Join(glue, "\n") != wantGlue {
				t.Errorf("%s %s %s: authority\n%s\nadditional\n%s", network, c.name, dns.TypeToString[c.qtype], strings.Join(ns, "\n"), strings.Join(glue, "\n"))
			}
		}
	}
	// DS at the cut is the parent's: answered authoritatively.
	r := exchange(t, "udp", addr, query("sub.gslb.example.", dns.TypeDS, 0, ""))
	if r.Rcode != 0 || !r.Authoritative || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeDS {
		t.Errorf("DS at the cut: %v", r)
	}
}

func TestRecordsCAAAndPTR(t *testing.T) {
	_, addr := start(t, recordsYAML, gslb.Options{})
	r := exchange(t, "udp", addr, query("gslb.example.", dns.TypeCAA, 0, ""))
	if len(r.Answer) != 2 || r.Answer[0].String() != "gslb.example.\t300\tIN\tCAA\t0 issue \"letsencrypt.org\"" {
		t.Errorf("CAA: %v", r)
	}
	r = exchange(t, "udp", addr, query("80.2.0.192.in-addr.arpa.", dns.TypePTR, 0, ""))
	if len(r.Answer) != 1 || r.Answer[0].String() != "80.2.0.192.in-addr.arpa.\t300\tIN\tPTR\twww.gslb.example." || !r.Authoritative {
		t.Errorf("PTR: %v", r)
	}
}

// Queries answered from a wildcard are observed (and so counted in the
// DNS metrics) under the wildcard's owner, not the query name: random
// names under a wildcard must not grow the metrics without bound.
func TestWildcardQueriesObservedUnderTheWildcard(t *testing.T) {
	var mu sync.Mutex
	names := map[string]int{}
	_, addr := start(t, recordsYAML, gslb.Options{Observe: func(q gslb.Query) {
		mu.Lock()
		names[q.Name]++
		mu.Unlock()
	}})
	for i := range 50 {
		exchange(t, "udp", addr, query(fmt.Sprintf("r%d.wild.gslb.example.", i), dns.TypeA, 0, ""))
		exchange(t, "udp", addr, query(fmt.Sprintf("r%d.svc.gslb.example.", i), dns.TypeA, 0, ""))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(names) != 2 || names["*.wild.gslb.example."] != 50 || names["*.svc.gslb.example."] != 50 {
		t.Errorf("observed names %v, want the two wildcard owners 50 times each", names)
	}
}
