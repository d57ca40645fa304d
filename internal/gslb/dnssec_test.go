package gslb_test

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/dnssec"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/plan"
)

// signedYAML returns zoneYAML with dnssec on, its key written to a
// temporary file, and the key.
func signedYAML(t testing.TB) (string, *dnssec.Key) {
	t.Helper()
	k, err := dnssec.Generate()
	if err != nil {
		t.Fatal(err)
	}
	p, err := k.PEM()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gslb.example.key")
	if err := os.WriteFile(path, p, 0o600); err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(zoneYAML, "  nameServers: [ns1.gslb.example.]\n",
		"  nameServers: [ns1.gslb.example.]\n  dnssec: {keyFile: "+path+"}\n", 1)
	return y, k
}

// doQuery is a query with EDNS and DO set, and CO when co.
func doQuery(name string, qtype uint16, co bool) *dns.Msg {
	m := query(name, qtype, 1232, "")
	opt := m.IsEdns0()
	opt.SetDo()
	if co {
		opt.SetCo()
	}
	return m
}

var src = netip.MustParseAddr("127.0.0.1")

// verifySection checks, with miekg/dns as the reference verifier, that
// every record set of rrs is followed by a valid RRSIG of key at now,
// and returns the sets' types in order.
func verifySection(t *testing.T, rrs []dns.RR, key *dns.DNSKEY, now time.Time) []uint16 {
	t.Helper()
	var types []uint16
	for i := 0; i < len(rrs); {
		h := rrs[i].Header()
		if h.Rrtype == dns.TypeRRSIG {
			t.Fatalf("RRSIG without a set before it: %v", rrs[i])
		}
		j := i + 1
		for j < len(rrs) && rrs[j].Header().Rrtype == h.Rrtype && rrs[j].Header().Name == h.Name {
			j++
		}
		if j == len(rrs) || rrs[j].Header().Rrtype != dns.TypeRRSIG {
			t.Fatalf("set %s %s has no RRSIG", h.Name, dns.TypeToString[h.Rrtype])
		}
		sig := rrs[j].(*dns.RRSIG)
		if sig.TypeCovered != h.Rrtype || sig.Header().Name != h.Name || sig.Header().Ttl != h.Ttl {
			t.Fatalf("RRSIG %v does not cover %s %s", sig, h.Name, dns.TypeToString[h.Rrtype])
		}
		if err := sig.Verify(key, rrs[i:j]); err != nil {
			t.Fatalf("RRSIG over %s %s: %v", h.Name, dns.TypeToString[h.Rrtype], err)
		}
		if !sig.ValidityPeriod(now) {
			t.Fatalf("RRSIG %v not valid at %v", sig, now)
		}
		types = append(types, h.Rrtype)
		i = j + 1
	}
	return types
}

func TestDNSSECSignsAnswers(t *testing.T) {
	y, k := signedYAML(t)
	s := compile(t, y, gslb.Options{})
	dk := k.DNSKEY("gslb.example.")
	now := time.Now()
	for _, c := range []struct {
		name   string
		qtype  uint16
		answer []uint16
	}{
		{"w.gslb.example.", dns.TypeA, []uint16{dns.TypeA}},
		{"mail.gslb.example.", dns.TypeA, []uint16{dns.TypeA}},
		{"geo.gslb.example.", dns.TypeA, []uint16{dns.TypeA}},
		{"www.gslb.example.", dns.TypeA, []uint16{dns.TypeCNAME, dns.TypeCNAME, dns.TypeA}},
		{"gslb.example.", dns.TypeDNSKEY, []uint16{dns.TypeDNSKEY}},
		{"gslb.example.", dns.TypeSOA, []uint16{dns.TypeSOA}},
		{"gslb.example.", dns.TypeNS, []uint16{dns.TypeNS}},
		{"_sip._udp.gslb.example.", dns.TypeSRV, []uint16{dns.TypeSRV}},
		{"many.gslb.example.", dns.TypeAAAA, []uint16{dns.TypeAAAA}}, // 30 records: beyond the cache
	} {
		m := s.Exchange(doQuery(c.name, c.qtype, false), src, now)
		if m.Rcode != dns.RcodeSuccess || m.AuthenticatedData {
			t.Fatalf("%s: rcode %d, AD %v", c.name, m.Rcode, m.AuthenticatedData)
		}
		if got := verifySection(t, m.Answer, dk, now); !slices.Equal(got, c.answer) {
			t.Fatalf("%s %s: answer sets %v, want %v", c.name, dns.TypeToString[c.qtype], got, c.answer)
		}
		if !m.IsEdns0().Do() {
			t.Fatalf("%s: DO not echoed", c.name)
		}
		if m.IsEdns0().Co() {
			t.Fatalf("%s: CO set without the query's", c.name)
		}
	}
	// The DNSKEY served is the key's.
	m := s.Exchange(doQuery("gslb.example.", dns.TypeDNSKEY, false), src, now)
	if got := m.Answer[0].(*dns.DNSKEY); got.PublicKey != dk.PublicKey || got.Flags != 257 || got.Algorithm != 13 {
		t.Fatalf("DNSKEY %v, want %v", got, dk)
	}
}

