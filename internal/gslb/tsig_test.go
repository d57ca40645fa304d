package gslb_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// A secondary configured with a key for its primary signs its SOA
// queries and rejects unsigned replies (BIND: "expected a TSIG or
// SIG(0)"), so ordinary queries signed with a zone's key get signed
// replies, over UDP and TCP; a query whose TSIG does not verify gets
// NOTAUTH with the TSIG error (RFC 8945 §5.2).
func TestSignedQueries(t *testing.T) {
	_, addr := start(t, xfrYAML(xfrKeyOnly), gslb.Options{})
	for _, network := range []string{"udp", "tcp"} {
		for _, edns := range []uint16{0, 1232} {
			m := query("gslb.example.", dns.TypeSOA, edns, "")
			m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
			c := &dns.Client{Net: network, Timeout: 2 * time.Second, TsigSecret: map[string]string{"xfr-key.": xfrSecret}}
			r, _, err := c.Exchange(m, addr)
			if err != nil {
				t.Fatalf("%s signed SOA query (edns %d): %v", network, edns, err)
			}
			if r.IsTsig() == nil || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeSOA || !r.Authoritative {
				t.Errorf("%s signed SOA query: %v", network, r)
			}
			// Signed with a secret the server does not have.
			m = query("gslb.example.", dns.TypeSOA, edns, "")
			m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
			c.TsigSecret = map[string]string{"xfr-key.": "d3Jvbmd3cm9uZ3dyb25nd3Jvbmc="}
			r, _, _ = c.Exchange(m, addr)
			if r == nil || r.Rcode != dns.RcodeNotAuth || r.IsTsig() == nil || r.IsTsig().Error != dns.RcodeBadSig || len(r.Answer) != 0 {
				t.Errorf("%s query with a wrong secret: %v, want NOTAUTH with BADSIG", network, r)
			}
		}
	}
	// A signed UDP answer that does not fit is truncated to fit with its
	// TSIG record.
	m := query("big.gslb.example.", dns.TypeTXT, 0, "")
	m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
	_, addr2 := start(t, strings.Replace(xfrYAML(xfrKeyOnly), "  records:\n", "  records:\n  - {name: big, type: TXT, rrdatas: ["+bigTXT+"]}\n", 1), gslb.Options{})
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, TsigSecret: map[string]string{"xfr-key.": xfrSecret}, UDPSize: 512}
	r, _, err := c.Exchange(m, addr2)
	if err != nil || !r.Truncated || r.IsTsig() == nil || r.Len() > 512 {
		t.Errorf("signed big answer over UDP: %v, %v (len %d)", err, r, r.Len())
	}
	if dig, err := exec.LookPath("dig"); err == nil {
		host, port, _ := strings.Cut(addr, ":")
		out, err := exec.Command(dig, "@"+host, "-p", port, "gslb.example.", "SOA", "-y", "hmac-sha256:xfr-key.:"+xfrSecret).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "status: NOERROR") || !strings.Contains(string(out), "TSIG\thmac-sha256.") ||
			strings.Contains(string(out), "failure") || strings.Contains(string(out), "expected a TSIG") {
			t.Errorf("dig signed SOA: %v\n%s", err, out)
		}
	}
}
