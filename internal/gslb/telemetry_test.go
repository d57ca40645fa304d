package gslb_test

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// statsKey is one counter of gslb.Stats, by label.
type statsKey struct{ zone, qtype, rcode, transport string }

// snapshot returns st's counters by label.
func snapshot(st *gslb.Stats) map[statsKey]uint64 {
	out := map[statsKey]uint64{}
	st.Each(func(zone string, q, r, tr int, n uint64) {
		out[statsKey{zone, gslb.QtypeLabel(q), gslb.RcodeLabel(r), gslb.TransportLabel(tr)}] += n
	})
	return out
}

func TestStatsCountByZoneTypeRcodeTransport(t *testing.T) {
	udp := netip.MustParseAddrPort("127.0.0.1:5353")
	tcp := &fakeWriter{remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}}
	for _, tc := range []struct {
		name  string
		q     *dns.Msg
		tcp   bool
		wantK statsKey
	}{
		{"weighted udp", query("w.gslb.example.", dns.TypeA, 0, ""), false, statsKey{"gslb.example.", "A", "NOERROR", "udp"}},
		{"weighted tcp", query("w.gslb.example.", dns.TypeA, 0, ""), true, statsKey{"gslb.example.", "A", "NOERROR", "tcp"}},
		{"srv", query("_sip._udp.gslb.example.", dns.TypeSRV, 0, ""), false, statsKey{"gslb.example.", "SRV", "NOERROR", "udp"}},
		{"nxdomain", query("nope.gslb.example.", dns.TypeAAAA, 0, ""), false, statsKey{"gslb.example.", "AAAA", "NXDOMAIN", "udp"}},
		{"unlisted type", query("mail.gslb.example.", dns.TypeHINFO, 0, ""), true, statsKey{"gslb.example.", "other", "NOERROR", "tcp"}},
		{"outside the zones", query("www.example.org.", dns.TypeA, 0, ""), false, statsKey{"other", "A", "REFUSED", "udp"}},
		{"badvers", func() *dns.Msg {
			m := query("w.gslb.example.", dns.TypeA, 1232, "")
			m.IsEdns0().SetVersion(1)
			return m
		}(), false, statsKey{"other", "A", "BADVERS", "udp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := gslb.NewStats()
			s := compile(t, zoneYAML, gslb.Options{Stats: st})
			if tc.tcp {
				s.Handler().ServeDNS(tcp, tc.q)
			} else {
				pkt, err := tc.q.Pack()
				if err != nil {
					t.Fatal(err)
				}
				if s.AnswerUDP(pkt, udp, nil) == nil {
					t.Fatal("no reply")
				}
			}
			got := snapshot(st)
			if len(got) != 1 || got[tc.wantK] != 1 {
				t.Fatalf("counters %v, want one %v", got, tc.wantK)
			}
		})
	}
}

// A query that does not unpack is counted FORMERR under "other".
func TestStatsCountMalformed(t *testing.T) {
	st := gslb.NewStats()
	s := compile(t, zoneYAML, gslb.Options{Stats: st})
	pkt, err := query("w.gslb.example.", dns.TypeA, 0, "").Pack()
	if err != nil {
		t.Fatal(err)
	}
	pkt[5] = 2 // QDCOUNT 2, one question
	if s.AnswerUDP(pkt, netip.MustParseAddrPort("127.0.0.1:5353"), nil) == nil {
		t.Fatal("no reply")
	}
	if got := snapshot(st); got[statsKey{"other", "other", "FORMERR", "udp"}] != 1 || len(got) != 1 {
		t.Fatalf("counters %v, want one other/other/FORMERR/udp", got)
	}
}

// The counters outlive Server generations: a second Server built with
// the same Stats adds to the same zone's counters.
func TestStatsOutliveGenerations(t *testing.T) {
	st := gslb.NewStats()
	pkt, err := query("mail.gslb.example.", dns.TypeA, 0, "").Pack()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s := compile(t, zoneYAML, gslb.Options{Stats: st})
		s.AnswerUDP(pkt, netip.MustParseAddrPort("127.0.0.1:5353"), nil)
	}
	if got := snapshot(st); got[statsKey{"gslb.example.", "A", "NOERROR", "udp"}] != 2 || len(got) != 1 {
		t.Fatalf("counters %v, want 2 under one series", got)
	}
}

func TestStatsSignatureCache(t *testing.T) {
	y, _ := signedYAML(t)
	st := gslb.NewStats()
	s := compile(t, y, gslb.Options{Stats: st})
	now := time.Now()
	s.Exchange(doQuery("mail.gslb.example.", dns.TypeA, false), src, now)
	hits, misses := st.SignatureCache()
	if misses == 0 || hits != 0 {
		t.Fatalf("first query: hits %d misses %d, want only misses", hits, misses)
	}
	s.Exchange(doQuery("mail.gslb.example.", dns.TypeA, false), src, now)
	hits2, misses2 := st.SignatureCache()
	if hits2 == 0 || misses2 != misses {
		t.Fatalf("same query again: hits %d misses %d (before %d), want hits and no new miss", hits2, misses2, misses)
	}
}

