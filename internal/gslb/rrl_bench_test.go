package gslb_test

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// BenchmarkAnswerUDPRateLimit is BenchmarkAnswerUDP with response rate
// limiting off and on (metrics observed in both, as spillway serve
// does). "sent": queries from 4096 client /24s in turn under a rate none
// reaches, the cost of counting an answer that goes out; "limited": one
// client over its rate, every reply dropped (the cost of the flood's
// queries once limited). Besides ns/op it reports cpu-ns/op, the CPU
// time of the benchmark's thread per op, which a busy machine does not
// inflate. Compare with benchstat -col /rrl.
func BenchmarkAnswerUDPRateLimit(b *testing.B) {
	const clients = 4096
	var from [clients]netip.AddrPort
	for i := range from {
		from[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 5353)
	}
	for _, q := range []struct {
		name string
		m    *dns.Msg
	}{
		{"weighted", query("w.gslb.example.", dns.TypeA, 1232, "")},
		{"nxdomain", query("nope.gslb.example.", dns.TypeA, 1232, "")},
	} {
		pkt, err := q.m.Pack()
		if err != nil {
			b.Fatal(err)
		}
		for _, bc := range []struct {
			name, yaml string
			one        bool // one client
		}{
			{"q=" + q.name + "/path=sent/rrl=off", zoneYAML, false},
			{"q=" + q.name + "/path=sent/rrl=on", zoneYAML + "spillway:\n  dnsResponseRateLimit: {responsesPerSecond: 1000000}\n", false},
			{"q=" + q.name + "/path=limited/rrl=on", zoneYAML + "spillway:\n  dnsResponseRateLimit: {responsesPerSecond: 1, slip: 0}\n", true},
		} {
			b.Run(bc.name, func(b *testing.B) {
				s := compile(b, bc.yaml, gslb.Options{Observe: func(gslb.Query) {}})
				out := make([]byte, 0, 1024)
				b.ReportAllocs()
				i := 0
				cpu := onThreadCPU(func() {
					for b.Loop() {
						c := from[i%clients]
						if bc.one {
							c = from[0]
						}
						i++
						if r := s.AnswerUDP(pkt, c, out); r != nil {
							out = r[:0]
						}
					}
				})
				if cpu > 0 {
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(i), "cpu-ns/op")
				}
			})
		}
	}
}

// BenchmarkFloodLatency measures what a random-subdomain flood from one
// prefix (127.0.0.1, floodRate queries per second of new names under the
// zone, open loop) does to other clients (victimLatency) on real
// loopback sockets: each iteration is one query of theirs, and the median
// and 99th percentile of their round trips are reported (p50-µs,
// p99-µs), with the share lost (no reply within 500 ms). The zone is
// unsigned or signed (the flood and the client then set DO, so every
// flood query costs a fresh signature unless capped); rrl is off, RRL
// (20 per second per prefix), or RRL and the denial signature cap (200
// per second). Numbers, not a pass/fail: see docs/performance.md.
func BenchmarkFloodLatency(b *testing.B) {
	const floodRate = 20000
	signed, _ := signedYAML(b)
	const rrlOn = "  dnsResponseRateLimit: {responsesPerSecond: 20}\n"
	const capOn = "  dnsMaxDenialSignaturesPerSecond: 200\n"
	for _, bc := range []struct {
		name, yaml string
		do         bool
	}{
		{"zone=unsigned/limits=none", zoneYAML, false},
		{"zone=unsigned/limits=rrl", zoneYAML + "spillway:\n" + rrlOn, false},
		{"zone=signed/limits=none", signed, true},
		{"zone=signed/limits=rrl", signed + "spillway:\n" + rrlOn, true},
		{"zone=signed/limits=rrl+cap", signed + "spillway:\n" + rrlOn + capOn, true},
		{"zone=signed/limits=cap", signed + "spillway:\n" + capOn, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, addr := start(b, bc.yaml, gslb.Options{})
			stop := floodNames(b, addr, floodRate, bc.do)
			time.Sleep(200 * time.Millisecond) // the flood under way
			victimLatency(b, addr, bc.do)
			stop()
		})
	}
}

// floodNames sends rate queries per second for new names under
// gslb.example. from 127.0.0.1 to addr until the returned stop is called
// (replies are not read); stop reports the rate achieved (flood-qps).
func floodNames(b *testing.B, addr string, rate int, do bool) (stop func()) {
	b.Helper()
	conn, err := net.Dial("udp", addr)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	began := time.Now()
	sent := 0
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var buf []byte
		for n := 0; ; {
			select {
			case <-done:
				return
			case <-t.C:
			}
			for range rate / 1000 {
				n++
				var q *dns.Msg
				if name := fmt.Sprintf("f%d.gslb.example.", n); do {
					q = doQuery(name, dns.TypeA, false)
				} else {
					q = query(name, dns.TypeA, 1232, "")
				}
				if buf, err = q.PackBuffer(buf[:cap(buf)]); err == nil {
					_, _ = conn.Write(buf)
					sent++
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		_ = conn.Close()
		b.ReportMetric(float64(sent)/time.Since(began).Seconds(), "flood-qps")
	}
}

// victimLatency runs b's iterations as queries from other clients,
// 128 of them (127.0.1.1, 127.0.2.1, …, each its own /24) in turn, so
// that each asks its question a few times a second, as a resolver
// behind a cache does, not a flood of its own; it reports the median
// and 99th percentile of their round trips and the share lost.
func victimLatency(b *testing.B, addr string, do bool) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		b.Fatal(err)
	}
	var conns []*dns.Conn
	for i := range 128 {
		uc, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, byte(1+i), 1)}, raddr)
		if err != nil {
			b.Fatal(err)
		}
		co := &dns.Conn{Conn: uc, UDPSize: 65535}
		defer co.Close()
		conns = append(conns, co)
	}
	q := query("mail.gslb.example.", dns.TypeA, 1232, "")
	if do {
		q = doQuery("mail.gslb.example.", dns.TypeA, false)
	}
	var rtts []time.Duration
	lost := 0
	for b.Loop() {
		q.Id++
		co := conns[int(q.Id)%len(conns)]
		t0 := time.Now()
		if err := co.WriteMsg(q); err != nil {
			b.Fatal(err)
		}
		_ = co.SetReadDeadline(t0.Add(500 * time.Millisecond))
		for {
			r, err := co.ReadMsg()
			if err != nil {
				lost++
				break
			}
			if r.Id == q.Id {
				rtts = append(rtts, time.Since(t0))
				break
			}
		}
	}
	slices.Sort(rtts)
	if len(rtts) > 0 {
		b.ReportMetric(float64(rtts[len(rtts)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(rtts[len(rtts)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(100*float64(lost)/float64(lost+len(rtts)), "lost-%")
	b.ReportMetric(0, "ns/op")
}
