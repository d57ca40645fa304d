package gslb

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// virtualServer builds a Server on a virtual clock *now.
func virtualServer(t testing.TB, yaml string, now *time.Time) *Server {
	t.Helper()
	c, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("config:\n%v", err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(c, p, Options{Now: func() time.Time { return *now }, Rand: rand.NewPCG(3, 4)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const failbackYAML = `
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
      - {name: a, address: 192.0.2.1, healthCheck: hc}
      - {name: b, address: 192.0.2.2}
`

// shareOf asks n times and returns the share of answers that are ip and
// the TTL of the last answer.
func shareOf(s *Server, ip string, n int) (float64, uint32) {
	hits := 0
	var ttl uint32
	for range n {
		q := new(dns.Msg)
		q.SetQuestion("w.gslb.example.", dns.TypeA)
		r := s.respond(q, netip.MustParseAddr("127.0.0.1"), false, s.now())
		a := r.Answer[0].(*dns.A)
		if a.A.String() == ip {
			hits++
		}
		ttl = a.Hdr.Ttl
	}
	return float64(hits) / float64(n), ttl
}

// TestFailbackRamp drives member a down and back up through probe results
// on a virtual clock and checks its share at each ramp step, the TTLs,
// the unhealthy threshold applied during the ramp too, and the rollback
// on a passive error spike.
func TestFailbackRamp(t *testing.T) {
	now := t0
	s := virtualServer(t, failbackYAML, &now)
	n := s.names[0]
	probe := func(ok bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.observeLocked(n, 0, 0, ok, "test", now)
	}
	probe(true) // known healthy
	if sh, ttl := shareOf(s, "192.0.2.1", 4000); sh < 0.47 || sh > 0.53 || ttl != 30 {
		t.Fatalf("steady: share %.3f ttl %d, want 0.5 and 30", sh, ttl)
	}
	// 3 failures down (the DNS default), not 2.
	probe(false)
	probe(false)
	if sh, _ := shareOf(s, "192.0.2.1", 100); sh == 0 {
		t.Fatal("down after 2 failures; the DNS default is 3")
	}
	probe(false)
	if sh, ttl := shareOf(s, "192.0.2.1", 1000); sh != 0 || ttl != 15 {
		t.Fatalf("after 3 failures: share %.3f ttl %d, want 0 and transition TTL 15", sh, ttl)
	}
	now = now.Add(31 * time.Second)
	if _, ttl := shareOf(s, "192.0.2.1", 10); ttl != 30 {
		t.Fatalf("TTL %d 31 s after the change, want 30", ttl)
	}
	// 2 successes up; the ramp starts at the second.
	probe(true)
	if sh, _ := shareOf(s, "192.0.2.1", 100); sh != 0 {
		t.Fatal("up after 1 success; the DNS default is 2")
	}
	probe(true)
	up := now
	for _, step := range []struct {
		at   time.Duration
		frac float64
	}{{0, 0.10}, {80 * time.Second, 0.25}, {160 * time.Second, 0.50}, {240 * time.Second, 1}} {
		now = up.Add(step.at)
		want := step.frac / (step.frac + 1) // a at frac × 1 vs b at 1
		sh, ttl := shareOf(s, "192.0.2.1", 20000)
		wantTTL := uint32(15)
		if step.frac == 1 {
			wantTTL = 30 // the ramp is over and the last change is 240 s old
		}
		t.Logf("+%v: a's share %.3f (want %.3f), ttl %d", step.at, sh, want, ttl)
		if d := sh - want; d > 0.015 || d < -0.015 || ttl != wantTTL {
			t.Errorf("+%v: share %.3f ttl %d, want %.3f and %d", step.at, sh, ttl, want, wantTTL)
		}
	}
	// A new recovery, then a failed probe during the ramp: rolled back to 0.
	probe(false)
	probe(false)
	probe(false)
	now = now.Add(time.Minute)
	probe(true)
	probe(true)
	now = now.Add(90 * time.Second) // 25% step
	if sh, _ := shareOf(s, "192.0.2.1", 2000); sh < 0.1 {
		t.Fatalf("ramping share %.3f", sh)
	}
	// Failures during the ramp go through the same hysteresis as any
	// other: one or two (with a success between) change nothing...
	probe(false)
	probe(false)
	probe(true)
	probe(false)
	if sh, _ := shareOf(s, "192.0.2.1", 2000); sh < 0.1 {
		t.Fatalf("after isolated failures during the ramp: share %.3f, want the ramp's (a single failed probe must not take the member down)", sh)
	}
	// ...three in a row take the member down.
	probe(false)
	probe(false)
	if sh, ttl := shareOf(s, "192.0.2.1", 2000); sh != 0 || ttl != 15 {
		t.Fatalf("after 3 failures during the ramp: share %.3f ttl %d, want 0 and 15", sh, ttl)
	}
	probe(true)
	probe(true)
	if sh, _ := shareOf(s, "192.0.2.1", 4000); sh < 0.07 || sh > 0.11 {
		t.Fatalf("new ramp after rollback: share %.3f, want ~0.09 (10%% step)", sh)
	}
	// A passive error spike rolls back too.
	if !s.ObserveErrorRate("w.gslb.example.", "a", 0.5) {
		t.Fatal("ObserveErrorRate did not roll back")
	}
	if sh, _ := shareOf(s, "192.0.2.1", 1000); sh != 0 {
		t.Fatalf("after error spike: share %.3f, want 0", sh)
	}
}

// TestAllDown: with every member down, answers go to the fallback member,
// and with no fallback member to all members.
func TestAllDown(t *testing.T) {
	now := t0
	yaml := `
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
healthChecks:
- {name: hc, type: HTTP, httpHealthCheck: {port: 80}}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: w
    policy: FAILOVER
    pool:
      members:
      - {name: a, address: 192.0.2.1, healthCheck: hc}
      - {name: b, address: 192.0.2.2, priority: 1, healthCheck: hc, fallback: true}
  - name: v
    answerCount: 2
    pool:
      members:
      - {name: a, address: 192.0.2.1, healthCheck: hc}
      - {name: b, address: 192.0.2.2, healthCheck: hc}
`
	s := virtualServer(t, yaml, &now)
	s.mu.Lock()
	for _, n := range s.names {
		for i := range n.members {
			s.observeLocked(n, i, 0, false, "down", now)
		}
	}
	s.mu.Unlock()
	for _, tc := range []struct {
		qname string
		want  int
	}{{"w.gslb.example.", 1}, {"v.gslb.example.", 2}} {
		q := new(dns.Msg)
		q.SetQuestion(tc.qname, dns.TypeA)
		r := s.respond(q, netip.Addr{}, false, s.now())
		if len(r.Answer) != tc.want {
			t.Fatalf("%s: %v", tc.qname, r.Answer)
		}
		if tc.want == 1 && r.Answer[0].(*dns.A).A.String() != "192.0.2.2" {
			t.Errorf("%s: %v, want the fallback 192.0.2.2", tc.qname, r.Answer)
		}
	}
}

// TestObserveProbeExchange drives a member down through the exported,
// socket-free path the simulator uses: Checks, ObserveProbe and Exchange
// with an explicit virtual now.
func TestObserveProbeExchange(t *testing.T) {
	now := t0
	s := virtualServer(t, failbackYAML, &now)
	checks := s.Checks()
	if len(checks) != 1 || len(checks[0].Members) != 1 || checks[0].Members[0].Member != "a" ||
		checks[0].Members[0].Thresholds.Unhealthy != 3 || checks[0].Target.Addr != "192.0.2.1:80" {
		t.Fatalf("Checks() = %+v", checks)
	}
	if ms := s.Members(); len(ms) != 2 || ms[0].Member != "a" || !ms[0].Checked || ms[1].Checked || ms[0].TTL != 30*time.Second {
		t.Fatalf("Members() = %+v", ms)
	}
	for range 3 {
		s.ObserveProbe(checks[0].Target, false, "test", now)
	}
	q := new(dns.Msg)
	q.SetQuestion("w.gslb.example.", dns.TypeA)
	for range 50 {
		r := s.Exchange(q, netip.Addr{}, now)
		if a := r.Answer[0].(*dns.A); a.A.String() != "192.0.2.2" || a.Hdr.Ttl != 15 {
			t.Fatalf("answer %v, want b with the transition TTL", a)
		}
	}
	if r := s.Exchange(q, netip.Addr{}, now.Add(31*time.Second)); r.Answer[0].Header().Ttl != 30 {
		t.Fatalf("TTL %d 31 s later, want 30", r.Answer[0].Header().Ttl)
	}
}
