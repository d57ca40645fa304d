package gslb_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/dnssec"
	"github.com/spillwaylb/spillway/internal/gslb"
)

// Protocol conformance found wanting by an operator's review (issue 23,
// defects 1-6): each test here failed on the code before its fix.

// keyFile writes a new DNSSEC key to a temporary file and returns its
// path and the key.
func keyFile(t testing.TB) (string, *dnssec.Key) {
	t.Helper()
	k, err := dnssec.Generate()
	if err != nil {
		t.Fatal(err)
	}
	p, err := k.PEM()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "zone.key")
	if err := os.WriteFile(path, p, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, k
}

// chainYAML is a signed parent, gslb.example., delegating to a signed
// child it also serves (secure, with the child key's DS) and to an
// unsigned child it also serves (plain, no DS), with the keys.
func chainYAML(t testing.TB) (y string, parent, child *dnssec.Key) {
	t.Helper()
	pp, parent := keyFile(t)
	cp, child := keyFile(t)
	ds := child.DS("secure.gslb.example.")
	y = header + fmt.Sprintf(`
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  soa: {minimum: 20}
  dnssec: {keyFile: %s}
  records:
  - {name: ns1, type: A, rrdatas: ["127.0.0.1"]}
  - {name: secure, type: NS, rrdatas: [ns1.gslb.example.]}
  - {name: secure, type: DS, rrdatas: ["%d %d %d %s"]}
  - {name: plain, type: NS, rrdatas: [ns1.gslb.example.]}
- name: secure.gslb.example.
  nameServers: [ns1.gslb.example.]
  soa: {minimum: 20}
  dnssec: {keyFile: %s}
  records:
  - {name: www, type: A, rrdatas: ["192.0.2.80"]}
  gslbNames:
  - name: app
    pool: {members: [{name: a, address: 192.0.2.1}]}
- name: plain.gslb.example.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: www, type: A, rrdatas: ["192.0.2.81"]}
`, pp, ds.KeyTag, ds.Algorithm, ds.DigestType, ds.Digest, cp)
	return y, parent, child
}

// Defect 1: a DS query at a zone cut is answered from the parent side
// (RFC 4035 §3.1.4.1) when Spillway serves both sides: the parent's
// signed DS set for a signed child, and for an unsigned child the
// parent's NODATA with its SOA and an NSEC at the cut (NS, RRSIG, NSEC)
// proving there is no DS. Before the fix the child's apex answered:
// a NODATA signed with the child's key, which breaks the chain.
func TestDSFromParentSide(t *testing.T) {
	y, parent, child := chainYAML(t)
	s := compile(t, y, gslb.Options{})
	pk := parent.DNSKEY("gslb.example.")
	now := time.Now()

	m := s.Exchange(doQuery("secure.gslb.example.", dns.TypeDS, false), src, now)
	if m.Rcode != dns.RcodeSuccess || !m.Authoritative || len(m.Ns) != 0 {
		t.Fatalf("DS of the signed child: %v", m)
	}
	if got := verifySection(t, m.Answer, pk, now); !slices.Equal(got, []uint16{dns.TypeDS}) {
		t.Fatalf("DS of the signed child: answer sets %v", got)
	}
	if want := child.DS("secure.gslb.example."); !strings.EqualFold(m.Answer[0].(*dns.DS).Digest, want.Digest) {
		t.Fatalf("DS %v, want %v", m.Answer[0], want)
	}
	if sig := m.Answer[1].(*dns.RRSIG); sig.SignerName != "gslb.example." {
		t.Fatalf("DS signed by %s, want the parent", sig.SignerName)
	}

	for _, do := range []bool{true, false} {
		q := query("plain.gslb.example.", dns.TypeDS, 1232, "")
		if do {
			q = doQuery("plain.gslb.example.", dns.TypeDS, false)
		}
		m = s.Exchange(q, src, now)
		if m.Rcode != dns.RcodeSuccess || !m.Authoritative || len(m.Answer) != 0 || len(m.Ns) == 0 {
			t.Fatalf("DS of the unsigned child (DO %v): %v", do, m)
		}
		if soa := m.Ns[0].(*dns.SOA); soa.Hdr.Name != "gslb.example." {
			t.Fatalf("DS of the unsigned child (DO %v): SOA of %s, want the parent's", do, soa.Hdr.Name)
		}
		if !do {
			continue
		}
		if got := verifySection(t, m.Ns, pk, now); !slices.Equal(got, []uint16{dns.TypeSOA, dns.TypeNSEC}) {
			t.Fatalf("DS of the unsigned child: authority sets %v", got)
		}
		nsec := m.Ns[2].(*dns.NSEC)
		if nsec.Hdr.Name != "plain.gslb.example." || !slices.Equal(nsec.TypeBitMap, []uint16{dns.TypeNS, dns.TypeRRSIG, dns.TypeNSEC}) {
			t.Fatalf("NSEC %v, want one at the cut listing NS RRSIG NSEC", nsec)
		}
	}
	// Everything else at the child's apex is the child's.
	ck := child.DNSKEY("secure.gslb.example.")
	m = s.Exchange(doQuery("secure.gslb.example.", dns.TypeSOA, false), src, now)
	if got := verifySection(t, m.Answer, ck, now); !slices.Equal(got, []uint16{dns.TypeSOA}) {
		t.Fatalf("SOA of the child: %v", m)
	}
}

