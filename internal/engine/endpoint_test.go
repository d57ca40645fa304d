package engine_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
)

// lbBuild writes a config with one SPRAY_TO_REGION backend service (extra
// backend-service fields in bsExtra, indented by 2) over one zonal NEG per
// members entry, all in us-east1, every endpoint healthy.
func lbBuild(t testing.TB, bsExtra string, members ...int) (*plan.Plan, *control.State) {
	t.Helper()
	var gs []group
	for i, n := range members {
		gs = append(gs, group{zone: "us-east1-" + string(rune('b'+i)), members: n})
	}
	return buildWith(t, "  loadBalancingAlgorithm: SPRAY_TO_REGION\n", bsExtra, gs...)
}

// probe sets an endpoint's health.
func probe(st *control.State, e *plan.Endpoint, ok bool) {
	for range 3 {
		st.ObserveProbe(e.ID, ok, "", t0)
	}
}

// rng is a xorshift64 generator for reproducible tests.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*r = rng(x)
	return x
}

var policies = []string{"ROUND_ROBIN", "RANDOM", "LEAST_REQUEST", "RING_HASH", "MAGLEV", "WEIGHTED_ROUND_ROBIN"}

func TestPoliciesPickOnlyHealthyEndpoints(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			p, st := lbBuild(t, "  localityLbPolicy: "+pol+"\n", 5, 5)
			bs := p.Services[0].Backends
			down := map[*plan.Endpoint]bool{bs[0].Endpoints[1]: true, bs[0].Endpoints[3]: true, bs[1].Endpoints[0]: true}
			for e := range down {
				probe(st, e, false)
			}
			v := engine.NewView(st)
			seen := map[*plan.Endpoint]int{}
			r := rng(1)
			for i := range 4000 {
				var d engine.Decision
				switch i % 3 {
				case 0:
					d = v.Pick(0, -1, r.next())
				case 1:
					d = v.PickKey(0, -1, r.next(), r.next(), true)
				default:
					d = v.PickExcept(0, engine.Client{Region: -1}, r.next(), bs[0].Endpoints[0])
				}
				if d.Status != 0 {
					t.Fatalf("status %d %s", d.Status, d.Reason)
				}
				if down[d.Endpoint] || d.Endpoint.Group != d.Backend.Group {
					t.Fatalf("picked %s (down=%v) in backend %s", d.Endpoint.Addr, down[d.Endpoint], d.Backend.Group.Name)
				}
				seen[d.Endpoint]++
			}
			if len(seen) != 7 {
				t.Errorf("picked %d distinct healthy endpoints, want all 7", len(seen))
			}
		})
	}
}

