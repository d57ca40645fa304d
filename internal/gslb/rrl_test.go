package gslb_test

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/rrl"
)

// rrlClock is the still clock of the rate-limit tests: with time not
// moving, what a flood gets is exact (the burst, then slip or drop).
var rrlClock = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// rrlYAML is zoneYAML with response rate limiting: 5 per second, slip as
// given, 127.0.3.0/24 exempt.
func rrlYAML(base string, slip int) string {
	return base + fmt.Sprintf(`spillway:
  dnsResponseRateLimit:
    responsesPerSecond: 5
    slip: %d
    exempt: [127.0.3.0/24]
`, slip)
}

// flood sends every query of qs over UDP from local (an address of
// 127/8) to addr at once, then collects the replies until want have
// arrived and then 200 ms more pass without another, or 5 s pass.
func flood(t *testing.T, local, addr string, qs []*dns.Msg, want int) []*dns.Msg {
	t.Helper()
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(local)}, raddr)
	if err != nil {
		t.Fatalf("client socket on %s: %v", local, err)
	}
	co := &dns.Conn{Conn: uc, UDPSize: 65535}
	defer co.Close()
	for i, q := range qs {
		q.Id = uint16(i + 1)
		if err := co.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
	}
	var got []*dns.Msg
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		wait := time.Until(end)
		if len(got) >= want {
			wait = 200 * time.Millisecond
		}
		_ = co.SetReadDeadline(time.Now().Add(wait))
		r, err := co.ReadMsg()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				if len(got) >= want {
					break
				}
				continue
			}
			t.Fatal(err)
		}
		got = append(got, r)
	}
	return got
}

// split counts full replies (not truncated) and truncated ones.
func split(rs []*dns.Msg) (full, tc int) {
	for _, r := range rs {
		if r.Truncated {
			if len(r.Answer)+len(r.Ns) > 0 {
				panic("a truncated reply with records")
			}
			tc++
		} else {
			full++
		}
	}
	return full, tc
}

// repeat returns n copies of a query for name.
func repeat(n int, name string, qtype uint16) []*dns.Msg {
	qs := make([]*dns.Msg, n)
	for i := range qs {
		qs[i] = query(name, qtype, 1232, "")
	}
	return qs
}

// randomNames returns n queries for distinct names that do not exist
// under gslb.example. (a random-subdomain flood), DO set when do.
func randomNames(n int, tag string, do bool) []*dns.Msg {
	qs := make([]*dns.Msg, n)
	for i := range qs {
		name := fmt.Sprintf("r%d-%s.gslb.example.", i, tag)
		if do {
			qs[i] = doQuery(name, dns.TypeA, false)
		} else {
			qs[i] = query(name, dns.TypeA, 1232, "")
		}
	}
	return qs
}

// A flood from one prefix over UDP gets the rate's burst, then every
// slip-th reply truncated and the rest dropped, as the counters say;
// another prefix, TCP from the flooding one and an exempt prefix are
// answered in full; a random-subdomain flood counts as one denial.
func TestRRLOverUDP(t *testing.T) {
	const n, rate = 40, 5
	for _, slip := range []int{0, 1, 2, 3} {
		t.Run(fmt.Sprintf("slip%d", slip), func(t *testing.T) {
			s, addr := start(t, rrlYAML(zoneYAML, slip), gslb.Options{Now: func() time.Time { return rrlClock }})
			limited := n - rate
			slipped := 0
			if slip > 0 {
				slipped = limited / slip
			}
			full, tc := split(flood(t, "127.0.0.1", addr, repeat(n, "mail.gslb.example.", dns.TypeA), rate+slipped))
			if full != rate || tc != slipped {
				t.Errorf("flood of %d: %d answered, %d truncated; want %d and %d", n, full, tc, rate, slipped)
			}
			st := s.RateLimitStats().Limited
			if got := st.Limited(rrl.Answer, rrl.Slip); got != uint64(slipped) {
				t.Errorf("slipped counter %d, want %d", got, slipped)
			}
			if got := st.Limited(rrl.Answer, rrl.Drop); got != uint64(limited-slipped) {
				t.Errorf("dropped counter %d, want %d", got, limited-slipped)
			}

			// Another /24 is answered, for the same name.
			if full, tc := split(flood(t, "127.0.1.1", addr, repeat(rate, "mail.gslb.example.", dns.TypeA), rate)); full != rate || tc != 0 {
				t.Errorf("another client: %d answered, %d truncated; want %d answered", full, tc, rate)
			}
			// TCP from the flooding prefix is not limited.
			for i := range 2 * rate {
				if r := exchange(t, "tcp", addr, query("mail.gslb.example.", dns.TypeA, 0, "")); r.Truncated || len(r.Answer) != 1 {
					t.Fatalf("TCP query %d from the limited prefix: %v", i, r)
				}
			}
			// Nor is the exempt prefix.
			if full, _ := split(flood(t, "127.0.3.1", addr, repeat(n, "mail.gslb.example.", dns.TypeA), n)); full != n {
				t.Errorf("exempt prefix: %d of %d answered", full, n)
			}
			// Random names under the zone are one NXDOMAIN key.
			rs := flood(t, "127.0.0.1", addr, randomNames(n, "flood", false), rate+slipped)
			full, tc = split(rs)
			if full != rate || tc != slipped {
				t.Errorf("random-subdomain flood: %d answered, %d truncated; want %d and %d", full, tc, rate, slipped)
			}
			if got := st.Limited(rrl.NXDomain, rrl.Slip) + st.Limited(rrl.NXDomain, rrl.Drop); got != uint64(limited) {
				t.Errorf("NXDOMAIN limited %d, want %d", got, limited)
			}
		})
	}
}

