package gslb

import (
	"testing"
	"time"
)

// A reload builds a new Server; CarryState hands it the old one's member
// health, hysteresis and ramps, by member identity, so that a member that
// was down is not answered again at full weight until its first probe,
// and a member mid-ramp does not jump to 100% (issue 13, defect 2).
func TestCarryStateAcrossReload(t *testing.T) {
	now := t0
	old := virtualServer(t, failbackYAML, &now)
	probe := func(s *Server, ok bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.observeLocked(s.names[0], 0, 0, ok, "test", now)
	}
	probe(old, true)
	for range 3 {
		probe(old, false)
	}
	if sh, _ := shareOf(old, "192.0.2.1", 500); sh != 0 {
		t.Fatalf("old server: a's share %.3f after 3 failures, want 0", sh)
	}

	// Reloaded while a is down: still down, with the transition TTL.
	fresh := virtualServer(t, failbackYAML, &now)
	fresh.CarryState(old)
	if sh, ttl := shareOf(fresh, "192.0.2.1", 1000); sh != 0 || ttl != 15 {
		t.Fatalf("after the reload: a's share %.3f ttl %d, want 0 and 15 (carried down)", sh, ttl)
	}
	// The hysteresis counters came along: one success is not enough
	// (2 needed), two are, and the ramp starts at 10%.
	probe(fresh, true)
	if sh, _ := shareOf(fresh, "192.0.2.1", 200); sh != 0 {
		t.Fatal("up after 1 success on the reloaded server")
	}
	probe(fresh, true)
	now = now.Add(90 * time.Second) // the 25% step
	want := 0.25 / 1.25

	// Reloaded mid-ramp: the ramp continues, it does not jump to 100%.
	again := virtualServer(t, failbackYAML, &now)
	again.CarryState(fresh)
	if sh, _ := shareOf(again, "192.0.2.1", 20000); sh < want-0.02 || sh > want+0.02 {
		t.Fatalf("reloaded mid-ramp: a's share %.3f, want %.3f (the 25%% step)", sh, want)
	}
	// A member the new config renames starts afresh (unknown).
	renamed := virtualServer(t, `
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
healthChecks:
- {name: hc, type: HTTP, httpHealthCheck: {port: 80}}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: w
    pool:
      members:
      - {name: a2, address: 192.0.2.1, healthCheck: hc}
      - {name: b, address: 192.0.2.2}
`, &now)
	renamed.CarryState(old)
	if sh, _ := shareOf(renamed, "192.0.2.1", 2000); sh < 0.4 {
		t.Fatalf("a renamed member: share %.3f, want it treated as new", sh)
	}
}