func TestPolicyDefaultsAndAffinityCompile(t *testing.T) {
	for _, tc := range []struct {
		extra    string
		policy   string
		affinity plan.Affinity
		ring     int
	}{
		{"", "ROUND_ROBIN", plan.Affinity{}, 1024},
		{"  sessionAffinity: NONE\n", "ROUND_ROBIN", plan.Affinity{}, 1024},
		{"  sessionAffinity: CLIENT_IP\n", "MAGLEV", plan.Affinity{Kind: plan.AffinityClientIP}, 1024},
		{"  sessionAffinity: CLIENT_IP\n  localityLbPolicy: RING_HASH\n  consistentHash: {minimumRingSize: 4096}\n",
			"RING_HASH", plan.Affinity{Kind: plan.AffinityClientIP}, 4096},
		{"  sessionAffinity: GENERATED_COOKIE\n  affinityCookieTtlSec: 60\n", "MAGLEV",
			plan.Affinity{Kind: plan.AffinityGeneratedCookie, Cookie: "GCLB", CookiePath: "/", CookieTTL: 60e9}, 1024},
		{"  sessionAffinity: HTTP_COOKIE\n  affinityCookieTtlSec: 60\n  consistentHash: {httpCookie: {name: sid, path: /app, ttl: {seconds: 5}}}\n", "MAGLEV",
			plan.Affinity{Kind: plan.AffinityHTTPCookie, Cookie: "sid", CookiePath: "/app", CookieTTL: 5e9}, 1024},
		{"  sessionAffinity: HTTP_COOKIE\n  affinityCookieTtlSec: 60\n", "MAGLEV",
			plan.Affinity{Kind: plan.AffinityHTTPCookie, Cookie: "GCLB", CookiePath: "/", CookieTTL: 60e9}, 1024},
		{"  sessionAffinity: HEADER_FIELD\n  consistentHash: {httpHeaderName: x-user-id}\n", "MAGLEV",
			plan.Affinity{Kind: plan.AffinityHeaderField, Header: "X-User-Id"}, 1024},
		{"  sessionAffinity: HEADER_FIELD\n  localityLbPolicy: ROUND_ROBIN\n  consistentHash: {httpHeaderName: X-User}\n", "ROUND_ROBIN",
			plan.Affinity{Kind: plan.AffinityHeaderField, Header: "X-User"}, 1024},
	} {
		p, _ := lbBuild(t, tc.extra, 1)
		s := p.Services[0]
		if s.LocalityLbPolicy != tc.policy || s.Affinity != tc.affinity || s.MinRingSize != tc.ring {
			t.Errorf("%s: got %s %+v ring %d, want %s %+v ring %d", tc.extra, s.LocalityLbPolicy, s.Affinity, s.MinRingSize, tc.policy, tc.affinity, tc.ring)
		}
	}
}

// fractions picks n times and returns each endpoint's share.
func fractions(v *engine.View, n int, r *rng) map[string]float64 {
	out := map[string]float64{}
	for range n {
		out[v.Pick(0, -1, r.next()).Endpoint.Addr] += 1 / float64(n)
	}
	return out
}

func TestRandomIsUniform(t *testing.T) {
	_, st := lbBuild(t, "  localityLbPolicy: RANDOM\n", 4)
	r := rng(7)
	f := fractions(engine.NewView(st), 40000, &r)
	for addr, x := range f {
		if math.Abs(x-0.25) > 0.015 {
			t.Errorf("%s: %.3f, want 0.25", addr, x)
		}
	}
	if len(f) != 4 {
		t.Errorf("%d endpoints picked, want 4", len(f))
	}
}

func TestLeastRequestPrefersFewerInflight(t *testing.T) {
	p, st := lbBuild(t, "  localityLbPolicy: LEAST_REQUEST\n", 4)
	v := engine.NewView(st)
	in := v.Inflight()
	eps := p.Services[0].Backends[0].Endpoints
	r := rng(11)
	// All idle: uniform.
	for addr, x := range fractions(v, 40000, &r) {
		if math.Abs(x-0.25) > 0.015 {
			t.Errorf("idle: %s %.3f, want 0.25", addr, x)
		}
	}
	// In flight 0, 1, 2, 3: endpoint i wins a pair of two distinct random
	// endpoints when the other is busier: (3-i)/6.
	for i, e := range eps {
		in.Add(e, int64(i))
	}
	// The counters outlive the view: the next view shares them.
	v = engine.NextView(st, v)
	if v.Inflight() != in {
		t.Fatal("the next view does not share the in-flight counters")
	}
	f := fractions(v, 60000, &r)
	for i, e := range eps {
		want := float64(3-i) / 6
		if math.Abs(f[e.Addr]-want) > 0.015 {
			t.Errorf("busy %d: %.3f, want %.3f", i, f[e.Addr], want)
		}
	}
	for i, e := range eps {
		in.Add(e, -int64(i))
		if n := in.Load(e); n != 0 {
			t.Errorf("endpoint %d: %d in flight after release", i, n)
		}
	}
	// Endpoints of another plan are ignored.
	p2, _ := lbBuild(t, "", 4)
	in.Add(p2.Endpoints[0], 5)
	if in.Load(eps[0]) != 0 || in.Load(p2.Endpoints[0]) != 0 {
		t.Error("counted an endpoint of another plan")
	}
	var nilIn *engine.Inflight
	nilIn.Add(eps[0], 1)
	nilIn.Done(eps[0])
}