// Compact denial of existence (RFC 9824).
func TestDNSSECCompactDenial(t *testing.T) {
	y, k := signedYAML(t)
	s := compile(t, y, gslb.Options{})
	dk := k.DNSKEY("gslb.example.")
	now := time.Now()
	for _, c := range []struct {
		name    string
		qtype   uint16
		co      bool
		rcode   int
		owner   string
		bitmap  []uint16
		answers int
	}{
		// NXDOMAIN: NOERROR, an NSEC at the name with NXNAME.
		{"nope.gslb.example.", dns.TypeA, false, dns.RcodeSuccess, "nope.gslb.example.", []uint16{dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNXNAME}, 0},
		// With CO the RCODE is NXDOMAIN; the proof is the same.
		{"nope.gslb.example.", dns.TypeA, true, dns.RcodeNameError, "nope.gslb.example.", []uint16{dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNXNAME}, 0},
		{"a.b.nope.gslb.example.", dns.TypeAAAA, false, dns.RcodeSuccess, "a.b.nope.gslb.example.", []uint16{dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNXNAME}, 0},
		// NODATA: the types that exist.
		{"mail.gslb.example.", dns.TypeAAAA, false, dns.RcodeSuccess, "mail.gslb.example.", []uint16{dns.TypeA, dns.TypeRRSIG, dns.TypeNSEC}, 0},
		{"w.gslb.example.", dns.TypeTXT, false, dns.RcodeSuccess, "w.gslb.example.", []uint16{dns.TypeA, dns.TypeRRSIG, dns.TypeNSEC}, 0},
		{"w.gslb.example.", dns.TypeAAAA, true, dns.RcodeSuccess, "w.gslb.example.", []uint16{dns.TypeA, dns.TypeRRSIG, dns.TypeNSEC}, 0},
		{"gslb.example.", dns.TypeTXT, false, dns.RcodeSuccess, "gslb.example.", []uint16{dns.TypeNS, dns.TypeSOA, dns.TypeRRSIG, dns.TypeNSEC, dns.TypeDNSKEY}, 0},
		// An empty non-terminal.
		{"_udp.gslb.example.", dns.TypeA, false, dns.RcodeSuccess, "_udp.gslb.example.", []uint16{dns.TypeRRSIG, dns.TypeNSEC}, 0},
		// NODATA at the end of a CNAME chain: the CNAMEs are signed too.
		{"www.gslb.example.", dns.TypeAAAA, false, dns.RcodeSuccess, "w.gslb.example.", []uint16{dns.TypeA, dns.TypeRRSIG, dns.TypeNSEC}, 4},
	} {
		m := s.Exchange(doQuery(c.name, c.qtype, c.co), src, now)
		if m.Rcode != c.rcode {
			t.Fatalf("%s %s co=%v: rcode %s, want %s", c.name, dns.TypeToString[c.qtype], c.co, dns.RcodeToString[m.Rcode], dns.RcodeToString[c.rcode])
		}
		if m.IsEdns0().Co() != c.co {
			t.Fatalf("%s: CO %v in the reply, query's %v", c.name, m.IsEdns0().Co(), c.co)
		}
		if len(m.Answer) != c.answers {
			t.Fatalf("%s: answer %v", c.name, m.Answer)
		}
		verifySection(t, m.Answer, dk, now)
		if got := verifySection(t, m.Ns, dk, now); !slices.Equal(got, []uint16{dns.TypeSOA, dns.TypeNSEC}) {
			t.Fatalf("%s: authority sets %v", c.name, got)
		}
		nsec := m.Ns[2].(*dns.NSEC)
		if nsec.Hdr.Name != c.owner || nsec.NextDomain != `\000.`+c.owner || !slices.Equal(nsec.TypeBitMap, c.bitmap) {
			t.Fatalf("%s: NSEC %v, want at %s bitmap %v", c.name, nsec, c.owner, c.bitmap)
		}
		if nsec.Hdr.Ttl != 20 {
			t.Fatalf("%s: NSEC TTL %d, want the negative TTL 20", c.name, nsec.Hdr.Ttl)
		}
		// The NSEC covers no other name: the next name is qname's
		// immediate successor in canonical order.
		if !strings.HasPrefix(nsec.NextDomain, `\000.`) {
			t.Fatalf("next name %s", nsec.NextDomain)
		}
	}
	// A query for NSEC gets the NSEC as its answer.
	for _, c := range []struct {
		name   string
		bitmap []uint16
	}{
		{"mail.gslb.example.", []uint16{dns.TypeA, dns.TypeRRSIG, dns.TypeNSEC}},
		{"nope.gslb.example.", []uint16{dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNXNAME}},
	} {
		m := s.Exchange(doQuery(c.name, dns.TypeNSEC, false), src, now)
		if m.Rcode != dns.RcodeSuccess || len(m.Ns) != 0 {
			t.Fatalf("NSEC query for %s: %v", c.name, m)
		}
		if got := verifySection(t, m.Answer, dk, now); !slices.Equal(got, []uint16{dns.TypeNSEC}) {
			t.Fatalf("NSEC query for %s: answer %v", c.name, m.Answer)
		}
		if nsec := m.Answer[0].(*dns.NSEC); !slices.Equal(nsec.TypeBitMap, c.bitmap) {
			t.Fatalf("NSEC query for %s: %v", c.name, nsec)
		}
	}
	// RFC 9824 §3.5: a query for NXNAME is FORMERR.
	if m := s.Exchange(doQuery("w.gslb.example.", dns.TypeNXNAME, false), src, now); m.Rcode != dns.RcodeFormatError {
		t.Fatalf("NXNAME query: rcode %s", dns.RcodeToString[m.Rcode])
	}
}

