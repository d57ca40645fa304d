package gslb_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// A TSIG-signed UDP query whose signed answer does not fit gets a signed
// reply with TC set that fits (the question, the OPT record when the
// query had one, and the TSIG: RFC 8945 §5.3), so the client retries over
// TCP. The answer here is about 430 bytes: it fits 512 unsigned but not
// with its TSIG. Before the fix a query without EDNS crashed the process
// (a slice of the empty additional section) and one with EDNS 512 got a
// 544-byte reply without its OPT record.
func TestSignedUDPReplyTruncatesWithinTheLimit(t *testing.T) {
	y := strings.Replace(zoneYAML, "  - {name: ns1, type: A", "  - {name: mid, type: TXT, rrdatas: [\"\\\""+strings.Repeat("m", 200)+"\\\" \\\""+strings.Repeat("n", 200)+"\\\"\"]}\n  - {name: ns1, type: A", 1)
	y = strings.Replace(y, "  nameServers: [ns1.gslb.example.]\n",
		"  nameServers: [ns1.gslb.example.]\n  transfer: {tsigKeys: [{name: xfr-key., secret: \""+xfrSecret+"\"}]}\n", 1)
	_, addr := start(t, y, gslb.Options{})
	for _, c := range []struct {
		name     string
		edns     uint16 // 0: none
		qname    string
		truncate bool
	}{
		{"no EDNS, answer too big with its TSIG", 0, "mid.gslb.example.", true},
		{"EDNS 512, answer too big with its TSIG", 512, "mid.gslb.example.", true},
		{"EDNS 1232, fits", 1232, "mid.gslb.example.", false},
		{"no EDNS, small answer", 0, "mail.gslb.example.", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := new(dns.Msg)
			m.SetQuestion(c.qname, dns.TypeTXT)
			if c.qname == "mail.gslb.example." {
				m.Question[0].Qtype = dns.TypeA
			}
			if c.edns > 0 {
				m.SetEdns0(c.edns, false)
			}
			m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
			// The client verifies the reply's TSIG (TsigSecret).
			cl := &dns.Client{Net: "udp", Timeout: 2 * time.Second, UDPSize: 65535, TsigSecret: map[string]string{"xfr-key.": xfrSecret}}
			r, _, err := cl.Exchange(m, addr)
			if err != nil {
				t.Fatalf("exchange: %v", err)
			}
			if size := r.Len(); size > max(512, int(c.edns)) {
				t.Errorf("reply of %d bytes over the UDP limit", size)
			}
			if r.Truncated != c.truncate {
				t.Errorf("TC = %v, want %v: %v", r.Truncated, c.truncate, r)
			}
			if (r.IsEdns0() != nil) != (c.edns > 0) {
				t.Errorf("OPT in reply = %v, query had EDNS %v", r.IsEdns0() != nil, c.edns > 0)
			}
			if r.IsTsig() == nil {
				t.Error("reply not signed")
			}
			if !c.truncate && len(r.Answer) == 0 {
				t.Errorf("no answer: %v", r)
			}
		})
	}
}

// A query whose TSIG record is empty (no algorithm name) gets FORMERR
// without a TSIG, over UDP and TCP alike. It got NOTAUTH with a TSIG
// whose empty algorithm name packed to nothing, a reply no client can
// unpack (found by FuzzRecordsHandler over the TCP handler; its input is
// kept in testdata).
func TestEmptyTSIGGetsFormErr(t *testing.T) {
	s := compile(t, xfrYAML(`{allow: [127.0.0.0/8]}`), gslb.Options{})
	q, err := query("gslb.example.", dns.TypeSOA, 0, "").Pack()
	if err != nil {
		t.Fatal(err)
	}
	// One additional record: a TSIG owned by the root, class ANY, with 0
	// bytes of RDATA.
	pkt := append(q, 0, 0, byte(dns.TypeTSIG), 0, byte(dns.ClassANY), 0, 0, 0, 0, 0, 0)
	pkt[11] = 1 // ARCOUNT
	if r := new(dns.Msg); r.Unpack(pkt) != nil || r.IsTsig() == nil {
		t.Fatalf("the query does not unpack with its TSIG: %v", r)
	}
	out := s.AnswerUDP(pkt, netip.MustParseAddrPort("127.0.0.1:5353"), nil)
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		t.Fatalf("UDP reply does not unpack: %v (%x)", err, out)
	}
	if m.Rcode != dns.RcodeFormatError || m.IsTsig() != nil {
		t.Errorf("UDP reply: rcode %s, TSIG %v; want FORMERR without a TSIG", dns.RcodeToString[m.Rcode], m.IsTsig())
	}
}
