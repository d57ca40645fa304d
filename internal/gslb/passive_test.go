package gslb

import (
	"net/netip"

	"github.com/miekg/dns"

	"testing"
	"time"
)

func TestLatencyBuckets(t *testing.T) {
	prev := -1
	for _, d := range []time.Duration{0, time.Millisecond, 1100 * time.Microsecond, 2 * time.Millisecond, 400 * time.Millisecond, time.Minute} {
		b := latencyBucket(d)
		if b < prev {
			t.Fatalf("bucket of %v is %d, below %d", d, b, prev)
		}
		prev = b
		if b < LatencyBuckets-1 && (d < bucketLower(b) || d >= bucketLower(b+1)) {
			t.Fatalf("%v in bucket %d [%v, %v)", d, b, bucketLower(b), bucketLower(b+1))
		}
	}
	if b := latencyBucket(time.Hour); b != LatencyBuckets-1 {
		t.Fatalf("an hour is in bucket %d", b)
	}
	for i := 1; i < LatencyBuckets-1; i++ {
		lo, hi := bucketLower(i), bucketLower(i+1)
		if w := float64(hi-lo) / float64(lo); w > 0.26 {
			t.Fatalf("bucket %d [%v, %v) is %.0f%% wide", i, lo, hi, 100*w)
		}
	}
}

// traffic records one second of n requests on c, every 1/errEvery of
// them failing, each taking lat.
func traffic(c *PassiveCounters, n, errEvery int, lat time.Duration) {
	for i := range n {
		c.Record(lat, errEvery > 0 && i%errEvery == 0)
	}
}

// The window aggregation and decision on a virtual clock: 100 requests
// a second, sampled each second into a 30 s window. 1 % errors is fine,
// 5 % halves the weight once enough of the window shows it, and the
// member recovers once the bad seconds have left the window.
func TestPassiveWindowErrors(t *testing.T) {
	now := time.Unix(1e6, 0)
	var c PassiveCounters
	w := PassiveWindow{Window: 30 * time.Second}
	pol := PassivePolicy{Window: 30 * time.Second, MaxErrorRate: 0.015, MaxP95: 400 * time.Millisecond, MinRequests: 100}
	deg := false
	tick := func(errEvery int) PassiveStats {
		traffic(&c, 100, errEvery, 20*time.Millisecond)
		now = now.Add(time.Second)
		w.Add(now, c.Sample())
		st := w.Stats()
		deg = pol.Degraded(st, deg)
		return st
	}
	w.Add(now, c.Sample())
	for range 60 {
		st := tick(100) // 1 %
		if deg {
			t.Fatalf("degraded at %.3f errors", st.ErrorRate)
		}
	}
	if st := tick(100); st.Requests != 3000 || st.ErrorRate != 0.01 {
		t.Fatalf("window stats %+v, want 3000 requests at 1%%", st)
	}
	var after int
	for i := 1; !deg; i++ {
		tick(20) // 5 %
		after = i
		if i > 30 {
			t.Fatal("5% errors never degraded the member")
		}
	}
	// 1 % + k·4 %/30 > 1.5 % from the 4th bad second.
	if after != 4 {
		t.Fatalf("degraded after %d s of 5%% errors, want 4", after)
	}
	var back int
	for i := 1; deg; i++ {
		tick(0)
		back = i
	}
	if back < 20 || back > 30 {
		t.Fatalf("recovered after %d good seconds, want once most 5%% seconds left the 30 s window", back)
	}
}

func TestPassiveWindowLatency(t *testing.T) {
	now := time.Unix(1e6, 0)
	var c PassiveCounters
	w := PassiveWindow{Window: 30 * time.Second}
	pol := PassivePolicy{Window: 30 * time.Second, MaxErrorRate: 0.015, MaxP95: 400 * time.Millisecond, MinRequests: 100}
	w.Add(now, c.Sample())
	// 90 fast requests and 10 at 450 ms a second: p95 is slow.
	for range 30 {
		traffic(&c, 90, 0, 30*time.Millisecond)
		traffic(&c, 10, 0, 450*time.Millisecond)
		now = now.Add(time.Second)
		w.Add(now, c.Sample())
	}
	st := w.Stats()
	if st.P95 < 393*time.Millisecond || st.P95 > 459*time.Millisecond || !pol.Degraded(st, false) {
		t.Fatalf("p95 %v (degraded %v), want about 450 ms and degraded", st.P95, pol.Degraded(st, false))
	}
	// 97 fast and 3 slow: p95 is fast.
	for range 31 {
		traffic(&c, 97, 0, 30*time.Millisecond)
		traffic(&c, 3, 0, 450*time.Millisecond)
		now = now.Add(time.Second)
		w.Add(now, c.Sample())
	}
	if st := w.Stats(); st.P95 > 40*time.Millisecond || pol.Degraded(st, true) {
		t.Fatalf("p95 %v, want about 30 ms and not degraded", st.P95)
	}
	// Too few requests keep the decision; none clear it.
	few := PassiveStats{Requests: 10, ErrorRate: 0}
	if !pol.Degraded(few, true) || pol.Degraded(few, false) || pol.Degraded(PassiveStats{}, true) {
		t.Fatal("small or empty windows decided")
	}
	// A restarted counter restarts the window.
	w.Add(now.Add(time.Second), PassiveSample{})
	if st := w.Stats(); st.Requests != 0 {
		t.Fatalf("after a counter reset: %+v", st)
	}
}