// Defect 2: ANY over UDP gets one synthesized HINFO "RFC8482" "" (RFC
// 8482 §4.2), not every record set; over TCP it gets them all. Before the
// fix a GSLB name and a static name answered every set over UDP.
func TestANYOverUDP(t *testing.T) {
	y, k := signedYAML(t)
	y = strings.Replace(y, "  records:\n", "  records:\n  - {name: mail, type: TXT, rrdatas: [\"\\\"v=spf1 -all\\\"\"]}\n  - {name: mail, type: MX, rrdatas: [\"10 mail.gslb.example.\"]}\n", 1)
	_, addr := start(t, y, gslb.Options{})
	dk := k.DNSKEY("gslb.example.")
	for _, c := range []struct {
		name string
		tcp  int // answer sets over TCP
	}{
		{"mail.gslb.example.", 3},
		{"gslb.example.", 3}, // NS, SOA, DNSKEY
		{"w.gslb.example.", 1},
	} {
		for _, do := range []bool{false, true} {
			q := query(c.name, dns.TypeANY, 1232, "")
			if do {
				q = doQuery(c.name, dns.TypeANY, false)
			}
			r := exchange(t, "udp", addr, q)
			if r.Rcode != dns.RcodeSuccess || r.Truncated {
				t.Fatalf("ANY %s over UDP: %v", c.name, r)
			}
			var hinfo []dns.RR
			for _, rr := range r.Answer {
				if rr.Header().Rrtype != dns.TypeRRSIG {
					hinfo = append(hinfo, rr)
				}
			}
			if len(hinfo) != 1 {
				t.Fatalf("ANY %s over UDP (DO %v): answer %v, want one HINFO", c.name, do, r.Answer)
			}
			h, ok := hinfo[0].(*dns.HINFO)
			if !ok || h.Cpu != "RFC8482" || h.Os != "" || h.Hdr.Name != c.name {
				t.Fatalf("ANY %s over UDP: %v, want HINFO \"RFC8482\" \"\"", c.name, hinfo[0])
			}
			if do {
				verifySection(t, r.Answer, dk, time.Now())
			}
			r = exchange(t, "tcp", addr, q)
			sets := 0
			for i, rr := range r.Answer {
				if rr.Header().Rrtype != dns.TypeRRSIG && (i == 0 || r.Answer[i-1].Header().Rrtype != rr.Header().Rrtype) {
					sets++
				}
				if rr.Header().Rrtype == dns.TypeHINFO {
					t.Fatalf("ANY %s over TCP: %v", c.name, rr)
				}
			}
			if sets < c.tcp {
				t.Fatalf("ANY %s over TCP: %d sets, want %d: %v", c.name, sets, c.tcp, r.Answer)
			}
		}
	}
	// A name that does not exist is still NXDOMAIN, an empty
	// non-terminal NODATA.
	if r := exchange(t, "udp", addr, query("nope.gslb.example.", dns.TypeANY, 0, "")); r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
		t.Fatalf("ANY nope: %v", r)
	}
	if r := exchange(t, "udp", addr, query("_udp.gslb.example.", dns.TypeANY, 0, "")); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Fatalf("ANY at an empty non-terminal: %v", r)
	}
}