// Without DO, or in an unsigned zone, answers are as before: no RRSIG,
// no DNSKEY beyond the apex's, NXDOMAIN stays NXDOMAIN.
func TestDNSSECOnlyWithDO(t *testing.T) {
	y, _ := signedYAML(t)
	s := compile(t, y, gslb.Options{})
	now := time.Now()
	for _, q := range []*dns.Msg{query("w.gslb.example.", dns.TypeA, 1232, ""), query("w.gslb.example.", dns.TypeA, 0, "")} {
		m := s.Exchange(q, src, now)
		for _, rr := range append(m.Answer, m.Ns...) {
			if rr.Header().Rrtype == dns.TypeRRSIG || rr.Header().Rrtype == dns.TypeNSEC {
				t.Fatalf("DO=0 got %v", rr)
			}
		}
	}
	if m := s.Exchange(query("nope.gslb.example.", dns.TypeA, 1232, ""), src, now); m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 {
		t.Fatalf("DO=0 NXDOMAIN: %v", m)
	}
	unsigned := compile(t, zoneYAML, gslb.Options{})
	m := unsigned.Exchange(doQuery("nope.gslb.example.", dns.TypeA, true), src, now)
	if m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 || m.IsEdns0().Co() {
		t.Fatalf("unsigned zone with DO: %v", m)
	}
	if m := unsigned.Exchange(doQuery("gslb.example.", dns.TypeDNSKEY, false), src, now); len(m.Answer) != 0 {
		t.Fatalf("unsigned zone serves %v", m.Answer)
	}
}

// A signature is made once per answer set and reused: the same set
// gets the same RRSIG (ECDSA signatures are randomized, so a re-signing
// would differ), until it is sigReuse (1 day) old.
func TestDNSSECSignatureCache(t *testing.T) {
	y, _ := signedYAML(t)
	s := compile(t, y, gslb.Options{})
	now := time.Now()
	sigOf := func(name string, qtype uint16, at time.Time) string {
		m := s.Exchange(doQuery(name, qtype, false), src, at)
		for _, rr := range append(m.Answer, m.Ns...) {
			if sig, ok := rr.(*dns.RRSIG); ok && sig.TypeCovered == qtype || ok && qtype == 0 {
				return sig.Signature
			}
		}
		t.Fatalf("%s: no RRSIG in %v", name, m)
		return ""
	}
	a := sigOf("mail.gslb.example.", dns.TypeA, now)
	if b := sigOf("mail.gslb.example.", dns.TypeA, now.Add(time.Hour)); b != a {
		t.Fatal("the same set was signed twice within a day")
	}
	if c := sigOf("mail.gslb.example.", dns.TypeA, now.Add(25*time.Hour)); c == a {
		t.Fatal("a day-old signature was reused")
	}
	// GSLB answers: one signature per distinct answer, reused by every
	// query that gets the same answer.
	seen := map[string]string{}
	for range 200 {
		m := s.Exchange(doQuery("w.gslb.example.", dns.TypeA, false), src, now)
		addr := m.Answer[0].(*dns.A).A.String()
		sig := m.Answer[1].(*dns.RRSIG).Signature
		if prev, ok := seen[addr]; ok && prev != sig {
			t.Fatalf("answer %s signed twice", addr)
		}
		seen[addr] = sig
	}
	if len(seen) != 3 {
		t.Fatalf("answers %v, want the 3 members", seen)
	}
}