func TestSameKeySameEndpoint(t *testing.T) {
	for _, pol := range []string{"RING_HASH", "MAGLEV"} {
		t.Run(pol, func(t *testing.T) {
			_, st := lbBuild(t, "  localityLbPolicy: "+pol+"\n", 6, 6)
			v := engine.NewView(st)
			r := rng(3)
			zones := map[string]int{}
			for k := range 50 {
				key := engine.HashKey(fmt.Sprintf("user-%d", k))
				first := v.PickKey(0, -1, r.next(), key, true)
				zones[first.Backend.Group.Zone]++
				for range 1000 {
					d := v.PickKey(0, -1, r.next(), key, true)
					if d.Endpoint != first.Endpoint || d.Backend != first.Backend {
						t.Fatalf("key %d: %s then %s", k, first.Endpoint.Addr, d.Endpoint.Addr)
					}
				}
				if d := engine.NewView(st).PickKey(0, -1, r.next(), key, true); d.Endpoint != first.Endpoint {
					t.Fatalf("key %d: %s, after a rebuild %s", k, first.Endpoint.Addr, d.Endpoint.Addr)
				}
			}
			if len(zones) != 2 {
				t.Errorf("keys landed in zones %v, want both", zones)
			}
		})
	}
}

// keyMap maps n keys to endpoint addresses.
func keyMap(v *engine.View, n int) []string {
	out := make([]string, n)
	for k := range out {
		out[k] = v.PickKey(0, -1, 0, engine.HashKey(fmt.Sprintf("key-%d", k)), true).Endpoint.Addr
	}
	return out
}

func moved(a, b []string) float64 {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return float64(n) / float64(len(a))
}

func TestConsistentHashMovesAboutOneNth(t *testing.T) {
	const N, keys = 10, 10000
	for _, pol := range []string{"RING_HASH", "MAGLEV"} {
		t.Run(pol, func(t *testing.T) {
			p, st := lbBuild(t, "  localityLbPolicy: "+pol+"\n", N)
			before := keyMap(engine.NewView(st), keys)
			gone := p.Services[0].Backends[0].Endpoints[3]
			probe(st, gone, false)
			after := keyMap(engine.NewView(st), keys)
			f := moved(before, after)
			t.Logf("%s: removing 1 of %d endpoints moved %.4f of %d keys", pol, N, f, keys)
			if f < 0.5/N || f > 2.0/N {
				t.Errorf("moved %.4f of keys, want about 1/%d", f, N)
			}
			for i := range after {
				if after[i] == gone.Addr {
					t.Fatalf("key %d still on the removed endpoint", i)
				}
			}
			probe(st, gone, true)
			if f := moved(before, keyMap(engine.NewView(st), keys)); f != 0 {
				t.Errorf("adding the endpoint back left %.4f of keys moved", f)
			}
		})
	}
}

func TestRingSizeRespectsMinimum(t *testing.T) {
	for _, tc := range []struct {
		min, members, lo, hi int
	}{{0, 10, 1024, 1030}, {4096, 3, 4096, 4098}, {4, 10, 10, 10}, {1, 1, 1, 1}} {
		extra := "  localityLbPolicy: RING_HASH\n"
		if tc.min > 0 {
			extra += fmt.Sprintf("  consistentHash: {minimumRingSize: %d}\n", tc.min)
		}
		_, st := lbBuild(t, extra, tc.members)
		if n := engine.RingLen(engine.NewView(st), 0, 0); n < tc.lo || n > tc.hi {
			t.Errorf("minimumRingSize %d, %d endpoints: ring of %d, want %d..%d", tc.min, tc.members, n, tc.lo, tc.hi)
		}
	}
	_, st := lbBuild(t, "  localityLbPolicy: MAGLEV\n", 10)
	if n := engine.TableLen(engine.NewView(st), 0, 0); n != engine.MaglevTableSize {
		t.Errorf("Maglev table of %d, want %d", n, engine.MaglevTableSize)
	}
}

