package gslb_test

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// FuzzHandler: any packet that unpacks is answered without a panic, and
// the reply (if any) unpacks and fits the UDP limit.
func FuzzHandler(f *testing.F) {
	s := compile(f, zoneYAML, gslb.Options{})
	h := s.Handler()
	fuzzHandler(f, h, []*dns.Msg{
		query("w.gslb.example.", dns.TypeA, 0, ""),
		query("geo.gslb.example.", dns.TypeA, 1232, "10.2.0.0/24"),
		query("many.gslb.example.", dns.TypeAAAA, 0, ""),
		query("www.gslb.example.", dns.TypeANY, 4096, "2001:db8::/56"),
		query("nope.example.", dns.TypeA, 0, ""),
	}, false, func(t *testing.T, r, out *dns.Msg, tcp bool) {
		if out.RecursionAvailable {
			t.Fatal("RA set")
		}
	})
}

// BenchmarkServeDNS measures one weighted query through the handler
// (answer, ECS-free, pack into a pooled buffer).
func BenchmarkServeDNS(b *testing.B) {
	for _, bc := range []struct {
		name string
		q    *dns.Msg
	}{
		{"weighted", query("w.gslb.example.", dns.TypeA, 0, "")},
		{"weighted-edns", query("w.gslb.example.", dns.TypeA, 1232, "")},
		{"geo-ecs", query("geo.gslb.example.", dns.TypeA, 1232, "10.1.2.0/24")},
		// As unpacked from the wire: the OPT has its RDLENGTH, so the
		// ECS ADDRESS length is checked (RFC 7871 §6).
		{"geo-ecs-wire", unpacked(query("geo.gslb.example.", dns.TypeA, 1232, "10.1.2.0/24"))},
		{"cname-chain", query("www.gslb.example.", dns.TypeA, 0, "")},
		{"nxdomain", query("nope.gslb.example.", dns.TypeA, 0, "")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := compile(b, zoneYAML, gslb.Options{})
			h := s.Handler()
			w := &fakeWriter{remote: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeDNS(w, bc.q)
			}
		})
	}
}

// BenchmarkAnswerUDP measures what the UDP loop does for one datagram
// besides the system calls: unpack, answer, pack into the worker's
// buffer.
func BenchmarkAnswerUDP(b *testing.B) {
	for _, bc := range []struct {
		name string
		q    *dns.Msg
	}{
		{"weighted", query("w.gslb.example.", dns.TypeA, 0, "")},
		{"weighted-edns", query("w.gslb.example.", dns.TypeA, 1232, "")},
		{"nxdomain", query("nope.gslb.example.", dns.TypeA, 0, "")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := compile(b, zoneYAML, gslb.Options{Observe: func(gslb.Query) {}})
			pkt, err := bc.q.Pack()
			if err != nil {
				b.Fatal(err)
			}
			from := netip.MustParseAddrPort("127.0.0.1:5353")
			out := make([]byte, 0, 1024)
			b.ReportAllocs()
			for b.Loop() {
				if r := s.AnswerUDP(pkt, from, out); r == nil {
					b.Fatal("no reply")
				} else {
					out = r[:0]
				}
			}
		})
	}
}

// unpacked returns m as a server receives it: packed, then unpacked.
func unpacked(m *dns.Msg) *dns.Msg {
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil {
		panic(err)
	}
	return r
}

// fuzzHandler runs h on each fuzz input that unpacks, over UDP or TCP,
// and checks what every reply must be (it unpacks, a UDP reply fits
// MaxUDPSize), then hands the query and the reply to check (nil: none).
// The seeds are packed and added with tcp as seedTCP.
func fuzzHandler(f *testing.F, h dns.Handler, seeds []*dns.Msg, seedTCP bool, check func(t *testing.T, r, out *dns.Msg, tcp bool)) {
	for _, q := range seeds {
		b, err := q.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, seedTCP)
	}
	f.Fuzz(func(t *testing.T, data []byte, tcp bool) {
		r := new(dns.Msg)
		if err := r.Unpack(data); err != nil {
			return
		}
		w := &fakeWriter{remote: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}}
		if r.IsTsig() != nil {
			// As dns.Server reports a signature it cannot verify: the
			// fuzzer cannot sign with the zone's keys. (Without this the
			// handler took every fuzzed TSIG for verified and signed the
			// reply with the query's algorithm, here ".", which miekg
			// packs into a TSIG it cannot unpack.)
			w.tsig = dns.ErrSig
		}
		if tcp {
			w.remote = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}
		}
		h.ServeDNS(w, r)
		if w.msg == nil {
			return
		}
		out := new(dns.Msg)
		if err := out.Unpack(w.msg); err != nil {
			t.Fatalf("reply does not unpack: %v", err)
		}
		if !tcp && len(w.msg) > gslb.MaxUDPSize {
			t.Fatalf("UDP reply of %d bytes", len(w.msg))
		}
		if check != nil {
			check(t, r, out, tcp)
		}
	})
}

// FuzzRejectShort: DecorateReader leaves a message alone unless its
// header counts more than miekg/dns unpacks from it, and then makes the
// unpack fail, so dns.Server answers FORMERR; the UDP loop answers the
// same message FORMERR too.
func FuzzRejectShort(f *testing.F) {
	s := compile(f, zoneYAML, gslb.Options{})
	for _, q := range []*dns.Msg{query("w.gslb.example.", dns.TypeA, 0, ""), query("geo.gslb.example.", dns.TypeA, 1232, "10.2.0.0/24")} {
		b, err := q.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		short := bytes.Clone(b)
		short[11]++ // one more additional record than there is
		f.Add(short)
	}
	from := netip.MustParseAddrPort("127.0.0.1:5353")
	f.Fuzz(func(t *testing.T, pkt []byte) {
		out := gslb.RejectShort(bytes.Clone(pkt))
		var m dns.Msg
		err := m.Unpack(pkt)
		if len(out) == len(pkt) {
			if !bytes.Equal(out, pkt) {
				t.Fatal("message changed")
			}
			return
		}
		if err != nil || len(out) != len(pkt)+1 {
			t.Fatalf("a message that does not unpack (%v) was changed", err)
		}
		if m.Unpack(out) == nil {
			t.Fatal("the rejected message unpacks")
		}
		if m.Response {
			return // ignored by both
		}
		var r dns.Msg
		if reply := s.AnswerUDP(pkt, from, nil); reply != nil && (r.Unpack(reply) != nil || r.Rcode != dns.RcodeFormatError) {
			t.Fatalf("UDP loop answered %v", &r)
		}
	})
}