// The key file is read by New, so a reload (a new Server) picks up a
// replaced key.
func TestDNSSECKeyReadOnReload(t *testing.T) {
	y, k := signedYAML(t)
	dnskey := func(s *gslb.Server) string {
		m := s.Exchange(doQuery("gslb.example.", dns.TypeDNSKEY, false), src, time.Now())
		return m.Answer[0].(*dns.DNSKEY).PublicKey
	}
	if got := dnskey(compile(t, y, gslb.Options{})); got != k.DNSKEY("gslb.example.").PublicKey {
		t.Fatal("served another key")
	}
	_, rest, _ := strings.Cut(y, "dnssec: {keyFile: ")
	path, _, _ := strings.Cut(rest, "}")
	k2, _ := dnssec.Generate()
	p, _ := k2.PEM()
	if err := os.WriteFile(path, p, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := dnskey(compile(t, y, gslb.Options{})); got != k2.DNSKEY("gslb.example.").PublicKey {
		t.Fatal("a new Server kept the old key")
	}
}

func TestDNSSECKeyFileErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{bad, "not a PEM or BIND private key"},
		{filepath.Join(t.TempDir(), "missing.key"), "no such file"},
	} {
		y := strings.Replace(zoneYAML, "  nameServers: [ns1.gslb.example.]\n",
			"  nameServers: [ns1.gslb.example.]\n  dnssec: {keyFile: "+c.path+"}\n", 1)
		_, err := newServer(y)
		if err == nil || !strings.Contains(err.Error(), "dnsZones[0].dnssec.keyFile "+c.path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("key %s: %v", c.path, err)
		}
	}
}

// newServer compiles yaml and returns gslb.New's error.
func newServer(yaml string) (*gslb.Server, error) {
	c, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		return nil, err
	}
	p, err := plan.Compile(c)
	if err != nil {
		return nil, err
	}
	return gslb.New(c, p, gslb.Options{})
}

// BenchmarkServeDNSSEC measures signed answers through the handler
// against the same queries to an unsigned zone: cache hits (the answer
// set was signed before: the steady state), and cache misses (a name
// never asked before, so a compact denial signed for it: the cost of
// each name of a random-subdomain flood).
func BenchmarkServeDNSSEC(b *testing.B) {
	y, _ := signedYAML(b)
	misses := make([]*dns.Msg, 1<<15) // more names than the cache holds
	for i := range misses {
		misses[i] = doQuery(fmt.Sprintf("r%d.gslb.example.", i), dns.TypeA, false)
	}
	for _, bc := range []struct {
		name   string
		yaml   string
		q      func(i int) *dns.Msg
		signed bool
	}{
		{"unsigned-weighted", zoneYAML, constQ(doQuery("w.gslb.example.", dns.TypeA, false)), false},
		{"signed-weighted", y, constQ(doQuery("w.gslb.example.", dns.TypeA, false)), true},
		{"signed-weighted-no-do", y, constQ(query("w.gslb.example.", dns.TypeA, 1232, "")), false},
		{"unsigned-static", zoneYAML, constQ(doQuery("mail.gslb.example.", dns.TypeA, false)), false},
		{"signed-static", y, constQ(doQuery("mail.gslb.example.", dns.TypeA, false)), true},
		{"signed-cname-chain", y, constQ(doQuery("www.gslb.example.", dns.TypeA, false)), true},
		{"unsigned-nxdomain", zoneYAML, constQ(doQuery("nope.gslb.example.", dns.TypeA, false)), false},
		{"signed-nxdomain", y, constQ(doQuery("nope.gslb.example.", dns.TypeA, false)), true},
		{"signed-nxdomain-miss", y, func(i int) *dns.Msg { return misses[i%len(misses)] }, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := compile(b, bc.yaml, gslb.Options{})
			h := s.Handler()
			w := &fakeWriter{remote: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h.ServeDNS(w, bc.q(i))
				i++
			}
			if got := bytes.Contains(w.msg, []byte{0, 46}); bc.signed && !got { // type RRSIG
				b.Fatal("reply is not signed")
			}
		})
	}
}