func TestMaglevTableIsBalanced(t *testing.T) {
	_, st := lbBuild(t, "  localityLbPolicy: MAGLEV\n", 7)
	f := keyMap(engine.NewView(st), 70000)
	count := map[string]int{}
	for _, a := range f {
		count[a]++
	}
	for a, n := range count {
		if n < 9000 || n > 11000 {
			t.Errorf("%s: %d of 70000 keys, want about 10000", a, n)
		}
	}
}

func TestPickExceptAvoidsWithEveryPolicy(t *testing.T) {
	for _, pol := range policies {
		_, st := lbBuild(t, "  localityLbPolicy: "+pol+"\n", 3)
		v := engine.NewView(st)
		r := rng(5)
		for range 300 {
			u := r.next()
			d := v.Pick(0, -1, u)
			if e := v.PickExcept(0, engine.Client{Region: -1}, u, d.Endpoint); e.Endpoint == d.Endpoint {
				t.Fatalf("%s: retry picked the avoided endpoint %s", pol, d.Endpoint.Addr)
			}
		}
	}
	// One healthy endpoint: the retry goes back to it.
	p, st := lbBuild(t, "  localityLbPolicy: MAGLEV\n", 2)
	probe(st, p.Endpoints[1], false)
	d := engine.NewView(st).PickExcept(0, engine.Client{Region: -1}, 1, p.Endpoints[0])
	if d.Endpoint != p.Endpoints[0] {
		t.Errorf("got %v, want the only healthy endpoint", d.Endpoint)
	}
}

func TestPickKeyDoesNotAllocate(t *testing.T) {
	for _, pol := range policies {
		_, st := lbBuild(t, "  localityLbPolicy: "+pol+"\n", 8, 8)
		v := engine.NewView(st)
		r := rng(9)
		if n := testing.AllocsPerRun(1000, func() {
			_ = v.PickKey(0, 0, r.next(), r.next(), true)
			_ = v.PickKey(0, -1, r.next(), 0, false)
		}); n != 0 {
			t.Errorf("%s: %.1f allocations per pick", pol, n)
		}
	}
}

func benchPickKey(b *testing.B, pol string) {
	_, st := lbBuild(b, "  localityLbPolicy: "+pol+"\n", 20, 20, 20)
	v := engine.NewView(st)
	r := rng(13)
	b.ReportAllocs()
	for b.Loop() {
		x := r.next()
		if d := v.PickKey(0, 0, x, x*0x9e3779b97f4a7c15, true); d.Endpoint == nil {
			b.Fatal("no endpoint")
		}
	}
}

func BenchmarkPickKeyMaglev(b *testing.B)       { benchPickKey(b, "MAGLEV") }
func BenchmarkPickKeyRingHash(b *testing.B)     { benchPickKey(b, "RING_HASH") }
func BenchmarkPickKeyLeastRequest(b *testing.B) { benchPickKey(b, "LEAST_REQUEST") }
func BenchmarkPickKeyRoundRobin(b *testing.B)   { benchPickKey(b, "ROUND_ROBIN") }

// BenchmarkNewViewMaglev is the cost of a view rebuild with three 20-
// endpoint MAGLEV backends (three 65,537-slot tables).
func BenchmarkNewViewMaglev(b *testing.B) {
	_, st := lbBuild(b, "  localityLbPolicy: MAGLEV\n", 20, 20, 20)
	b.ReportAllocs()
	for b.Loop() {
		engine.NewView(st)
	}
}

// BenchmarkNextViewMaglev is the same rebuild when no backend's healthy
// endpoints changed: the tables are reused.
func BenchmarkNextViewMaglev(b *testing.B) {
	_, st := lbBuild(b, "  localityLbPolicy: MAGLEV\n", 20, 20, 20)
	v := engine.NewView(st)
	b.ReportAllocs()
	for b.Loop() {
		v = engine.NextView(st, v)
	}
}