// A reload keeps the counts: a prefix limited before it is limited
// after; a new table size starts afresh, the counters carry on.
func TestRRLReloadCarries(t *testing.T) {
	now := func() time.Time { return rrlClock }
	y := rrlYAML(zoneYAML, 0)
	old := compile(t, y, gslb.Options{Now: now})
	pkt, err := query("mail.gslb.example.", dns.TypeA, 0, "").Pack()
	if err != nil {
		t.Fatal(err)
	}
	from := netip.MustParseAddrPort("192.0.2.1:5353")
	answered := func(s *gslb.Server, n int) int {
		got := 0
		for range n {
			if s.AnswerUDP(pkt, from, nil) != nil {
				got++
			}
		}
		return got
	}
	if got := answered(old, 10); got != 5 {
		t.Fatalf("before the reload: %d answered, want 5", got)
	}
	kept := compile(t, y, gslb.Options{Now: now})
	kept.CarryState(old)
	if got := answered(kept, 3); got != 0 {
		t.Errorf("after a reload: %d answered, want 0 (still limited)", got)
	}
	resized := compile(t, strings.Replace(y, "slip: 0\n", "slip: 0\n    tableSize: 4096\n", 1), gslb.Options{Now: now})
	resized.CarryState(kept)
	if got := answered(resized, 10); got != 5 {
		t.Errorf("after a reload with a new table size: %d answered, want 5", got)
	}
	if got := resized.RateLimitStats().Limited.Limited(rrl.Answer, rrl.Drop); got != 5+3+5 {
		t.Errorf("dropped across reloads: %d, want 13", got)
	}
}

// nsecSignatures adds the distinct RRSIG signatures over NSEC records in
// rs to seen.
func nsecSignatures(rs []*dns.Msg, seen map[string]bool) {
	for _, r := range rs {
		for _, rr := range append(append([]dns.RR(nil), r.Answer...), r.Ns...) {
			if sig, ok := rr.(*dns.RRSIG); ok && sig.TypeCovered == dns.TypeNSEC {
				seen[sig.Signature] = true
			}
		}
	}
}

// The cap on denial signatures bounds the signatures a random-subdomain
// flood against a signed zone costs (counted, each ECDSA signature being
// distinct): over UDP past the cap a truncated reply, over TCP a
// SERVFAIL; a denial whose signature is cached needs no token.
func TestDenialSignatureCap(t *testing.T) {
	const n, capacity = 30, 5
	y, _ := signedYAML(t)
	for _, tc := range []struct {
		name                 string
		yaml                 string
		signedUDP, signedTCP int
	}{
		{"no cap", y, n, 0},
		{"capped", y + fmt.Sprintf("spillway:\n  dnsMaxDenialSignaturesPerSecond: %d\n", capacity), capacity, capacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, addr := start(t, tc.yaml, gslb.Options{Now: func() time.Time { return rrlClock }})
			seen := map[string]bool{}
			var udp, retry []*dns.Msg
			for _, q := range randomNames(n, tc.name, true) {
				r := exchange(t, "udp", addr, q)
				udp = append(udp, r)
				if r.Truncated {
					retry = append(retry, exchange(t, "tcp", addr, q))
				}
			}
			nsecSignatures(udp, seen)
			if len(seen) != tc.signedUDP {
				t.Errorf("UDP: %d fresh signatures, want %d", len(seen), tc.signedUDP)
			}
			_, truncated := split(udp)
			if truncated != n-tc.signedUDP {
				t.Errorf("UDP: %d truncated, want %d", truncated, n-tc.signedUDP)
			}
			nsecSignatures(retry, seen)
			if len(seen) != tc.signedUDP+tc.signedTCP {
				t.Errorf("UDP and TCP: %d fresh signatures, want %d", len(seen), tc.signedUDP+tc.signedTCP)
			}
			servfail := 0
			for _, r := range retry {
				if r.Rcode == dns.RcodeServerFailure {
					servfail++
				}
			}
			if want := len(retry) - tc.signedTCP; tc.signedTCP > 0 && servfail != want {
				t.Errorf("TCP: %d SERVFAIL, want %d", servfail, want)
			}
			// The first name again: its signature is cached, no token needed.
			if r := exchange(t, "udp", addr, randomNames(1, tc.name, true)[0]); r.Truncated {
				t.Errorf("a denial signed before was truncated: %v", r)
			}
			st := s.RateLimitStats()
			if st.SignatureCap && (st.SignaturesRefusedUDP != uint64(n-capacity) || st.SignaturesRefusedTCP != uint64(len(retry)-capacity)) {
				t.Errorf("refused counters: UDP %d, TCP %d", st.SignaturesRefusedUDP, st.SignaturesRefusedTCP)
			}
		})
	}
}

// The limits of the config and of internal/rrl agree.
func TestRRLBoundsAgree(t *testing.T) {
	for _, c := range []struct {
		name        string
		config, rrl int
	}{
		{"rate", config.DNSRRLMaxRate, rrl.MaxRate}, {"window", config.DNSRRLMaxWindowSec, rrl.MaxWindow}, {"slip", config.DNSRRLMaxSlip, rrl.MaxSlip},
		{"min table", config.DNSRRLMinTableSize, rrl.MinTableSize}, {"max table", config.DNSRRLMaxTableSize, rrl.MaxTableSize},
	} {
		if c.config != c.rrl {
			t.Errorf("%s: config %d, rrl %d", c.name, c.config, c.rrl)
		}
	}
}
