package gslb

import (
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/health"
)

// The seed 004 semantics on a virtual clock: shallow failures (3 in a
// row) take the member down, deep failures (2 in a row) halve its
// weight, one synthetic failure zeroes it; each recovers on its own.
func TestLayered(t *testing.T) {
	now := time.Unix(1e6, 0)
	l := NewLayered([]LayerCheck{
		{Layer: Shallow, Thresholds: health.Thresholds{Healthy: 2, Unhealthy: 3}},
		{Layer: Deep, Thresholds: health.Thresholds{Healthy: 2, Unhealthy: 2}},
		{Layer: Synthetic, Thresholds: health.Thresholds{Healthy: 1, Unhealthy: 1}},
	})
	step := func(c int, ok bool) bool {
		now = now.Add(5 * time.Second)
		return l.Observe(c, ok, "", now)
	}
	check := func(what string, healthy bool, factor float64) {
		t.Helper()
		if l.Healthy() != healthy || l.Factor() != factor {
			t.Fatalf("%s: healthy %v factor %v, want %v %v", what, l.Healthy(), l.Factor(), healthy, factor)
		}
	}
	check("unknown", true, 1)
	for c := range 3 {
		step(c, true)
	}
	check("all pass", true, 1)
	if step(1, false) {
		t.Fatal("one deep failure changed the member")
	}
	check("deep failed once", true, 1)
	if !step(1, false) {
		t.Fatal("second deep failure did not change the member")
	}
	check("deep failed twice", true, 0.5)
	step(1, true)
	check("deep passed once", true, 0.5)
	step(1, true)
	check("deep passed twice", true, 1)
	step(2, false)
	check("synthetic failed", true, 0)
	step(1, false)
	step(1, false)
	check("synthetic and deep failing", true, 0)
	step(2, true)
	check("synthetic back, deep failing", true, 0.5)
	step(0, false)
	step(0, false)
	check("shallow failed twice", true, 0.5)
	step(0, false)
	check("shallow failed three times", false, 0.5)
	l.Fail("rollback", now)
	check("failed", false, 0.5)
	step(0, true)
	step(0, true)
	check("shallow back", true, 0.5)
}

const layeredYAML = `
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
healthChecks:
- {name: hc-shallow, type: TCP, checkIntervalSec: 5, tcpHealthCheck: {port: 443}}
- {name: hc-deep, type: HTTP, checkIntervalSec: 15, httpHealthCheck: {port: 80, requestPath: /deep}}
- {name: hc-synthetic, type: HTTP, checkIntervalSec: 60, httpHealthCheck: {port: 80, requestPath: /object}}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: w
    failback: {rampSec: 0}
    pool:
      members:
      - name: a
        address: 192.0.2.1
        healthChecks:
        - {name: hc-shallow, layer: SHALLOW}
        - {name: hc-deep, layer: DEEP}
        - {name: hc-synthetic, layer: SYNTHETIC}
      - {name: b, address: 192.0.2.2, healthCheck: hc-shallow}
`

// Layered checks steer answers: each probes at its own interval, a
// deep failure twice halves a's share (1/2 → 1/3), a synthetic failure
// zeroes it, and a zeroed a is still answered when b is down.
func TestLayeredChecksSteerAnswers(t *testing.T) {
	now := time.Unix(1e6, 0)
	s := virtualServer(t, layeredYAML, &now)
	intervals := map[string]time.Duration{}
	for tgt, refs := range s.targets {
		for _, r := range refs {
			if r.member == 0 {
				intervals[s.names[0].layers[0].Layer(r.check).String()] = tgt.Spec.Interval
			}
		}
	}
	if intervals["SHALLOW"] != 5*time.Second || intervals["DEEP"] != 15*time.Second || intervals["SYNTHETIC"] != 60*time.Second {
		t.Fatalf("probe intervals by layer: %v", intervals)
	}
	n := s.names[0]
	feed := func(member, check int, ok bool) {
		now = now.Add(time.Second)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.observeLocked(n, member, check, ok, "test", now)
	}
	near := func(got, want float64) bool { return got > want-0.05 && got < want+0.05 }
	if sh, _ := shareOf(s, "192.0.2.1", 4000); !near(sh, 0.5) {
		t.Fatalf("a's share at full weight: %.3f, want 0.5", sh)
	}
	feed(0, 1, false)
	feed(0, 1, false)
	if w, _ := s.Weight("w.gslb.example.", "a"); w != 0.5 {
		t.Fatalf("weight after two deep failures: %v, want 0.5", w)
	}
	sh, ttl := shareOf(s, "192.0.2.1", 4000)
	if !near(sh, 1.0/3) || ttl != 15 {
		t.Fatalf("a's share with deep failing: %.3f ttl %d, want 1/3 at the transition TTL", sh, ttl)
	}
	feed(0, 2, false)
	if sh, _ := shareOf(s, "192.0.2.1", 1000); sh != 0 {
		t.Fatalf("a's share with synthetic failing: %.3f, want 0", sh)
	}
	// b goes down (a fresh member's first failure counts at once): the
	// zeroed a is all that is left and is answered.
	feed(1, 0, false)
	if sh, _ := shareOf(s, "192.0.2.1", 200); sh != 1 {
		t.Fatalf("a's share with b down: %.3f, want 1", sh)
	}
	feed(1, 0, true)
	feed(1, 0, true)
	feed(0, 2, true)
	feed(0, 1, true)
	feed(0, 1, true)
	if sh, _ := shareOf(s, "192.0.2.1", 4000); !near(sh, 0.5) {
		t.Fatalf("a's share after recovery: %.3f, want 0.5", sh)
	}
}