// Counting, and a Tap that wants nothing, cost no allocation on the UDP
// path: a query answered with Stats, Observe and the Tap allocates no
// more than one answered without them (which makes no Query). A Query
// moved to the heap by the telemetry hooks would show here; an escape
// both share shows in BenchmarkAnswerUDP's allocs/op.
func TestStatsNoAllocations(t *testing.T) {
	for _, name := range []string{"mail.gslb.example.", "w.gslb.example.", "nope.gslb.example."} {
		pkt, err := query(name, dns.TypeA, 0, "").Pack()
		if err != nil {
			t.Fatal(err)
		}
		from := netip.MustParseAddrPort("127.0.0.1:5353")
		allocs := func(opts gslb.Options) float64 {
			out, answerUDP := make([]byte, 0, 1024), compile(t, zoneYAML, opts).UDPAnswerer()
			return testing.AllocsPerRun(200, func() { out = answerUDP(pkt, from, out)[:0] })
		}
		off := allocs(gslb.Options{})
		on := allocs(gslb.Options{Stats: gslb.NewStats(), Tap: offTap{}, Observe: func(gslb.Query) {}})
		if on > off {
			t.Errorf("%s: allocations per query: %v with telemetry, %v without", name, on, off)
		}
	}
}

// recordingTap keeps copies of every exchange.
type recordingTap struct {
	mu  sync.Mutex
	got []gslb.Exchange
}

func (r *recordingTap) Want() bool { return true }
func (r *recordingTap) Tapped(e *gslb.Exchange) {
	c := *e
	c.Query = append([]byte(nil), e.Query...)
	c.Response = append([]byte(nil), e.Response...)
	r.mu.Lock()
	r.got = append(r.got, c)
	r.mu.Unlock()
}

// wait returns the n-th tapped exchange. The server writes its answer
// before it hands the exchange to the Tap, so a client can hold the
// answer before the Tap has it: wait (bounded) instead of assuming.
func (r *recordingTap) wait(t *testing.T, n int) gslb.Exchange {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		got := len(r.got)
		if got >= n {
			e := r.got[n-1]
			r.mu.Unlock()
			return e
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the Tap has %d exchanges, want %d", got, n)
		}
	}
}

// The Tap sees queries over real UDP and TCP sockets with the wire
// messages, the client and the GSLB decision.
func TestTapOverSockets(t *testing.T) {
	tap := &recordingTap{}
	_, addr := start(t, zoneYAML, gslb.Options{Tap: tap})
	for i, network := range []string{"udp", "tcp"} {
		r := exchange(t, network, addr, query("w.gslb.example.", dns.TypeA, 1232, ""))
		e := tap.wait(t, i+1)
		if e.TCP != (network == "tcp") || !e.Client.Addr().IsLoopback() || e.Client.Port() == 0 {
			t.Fatalf("%s: tapped TCP=%v client %v", network, e.TCP, e.Client)
		}
		var q dns.Msg
		if err := q.Unpack(e.Query); err != nil || q.Question[0].Name != "w.gslb.example." {
			t.Fatalf("%s: tapped query %v (%v)", network, q.Question, err)
		}
		var resp dns.Msg
		if err := resp.Unpack(e.Response); err != nil || resp.Id != r.Id || len(resp.Answer) != len(r.Answer) {
			t.Fatalf("%s: tapped response %v (%v), client got %v", network, &resp, err, r)
		}
		if e.Zone != "gslb.example." || e.Name != "w.gslb.example." || e.Member == "" || e.Latency < 0 {
			t.Fatalf("%s: tapped zone %q name %q member %q latency %v", network, e.Zone, e.Name, e.Member, e.Latency)
		}
	}
}

// offTap is a Tap that wants nothing: the cost of the hook when the
// query log and dnstap are off.
type offTap struct{}

func (offTap) Want() bool            { return false }
func (offTap) Tapped(*gslb.Exchange) {}

// BenchmarkAnswerUDPTelemetry measures the UDP answer step without and
// with the telemetry counters (Stats, and a Tap that wants nothing, as
// spillway serve runs with the query log and dnstap off).
func BenchmarkAnswerUDPTelemetry(b *testing.B) {
	pkt, err := query("w.gslb.example.", dns.TypeA, 0, "").Pack()
	if err != nil {
		b.Fatal(err)
	}
	from := netip.MustParseAddrPort("127.0.0.1:5353")
	for _, bc := range []struct {
		name string
		opts gslb.Options
	}{
		{"telemetry=off", gslb.Options{Observe: func(gslb.Query) {}}},
		{"telemetry=on", gslb.Options{Observe: func(gslb.Query) {}, Stats: gslb.NewStats(), Tap: offTap{}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := compile(b, zoneYAML, bc.opts)
			out := make([]byte, 0, 1024)
			b.ReportAllocs()
			for b.Loop() {
				out = s.AnswerUDP(pkt, from, out)[:0]
			}
		})
	}
}
