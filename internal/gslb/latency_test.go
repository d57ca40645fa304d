package gslb_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// latencyYAML has LATENCY names over Tokyo, Hong Kong, Virginia and
// Frankfurt, and a LATENCY and a GEO name over Tokyo, Virginia and
// Frankfurt for comparison.
// Seoul's RTTs (built-in table): Tokyo 19 ms, Hong Kong 32, Virginia
// 152, Frankfurt 220; Mumbai's: Tokyo 126, Frankfurt 354, though
// Frankfurt is nearer by great circle (6564 km to 6723).
func latencyYAML(db string) string {
	members := func(tokBias, hkgBias string) string {
		hkg := ""
		if hkgBias != "none" {
			hkg = fmt.Sprintf("\n      - {name: hkg, address: 192.0.2.2, region: asia-east2, healthCheck: hc%s}", hkgBias)
		}
		return fmt.Sprintf(`    pool:
      members:
      - {name: tok, address: 192.0.2.1, region: asia-northeast1, healthCheck: hc%s}%s
      - {name: iad, address: 192.0.2.3, region: us-east4, healthCheck: hc}
      - {name: fra, address: 192.0.2.4, region: europe-west3, healthCheck: hc}
    geoDatabase: %s
    locations:
    - {cidr: 10.1.0.0/16, region: asia-northeast3}
    - {country: KR, region: asia-northeast3}
`, tokBias, hkg, db)
	}
	return header + `
healthChecks:
- {name: hc, type: TCP, tcpHealthCheck: {port: 9}}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: lat
    policy: LATENCY
` + members("", "") + `  - name: pull
    policy: LATENCY
` + members("", ", bias: 50") + `  - name: push
    policy: LATENCY
` + members(", bias: -99", "") + `  - name: lat3
    policy: LATENCY
` + members("", "none") + `  - name: geo3
    policy: GEO
` + members("", "none")
}

// latencyDB places 198.51.100.0/24 in Mumbai and 203.0.113.0/24 in
// Korea (country only).
func latencyDB(t testing.TB) string {
	return writeMMDB(t, map[string]mmdbtype.Map{
		"198.51.100.0/24": countryRec("IN", "AS", 19.08, 72.88),
		"203.0.113.0/24":  countryRec("KR", "AS", 0, 0),
	})
}

func TestLatencyPolicy(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := compile(t, latencyYAML(latencyDB(t)), gslb.Options{Now: func() time.Time { return now }})
	ask := func(name, ecs string) string {
		r := s.Exchange(query(name+".gslb.example.", dns.TypeA, 1232, ecs), netip.Addr{}, now)
		if a := addrs(r); len(a) == 1 {
			return a[0]
		}
		t.Fatalf("%s ECS %s: %v", name, ecs, r)
		return ""
	}
	fail := func(addr string) {
		for _, c := range s.Checks() {
			if c.Target.Addr == addr+":9" {
				s.ObserveProbe(c.Target, false, "down", now)
			}
		}
	}
	const seoul, mumbai, korea = "10.1.2.0/24", "198.51.100.0/24", "203.0.113.0/24"
	for _, tc := range []struct {
		test, name, ecs string
		down            []string
		want            string
	}{
		{"nearest by RTT", "lat", seoul, nil, "192.0.2.1"},
		{"country entry", "lat", korea, nil, "192.0.2.1"},
		{"positive bias pulls", "pull", seoul, nil, "192.0.2.2"},                // 32 × 0.5 < 19
		{"negative bias pushes", "push", seoul, nil, "192.0.2.2"},               // 19 × 1.99 > 32
		{"coordinates: nearest known region", "lat3", mumbai, nil, "192.0.2.1"}, // asia-south1: Tokyo 126 ms
		{"GEO: nearest member region by distance", "geo3", mumbai, nil, "192.0.2.4"},
		{"coordinates with Hong Kong", "lat", mumbai, nil, "192.0.2.2"}, // 99 ms
		{"spill to the next RTT", "lat", seoul, []string{"192.0.2.1"}, "192.0.2.2"},
		{"spill past two", "lat", seoul, []string{"192.0.2.1", "192.0.2.2"}, "192.0.2.3"},
		{"spill with bias", "pull", seoul, []string{"192.0.2.2"}, "192.0.2.1"},
	} {
		t.Run(tc.test, func(t *testing.T) {
			s = compile(t, latencyYAML(latencyDB(t)), gslb.Options{Now: func() time.Time { return now }})
			for _, a := range tc.down {
				fail(a)
			}
			for range 20 {
				if got := ask(tc.name, tc.ecs); got != tc.want {
					t.Fatalf("%s ECS %s, %v down: %s, want %s", tc.name, tc.ecs, tc.down, got, tc.want)
				}
			}
		})
	}
	// A client placed nowhere is answered over every member.
	s = compile(t, latencyYAML(latencyDB(t)), gslb.Options{Now: func() time.Time { return now }})
	seen := map[string]bool{}
	for range 80 {
		seen[ask("lat", "100.64.0.0/24")] = true
	}
	if len(seen) != 4 {
		t.Fatalf("unplaced client: %v, want every member", seen)
	}
}