const passiveYAML = `
healthChecks:
- {name: hc, type: HTTP, httpHealthCheck: {port: 80}}
networkEndpointGroups:
- {name: neg-us, zone: us-east1-b, defaultPort: 80, endpoints: [{ipAddress: 10.0.0.1}]}
- {name: neg-eu, zone: europe-west3-a, defaultPort: 80, endpoints: [{ipAddress: 10.0.1.1}]}
backendServices:
- {name: web, backends: [{group: neg-us}, {group: neg-eu}]}
urlMaps:
- {name: um, defaultService: web}
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
- {name: web-us, address: "127.0.0.21:8080", protocol: HTTP, urlMap: um, region: us-east1}
- {name: web-eu, address: "127.0.0.22:8080", protocol: HTTP, urlMap: um, region: europe-west3}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: www
    policy: GEO
    backendService: web
    failback: {rampSec: 240}
    locations:
    - {cidr: 198.51.100.0/24, region: us-east1}
  - name: pool
    pool:
      members:
      - {name: us, address: 127.0.0.21}
      - {name: other, address: 192.0.2.9}
  - name: off
    backendService: web
    passive: {enable: false}
`

// A frontend whose backend answers 503 to 5 % of requests halves its
// region's DNS weight, for the backendService name and for a pool
// member at the frontend's address; US clients then get the EU frontend
// for about half their queries.
func TestPassiveHalvesFrontendWeight(t *testing.T) {
	now := time.Unix(1e6, 0)
	s := virtualServer(t, passiveYAML, &now)
	if got := PassiveFrontends(s.plan); len(got) != 2 {
		t.Fatalf("PassiveFrontends = %v, want web-us and web-eu", got)
	}
	var us, eu PassiveCounters
	sample := func() {
		s.ObservePassive(map[string]PassiveSample{"web-us": us.Sample(), "web-eu": eu.Sample()})
	}
	sample()
	for range 30 {
		traffic(&us, 200, 0, 10*time.Millisecond)
		traffic(&eu, 200, 0, 10*time.Millisecond)
		now = now.Add(time.Second)
		sample()
	}
	weights := func() (float64, float64, float64) {
		a, _ := s.Weight("www.gslb.example.", "web-us")
		b, _ := s.Weight("pool.gslb.example.", "us")
		c, _ := s.Weight("off.gslb.example.", "web-us")
		return a, b, c
	}
	if a, b, c := weights(); a != 1 || b != 1 || c != 1 {
		t.Fatalf("weights before errors: %v %v %v", a, b, c)
	}
	for range 30 {
		traffic(&us, 200, 20, 10*time.Millisecond) // 5 % 503s
		traffic(&eu, 200, 0, 10*time.Millisecond)
		now = now.Add(time.Second)
		sample()
	}
	if a, b, c := weights(); a != 0.5 || b != 0.5 || c != 1 {
		t.Fatalf("weights after 5%% errors: www %v, pool %v, passive off %v; want 0.5 0.5 1", a, b, c)
	}
	if w, _ := s.Weight("www.gslb.example.", "web-eu"); w != 1 {
		t.Fatalf("EU weight %v, want 1", w)
	}
	// A US client's GEO ladder is [us-east1], [europe-west3]: the halved
	// US tier takes half the queries.
	usShare := 0
	for range 2000 {
		q := new(dns.Msg)
		q.SetQuestion("www.gslb.example.", dns.TypeA)
		r := s.respond(q, netip.MustParseAddr("198.51.100.7"), false, s.now())
		if a := r.Answer[0].(*dns.A).A.String(); a == "127.0.0.21" {
			usShare++
		}
	}
	if f := float64(usShare) / 2000; f < 0.45 || f > 0.55 {
		t.Fatalf("US share for a US client: %.3f, want 0.5", f)
	}
	// Clean traffic: the weight comes back once the window is clean.
	for range 31 {
		traffic(&us, 200, 0, 10*time.Millisecond)
		traffic(&eu, 200, 0, 10*time.Millisecond)
		now = now.Add(time.Second)
		sample()
	}
	if a, b, _ := weights(); a != 1 || b != 1 {
		t.Fatalf("weights after recovery: %v %v", a, b)
	}
}

// During a failback ramp, an error spike in the passive window rolls
// the member back to the start of its ramp.
func TestPassiveSpikeRollsBackRamp(t *testing.T) {
	now := time.Unix(1e6, 0)
	s := virtualServer(t, passiveYAML, &now)
	var us PassiveCounters
	n := s.names[0]
	s.mu.Lock()
	s.setLocked(n, 0, false, now)
	now = now.Add(time.Minute)
	s.setLocked(n, 0, true, now) // recovered: ramping
	s.mu.Unlock()
	s.ObservePassive(map[string]PassiveSample{"web-us": us.Sample()})
	now = now.Add(90 * time.Second)
	if w, _ := s.Weight("www.gslb.example.", "web-us"); w != 0.25 {
		t.Fatalf("weight 90 s into the ramp: %v, want 0.25", w)
	}
	traffic(&us, 200, 2, 10*time.Millisecond) // 50 % errors
	s.ObservePassive(map[string]PassiveSample{"web-us": us.Sample()})
	if w, _ := s.Weight("www.gslb.example.", "web-us"); w != 0.05 {
		t.Fatalf("weight after the spike: %v, want 0.05 (first step, halved)", w)
	}
}