func constQ(m *dns.Msg) func(int) *dns.Msg { return func(int) *dns.Msg { return m } }

// FuzzSignedHandler: any query to a signed zone is answered without a
// panic, the reply unpacks and fits UDP, and every RRSIG in a reply that
// is not truncated verifies (miekg/dns as the reference) over the set it
// covers.
func FuzzSignedHandler(f *testing.F) {
	y, k := signedYAML(f)
	s := compile(f, y, gslb.Options{})
	dk := k.DNSKEY("gslb.example.")
	h := s.Handler()
	fuzzHandler(f, h, []*dns.Msg{
		doQuery("w.gslb.example.", dns.TypeA, false),
		doQuery("nope.gslb.example.", dns.TypeA, true),
		doQuery("mail.gslb.example.", dns.TypeAAAA, false),
		doQuery("many.gslb.example.", dns.TypeAAAA, false),
		doQuery("www.gslb.example.", dns.TypeANY, false),
		doQuery("gslb.example.", dns.TypeDNSKEY, false),
		doQuery("_udp.gslb.example.", dns.TypeNSEC, false),
	}, false, func(t *testing.T, r, out *dns.Msg, tcp bool) {
		if out.AuthenticatedData {
			t.Fatal("AD set")
		}
		if out.Truncated {
			return // a set may be cut short
		}
		for _, sec := range [][]dns.RR{out.Answer, out.Ns} {
			for _, rr := range sec {
				sig, ok := rr.(*dns.RRSIG)
				if !ok {
					continue
				}
				var set []dns.RR
				for _, x := range sec {
					if x.Header().Rrtype == sig.TypeCovered && strings.EqualFold(x.Header().Name, sig.Hdr.Name) {
						set = append(set, x)
					}
				}
				if len(set) == 0 && out.Question[0].Qtype == dns.TypeRRSIG {
					continue // the answer to an RRSIG query: signatures alone
				}
				if err := sig.Verify(dk, set); err != nil {
					t.Fatalf("RRSIG %v over %v: %v", sig, set, err)
				}
			}
		}
	})
}

// Concurrent queries share the signature cache (run with -race).
func TestDNSSECConcurrent(t *testing.T) {
	y, k := signedYAML(t)
	s := compile(t, y, gslb.Options{})
	dk := k.DNSKEY("gslb.example.")
	now := time.Now()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				name := []string{"w.gslb.example.", "mail.gslb.example.", fmt.Sprintf("n%d-%d.gslb.example.", g, i%7)}[i%3]
				m := s.Exchange(doQuery(name, dns.TypeA, false), src, now)
				for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
					if len(sec) > 0 && sec[len(sec)-1].(*dns.RRSIG).Verify(dk, sec[len(sec)-2:len(sec)-1]) != nil {
						t.Errorf("%s: bad signature", name)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// A name so long that \000.name passes 255 octets gets no compact denial
// (the NSEC would not pack) but still a reply, its SOA signed.
func TestDNSSECLongNameDenial(t *testing.T) {
	y, k := signedYAML(t)
	s := compile(t, y, gslb.Options{})
	// 3 labels of 63 octets (192 on the wire), one of 47 (48) and
	// gslb.example. (14): 254 octets.
	name := strings.Repeat(strings.Repeat("a", 63)+".", 3) + strings.Repeat("b", 47) + ".gslb.example."
	if _, ok := dns.IsDomainName(name); !ok {
		t.Fatal("test name is not a name")
	}
	h := s.Handler()
	w := &fakeWriter{remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}}
	h.ServeDNS(w, doQuery(name, dns.TypeA, false))
	out := new(dns.Msg)
	if err := out.Unpack(w.msg); err != nil {
		t.Fatal(err)
	}
	if out.Rcode != dns.RcodeNameError {
		t.Fatalf("rcode %s", dns.RcodeToString[out.Rcode])
	}
	if got := verifySection(t, out.Ns, k.DNSKEY("gslb.example."), time.Now()); !slices.Equal(got, []uint16{dns.TypeSOA}) {
		t.Fatalf("authority %v", out.Ns)
	}
	// One octet shorter: the NSEC fits.
	short := name[1:]
	m := s.Exchange(doQuery(short, dns.TypeA, false), src, time.Now())
	if m.Rcode != dns.RcodeSuccess || len(m.Ns) != 4 {
		t.Fatalf("253-octet name: %v", m)
	}
}
