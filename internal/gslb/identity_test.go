package gslb_test

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// chaosQuery is a CH-class question.
func chaosQuery(name string, qtype uint16) *dns.Msg {
	m := query(name, qtype, 0, "")
	m.Question[0].Qclass = dns.ClassCHAOS
	return m
}

func TestIdentityOffByDefault(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	for _, name := range []string{"version.bind.", "id.server.", "hostname.bind.", "version.server."} {
		if r := exchange(t, "udp", addr, chaosQuery(name, dns.TypeTXT)); r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
			t.Errorf("%s CH TXT without dnsIdentity: %v", name, r)
		}
	}
}

func TestIdentity(t *testing.T) {
	yaml := zoneYAML + "spillway:\n  dnsIdentity: {version: \"spillway 1.2\", id: edge-1}\n"
	_, addr := start(t, yaml, gslb.Options{})
	for _, c := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"version.bind.", dns.TypeTXT, "version.bind.\t0\tCH\tTXT\t\"spillway 1.2\""},
		{"VERSION.server.", dns.TypeTXT, "version.server.\t0\tCH\tTXT\t\"spillway 1.2\""},
		{"id.server.", dns.TypeTXT, "id.server.\t0\tCH\tTXT\t\"edge-1\""},
		{"hostname.bind.", dns.TypeANY, "hostname.bind.\t0\tCH\tTXT\t\"edge-1\""},
		{"hostname.bind.", dns.TypeA, ""},
	} {
		for _, network := range []string{"udp", "tcp"} {
			r := exchange(t, network, addr, chaosQuery(c.name, c.qtype))
			got := ""
			if len(r.Answer) == 1 {
				got = r.Answer[0].String()
			}
			if r.Rcode != dns.RcodeSuccess || !r.Authoritative || got != c.want || len(r.Answer) > 1 {
				t.Errorf("%s %s CH %s: %v\nwant %q", network, c.name, dns.TypeToString[c.qtype], r, c.want)
			}
		}
	}
	if r := exchange(t, "udp", addr, chaosQuery("authors.bind.", dns.TypeTXT)); r.Rcode != dns.RcodeRefused {
		t.Errorf("authors.bind.: %v", r)
	}
}