// Defect 3: a BADTIME reply to a query whose MAC verified is signed, its
// Time Signed the request's and the server's time in Other Data (RFC 8945
// §5.2.3, as BIND does), over UDP and TCP. Before the fix it was
// unsigned and had no server time.
func TestTSIGBadTimeSigned(t *testing.T) {
	_, addr := start(t, xfrYAML(xfrKeyOnly), gslb.Options{})
	for _, network := range []string{"udp", "tcp"} {
		m := query("gslb.example.", dns.TypeSOA, 0, "")
		skew := time.Now().Add(-time.Hour).Unix() // beyond the 300 s fudge
		m.SetTsig("xfr-key.", dns.HmacSHA256, 300, skew)
		pkt, mac, err := dns.TsigGenerate(m, xfrSecret, "", false)
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now().Unix()
		out := exchangeWire(t, network, addr, pkt)
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		ts := r.IsTsig()
		if r.Rcode != dns.RcodeNotAuth || ts == nil || ts.Error != dns.RcodeBadTime {
			t.Fatalf("%s: %v, want NOTAUTH with BADTIME", network, r)
		}
		if ts.MAC == "" || ts.TimeSigned != uint64(skew) || ts.OtherLen != 6 {
			t.Fatalf("%s: TSIG %v, want a MAC, the request's time and 6 octets of server time", network, ts)
		}
		server, err := strconv.ParseUint(ts.OtherData, 16, 48)
		if err != nil || int64(server) < before-5 || int64(server) > time.Now().Unix()+5 {
			t.Fatalf("%s: Other Data %q is not the server's time (%d)", network, ts.OtherData, before)
		}
		// The MAC is the key's over the reply and the request's MAC
		// (miekg/dns's TsigVerify declines NOTAUTH messages, so it is
		// recomputed here).
		again := r.Copy()
		if _, want, err := dns.TsigGenerate(again, xfrSecret, mac, false); err != nil || want != ts.MAC {
			t.Fatalf("%s: reply's MAC %s, want %s (%v)", network, ts.MAC, want, err)
		}
	}
}

// exchangeWire sends a packed message over UDP or TCP and returns the
// packed reply.
func exchangeWire(t *testing.T, network, addr string, pkt []byte) []byte {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if network == "udp" {
		if _, err := c.Write(pkt); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("udp: %v", err)
		}
		return buf[:n]
	}
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(pkt))), pkt...)); err != nil {
		t.Fatal(err)
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		t.Fatalf("tcp: %v", err)
	}
	buf := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("tcp: %v", err)
	}
	return buf
}

