package gslb_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// FuzzLatencyPlacement: any ECS client of a LATENCY name placed by
// CIDR, country, continent or coordinates gets one member, with a scope
// no longer than the address.
func FuzzLatencyPlacement(f *testing.F) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := compile(f, latencyYAML(latencyDB(f)), gslb.Options{Now: func() time.Time { return now }})
	for _, seed := range []string{"10.1.2.3", "198.51.100.7", "203.0.113.9", "100.64.0.1", "2001:db8::1"} {
		f.Add(netip.MustParseAddr(seed).AsSlice(), uint8(24))
	}
	f.Fuzz(func(t *testing.T, ip []byte, bits uint8) {
		a, ok := netip.AddrFromSlice(ip)
		if !ok || int(bits) > a.BitLen() {
			return
		}
		pfx := netip.PrefixFrom(a, int(bits)).Masked()
		for _, name := range []string{"lat", "pull", "geo3"} {
			r := s.Exchange(query(name+".gslb.example.", dns.TypeA, 1232, pfx.String()), netip.Addr{}, now)
			if r == nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("%s ECS %s: %v", name, pfx, r)
			}
			if sc := ecsScope(r); sc < 0 || sc > a.BitLen() {
				t.Fatalf("%s ECS %s: scope %d", name, pfx, sc)
			}
		}
	})
}

// Placing a client by the database costs a bounded number of
// allocations per query (the lookup's network and address slice, the
// record's codes and coordinates: 8 when written), never a ladder or a
// map per query.
func TestLatencyAllocs(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := compile(t, latencyYAML(latencyDB(t)), gslb.Options{Now: func() time.Time { return now }})
	cidr := query("lat.gslb.example.", dns.TypeA, 1232, "10.1.2.0/24")
	db := query("lat.gslb.example.", dns.TypeA, 1232, "198.51.100.0/24")
	base := testing.AllocsPerRun(200, func() { s.Exchange(cidr, netip.Addr{}, now) })
	geo := testing.AllocsPerRun(200, func() { s.Exchange(db, netip.Addr{}, now) })
	t.Logf("allocations per query: %.0f placed by CIDR, %.0f by the database", base, geo)
	if geo > base+10 {
		t.Fatalf("placing by the database allocates %.0f more per query than by CIDR", geo-base)
	}
}
