package rrl

import (
	"hash/maphash"
	"net/netip"
	"testing"
	"time"
)

// BenchmarkCheck is the limiter alone: "spread", a response for one of
// 65536 client /24s in turn (each under its rate, the table full: the
// lookups of a busy server); "flood", one client over its rate (every
// response limited); "exempt10", a client past ten exempt prefixes.
// "parallel" is spread from every P at once (set locks).
func BenchmarkCheck(b *testing.B) {
	const clients = 1 << 16
	addrs := make([]netip.Addr, clients)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1})
	}
	var exempt []netip.Prefix
	for i := range 10 {
		exempt = append(exempt, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16, byte(i), 0}), 24))
	}
	tick := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, bc := range []struct {
		name   string
		cfg    Config
		client func(i int) netip.Addr
	}{
		{"spread", Config{Rates: rates(1000)}, func(i int) netip.Addr { return addrs[i%clients] }},
		{"flood", Config{Rates: rates(10)}, func(int) netip.Addr { return addrs[0] }},
		{"exempt10", Config{Rates: rates(1000), Exempt: exempt}, func(i int) netip.Addr { return addrs[i%clients] }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := New(bc.cfg, tick, maphash.MakeSeed())
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Check(bc.client(i), Answer, 1, "www.gslb.example.", tick.Add(time.Duration(i)*time.Microsecond))
				i++
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		l := New(Config{Rates: rates(1000)}, tick, maphash.MakeSeed())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				l.Check(addrs[i%clients], Answer, 1, "www.gslb.example.", tick.Add(time.Duration(i)*time.Microsecond))
				i++
			}
		})
	})
}