// Defect 4: an explicit RRSIG query to a signed zone gets the RRSIGs of
// the name's sets (over UDP those of one set, as BIND's minimal-any
// does), never a NODATA whose NSEC lists RRSIG; meta-QTYPEs get the
// RCODEs BIND 9.18 gives (checked against named on loopback: OPT, TSIG,
// TKEY without a TKEY record and the other meta types 128-255 FORMERR,
// MAILA and MAILB NOTIMP, before the zone or class is looked at).
func TestRRSIGAndMetaQueries(t *testing.T) {
	y, k := signedYAML(t)
	s := compile(t, y, gslb.Options{})
	dk := k.DNSKEY("gslb.example.")
	now := time.Now()
	for _, c := range []struct {
		name    string
		covered []uint16
	}{
		{"mail.gslb.example.", []uint16{dns.TypeA}},
		{"gslb.example.", []uint16{dns.TypeNS, dns.TypeSOA, dns.TypeDNSKEY}},
		{"w.gslb.example.", []uint16{dns.TypeA}},
	} {
		for _, do := range []bool{true, false} {
			q := query(c.name, dns.TypeRRSIG, 1232, "")
			if do {
				q = doQuery(c.name, dns.TypeRRSIG, false)
			}
			m := s.Exchange(q, src, now) // as TCP
			var covered []uint16
			for _, rr := range m.Answer {
				sig, ok := rr.(*dns.RRSIG)
				if !ok {
					t.Fatalf("RRSIG %s: answer %v", c.name, m.Answer)
				}
				covered = append(covered, sig.TypeCovered)
				set := s.Exchange(query(c.name, sig.TypeCovered, 1232, ""), src, now).Answer
				if sig.TypeCovered == dns.TypeA && c.name == "w.gslb.example." {
					continue // a GSLB answer is drawn per query
				}
				if err := sig.Verify(dk, set); err != nil {
					t.Fatalf("RRSIG %s over %s: %v", c.name, dns.TypeToString[sig.TypeCovered], err)
				}
			}
			if m.Rcode != dns.RcodeSuccess || !slices.Equal(covered, c.covered) {
				t.Fatalf("RRSIG %s (DO %v): covers %v, want %v: %v", c.name, do, covered, c.covered, m)
			}
		}
	}
	// Over UDP, the signatures of one set.
	pkt, _ := doQuery("gslb.example.", dns.TypeRRSIG, false).Pack()
	var r dns.Msg
	if err := r.Unpack(s.AnswerUDP(pkt, netipAddrPort, nil)); err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.RRSIG).TypeCovered != dns.TypeNS {
		t.Fatalf("RRSIG over UDP: %v %v", err, r.Answer)
	}
	// No sets at the name: a NODATA whose NSEC does not list RRSIG.
	for _, name := range []string{"_udp.gslb.example.", "nope.gslb.example."} {
		m := s.Exchange(doQuery(name, dns.TypeRRSIG, false), src, now)
		verifySection(t, m.Ns, dk, now)
		if len(m.Answer) != 0 || len(m.Ns) != 4 {
			t.Fatalf("RRSIG %s: %v", name, m)
		}
		if nsec := m.Ns[2].(*dns.NSEC); slices.Contains(nsec.TypeBitMap, dns.TypeRRSIG) {
			t.Fatalf("RRSIG %s: NODATA proved by %v, which lists RRSIG", name, nsec)
		}
	}

	unsigned := compile(t, zoneYAML, gslb.Options{})
	for _, c := range []struct {
		name   string
		qtype  uint16
		qclass uint16
		rcode  int // Spillway's, which is BIND 9.18's
	}{
		{"mail.gslb.example.", dns.TypeOPT, dns.ClassINET, dns.RcodeFormatError},
		{"mail.gslb.example.", dns.TypeTSIG, dns.ClassINET, dns.RcodeFormatError},
		{"mail.gslb.example.", dns.TypeTKEY, dns.ClassINET, dns.RcodeFormatError},
		{"mail.gslb.example.", dns.TypeMAILA, dns.ClassINET, dns.RcodeNotImplemented},
		{"mail.gslb.example.", dns.TypeMAILB, dns.ClassINET, dns.RcodeNotImplemented},
		{"mail.gslb.example.", dns.TypeNXNAME, dns.ClassINET, dns.RcodeFormatError}, // 128, unsigned zone too
		{"mail.gslb.example.", 200, dns.ClassINET, dns.RcodeFormatError},
		{"other.example.", dns.TypeMAILA, dns.ClassINET, dns.RcodeNotImplemented},
		{"other.example.", 200, dns.ClassINET, dns.RcodeFormatError},
		{"mail.gslb.example.", dns.TypeMAILA, dns.ClassCHAOS, dns.RcodeNotImplemented},
		// Not meta: answered as before.
		{"mail.gslb.example.", dns.TypeANY, dns.ClassINET, dns.RcodeSuccess},
		{"mail.gslb.example.", dns.TypeRRSIG, dns.ClassINET, dns.RcodeSuccess},
		{"mail.gslb.example.", 127, dns.ClassINET, dns.RcodeSuccess},
		{"mail.gslb.example.", 256, dns.ClassINET, dns.RcodeSuccess},
	} {
		q := query(c.name, c.qtype, 1232, "")
		q.Question[0].Qclass = c.qclass
		m := unsigned.Exchange(q, src, now)
		if m.Rcode != c.rcode || len(m.Answer) != 0 && c.rcode != dns.RcodeSuccess {
			t.Errorf("%s %s: %s, want %s", c.name, dns.Type(c.qtype), dns.RcodeToString[m.Rcode], dns.RcodeToString[c.rcode])
		}
		if m.IsEdns0() == nil || len(m.Question) != 1 {
			t.Errorf("%s %s: reply lacks the question or the OPT: %v", c.name, dns.Type(c.qtype), m)
		}
	}
}

var netipAddrPort = netip.MustParseAddrPort("127.0.0.1:5353")

// Defect 5: a GEO name's NODATA (a family it has no member of) does not
// depend on the client, so its ECS scope is 0 (RFC 7871 §7.2.1), as for
// NXDOMAIN. Before the fix it was the location's prefix.
func TestECSScopeOfNODATA(t *testing.T) {
	s := compile(t, zoneYAML, gslb.Options{})
	now := time.Now()
	for _, c := range []struct {
		name  string
		qtype uint16
		scope int
	}{
		{"geo.gslb.example.", dns.TypeA, 16}, // the answer depends on the client
		{"geo.gslb.example.", dns.TypeAAAA, 0},
		{"geo.gslb.example.", dns.TypeTXT, 0},
		{"nope.gslb.example.", dns.TypeA, 0},
	} {
		m := s.Exchange(query(c.name, c.qtype, 1232, "10.1.2.0/24"), src, now)
		if got := ecsScope(m); got != c.scope {
			t.Errorf("%s %s: scope %d, want %d", c.name, dns.TypeToString[c.qtype], got, c.scope)
		}
	}
}

// Defect 6: a query whose header counts more records than it holds (as
// ARCOUNT=1 with no additional record) gets FORMERR, over UDP and TCP,
// as BIND answers it (the question echoed, no OPT); before the fix it was
// answered. Bytes after the last record counted are ignored, as BIND
// ignores them.
func TestSectionCountsDisagree(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	good, _ := query("mail.gslb.example.", dns.TypeA, 0, "").Pack()
	edns, _ := query("mail.gslb.example.", dns.TypeA, 1232, "").Pack()
	set := func(b []byte, off int, v uint16) []byte {
		b = slices.Clone(b)
		binary.BigEndian.PutUint16(b[off:], v)
		return b
	}
	for _, c := range []struct {
		name  string
		pkt   []byte
		rcode int
	}{
		{"ARCOUNT=1, no record", set(good, 10, 1), dns.RcodeFormatError},
		{"ANCOUNT=1, no record", set(good, 6, 1), dns.RcodeFormatError},
		{"NSCOUNT=2, no record", set(good, 8, 2), dns.RcodeFormatError},
		{"ARCOUNT=2, one OPT", set(edns, 10, 2), dns.RcodeFormatError},
		{"counts agree", good, dns.RcodeSuccess},
		{"ARCOUNT=0 before an OPT (ignored)", set(edns, 10, 0), dns.RcodeSuccess},
	} {
		for _, network := range []string{"udp", "tcp"} {
			var r dns.Msg
			if err := r.Unpack(exchangeWire(t, network, addr, c.pkt)); err != nil {
				t.Fatalf("%s %s: %v", c.name, network, err)
			}
			if r.Rcode != c.rcode {
				t.Errorf("%s over %s: %s, want %s", c.name, network, dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
			}
			if c.rcode == dns.RcodeFormatError && (len(r.Answer) != 0 || len(r.Question) != 1) {
				t.Errorf("%s over %s: %v", c.name, network, &r)
			}
		}
	}
}
