package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/netcut"
	"github.com/spillwaylb/spillway/internal/probe"
	"github.com/spillwaylb/spillway/internal/serve"
)

func TestOwnersRendezvous(t *testing.T) {
	live := []string{"a", "b", "c", "d"}
	count := map[string]int{}
	moved := 0
	const n = 2000
	for i := range n {
		key := fmt.Sprintf("10.0.%d.%d:80/hc", i/250, i%250)
		o := fleet.Owners(key, live, 2)
		if len(o) != 2 || o[0] == o[1] {
			t.Fatalf("%s: owners %v, want 2 distinct", key, o)
		}
		if again := fleet.Owners(key, []string{"d", "c", "b", "a"}, 2); !slices.Equal(o, again) {
			t.Fatalf("%s: owners depend on the order of the live list: %v and %v", key, o, again)
		}
		for _, x := range o {
			count[x]++
		}
		// d leaves: keys d did not own keep their owners.
		after := fleet.Owners(key, []string{"a", "b", "c"}, 2)
		if !slices.Contains(o, "d") && !slices.Equal(o, after) {
			t.Fatalf("%s: owners %v changed to %v when d (not an owner) left", key, o, after)
		}
		if !slices.Equal(o, after) {
			moved++
		}
	}
	// Each instance owns about n*2/4 = 1000.
	for _, x := range live {
		if count[x] < 850 || count[x] > 1150 {
			t.Errorf("instance %s owns %d of %d keys, want about 1000: %v", x, count[x], n, count)
		}
	}
	t.Logf("ownership of %d keys × 2 over 4 instances: %v; %d keys moved when d left", n, count, moved)
	if got := fleet.Owners("k", []string{"a"}, 2); !slices.Equal(got, []string{"a"}) {
		t.Errorf("one live instance: owners %v, want [a]", got)
	}
}

func TestProbeOwnersByRole(t *testing.T) {
	members := []fleet.Member{
		{Name: "edge-a", Region: "us-east1", Role: "EDGE"},
		{Name: "edge-b", Region: "europe-west1", Role: "EDGE"},
		{Name: "reg-us-1", Region: "us-east1", Role: "REGIONAL"},
		{Name: "reg-us-2", Region: "us-east1", Role: "REGIONAL"},
		{Name: "reg-eu", Region: "europe-west1", Role: "REGIONAL"},
		{Name: "all-asia", Region: "asia-east1"},
	}
	names := func(ms []fleet.Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		name    string
		target  probe.SharedTarget
		members []fleet.Member
		k       int
		want    []string // sorted
	}{
		{"no regional layer: every instance, as in one layer", probe.SharedTarget{Key: "10.0.0.1:80/hc", Region: "us-east1"}, members, 6, names(members)},
		{"behind a regional layer: the region's own instances", probe.SharedTarget{Key: "10.0.0.1:80/hc", Region: "us-east1", Layered: true}, members, 2, []string{"reg-us-1", "reg-us-2"}},
		{"one local instance, then one elsewhere that is not an edge", probe.SharedTarget{Key: "10.0.0.1:80/hc", Region: "europe-west1", Layered: true}, members, 2, nil},
		{"never an edge, however many are asked for", probe.SharedTarget{Key: "10.0.0.1:80/hc", Region: "europe-west1", Layered: true}, members, 6, []string{"all-asia", "reg-eu", "reg-us-1", "reg-us-2"}},
		{"only edges live: nobody", probe.SharedTarget{Key: "10.0.0.1:80/hc", Region: "us-east1", Layered: true}, members[:2], 2, []string{}},
	} {
		got := fleet.ProbeOwners(c.target, c.members, c.k)
		if c.want == nil { // one local, then one of the others
			if len(got) != 2 || got[0] != "reg-eu" || !slices.Contains([]string{"reg-us-1", "reg-us-2", "all-asia"}, got[1]) {
				t.Errorf("%s: %v, want reg-eu then one of reg-us-1, reg-us-2, all-asia", c.name, got)
			}
			continue
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Region-local ownership moves as little as Owners does: a third
	// us-east1 regional instance takes over only the keys it now ranks
	// first for, and an edge that joins moves nothing.
	moved := 0
	for i := range 500 {
		tg := probe.SharedTarget{Key: fmt.Sprintf("10.1.%d.%d:80/hc", i/250, i%250), Region: "us-east1", Layered: true}
		before := fleet.ProbeOwners(tg, members, 2)
		withEdge := fleet.ProbeOwners(tg, append(slices.Clone(members), fleet.Member{Name: "edge-c", Region: "us-east1", Role: "EDGE"}), 2)
		if !slices.Equal(before, withEdge) {
			t.Fatalf("%s: an edge joining moved %v to %v", tg.Key, before, withEdge)
		}
		after := fleet.ProbeOwners(tg, append(slices.Clone(members), fleet.Member{Name: "reg-us-3", Region: "us-east1", Role: "REGIONAL"}), 2)
		if !slices.Equal(before, after) {
			moved++
			if !slices.Contains(after, "reg-us-3") {
				t.Fatalf("%s: %v to %v without the new instance", tg.Key, before, after)
			}
		}
	}
	// 2 slots of 3 instances: the new one takes one slot of about 2/3
	// of the keys.
	if moved < 250 || moved > 420 {
		t.Errorf("%d of 500 keys moved when a third local instance joined, want about 333", moved)
	}
}

func TestCombine(t *testing.T) {
	ok := fleet.Verdict{OK: true, Detail: "HTTP 200"}
	bad := fleet.Verdict{OK: false, Detail: "HTTP 500"}
	owners := []string{"a", "b"}
	for _, c := range []struct {
		name     string
		verdicts map[string]fleet.Verdict
		want     string // "healthy", "unhealthy: DETAIL", "none"
	}{
		{"nobody published", nil, "none"},
		{"only a non-prober published", map[string]fleet.Verdict{"c": bad}, "none"},
		{"one bad vantage point", map[string]fleet.Verdict{"a": bad, "b": ok}, "healthy"},
		{"one bad vantage point, the other's ok first", map[string]fleet.Verdict{"a": ok, "b": bad}, "healthy"},
		{"the only prober that published says unhealthy", map[string]fleet.Verdict{"b": bad}, "unhealthy: b: HTTP 500"},
		{"both say unhealthy", map[string]fleet.Verdict{"a": bad, "b": bad, "c": ok}, "unhealthy: a: HTTP 500; b: HTTP 500"},
	} {
		v, has := fleet.Combine(owners, c.verdicts)
		got := "none"
		switch {
		case has && v.OK:
			got = "healthy"
		case has:
			got = "unhealthy: " + v.Detail
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// hcBackend is a backend whose /healthz answers 200 or, once failing is
// set, 500, and counts the probes it gets.
type hcBackend struct {
	addr     string
	failing  atomic.Bool
	probes   atomic.Int64
	requests atomic.Int64 // requests other than health checks
}

// newHCBackend listens on ip (a loopback address of its own, so /health
// tells the backends apart).
func newHCBackend(t *testing.T, ip string) *hcBackend {
	t.Helper()
	b := &hcBackend{}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s (a loopback address; Linux routes 127.0.0.0/8 to lo): %v", ip, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			b.probes.Add(1)
			if b.failing.Load() {
				http.Error(w, "failing", http.StatusInternalServerError)
				return
			}
		}
		if r.URL.Path != "/healthz" {
			b.requests.Add(1)
		}
		fmt.Fprint(w, "ok")
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	b.addr = ln.Addr().String()
	return b
}

func shardedConfig(bs []*hcBackend) string {
	var eps strings.Builder
	for _, b := range bs {
		host, port, _ := net.SplitHostPort(b.addr)
		fmt.Fprintf(&eps, "  - {ipAddress: %s, port: %s}\n", host, port)
	}
	return `healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 200, timeoutMs: 150, healthyThreshold: 2, unhealthyThreshold: 3, httpHealthCheck: {requestPath: /healthz}}
networkEndpointGroups:
- name: neg
  zone: us-east1-b
  endpoints:
` + eps.String() + `backendServices:
- name: bs
  healthChecks: [hc]
  backends:
  - {group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}
urlMaps:
- {name: um, defaultService: bs}
frontends:
- ` + httpFrontend + "\n"
}

// sharded is one in-process fleet instance with sharded probing: a real
// serve.Server, its Agent and its ProbeShare, on one etcd client.
type sharded struct {
	name  string
	srv   *serve.Server
	share *fleet.ProbeShare
	cl    *clientv3.Client
	cut   *netcut.Forwarder // its connection to etcd
	stop  func()
}

func startSharded(t *testing.T, e *fleettest.Etcd, name string, probers int) *sharded {
	t.Helper()
	cut := newCutter(t, e.ClientAddr)
	cl := dialVia(t, cut)
	st := fleet.NewStore(cl, "")
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("in", name)
	cfg, status, err := fleet.Start(context.Background(), st, "", 2*time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	share, err := fleet.NewProbeShare(st, fleet.ProbeShareOptions{
		Instance: name, Probers: probers, Logger: log, LeaseTTL: 2 * time.Second,
		CheckInterval: 200 * time.Millisecond, CheckTimeout: checkTimeout,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(cfg, serve.Options{Admin: "127.0.0.1:0", Logger: log, WatchInterval: -1, ProbeShare: share})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := fleet.NewAgent(st, srv, fleet.AgentOptions{
		Instance: name, Region: "us-east1", Initial: status, Logger: log,
		CheckInterval: 200 * time.Millisecond, CheckTimeout: checkTimeout,
		LeaseTTL: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- srv.Run(ctx) }()
	go func() { done <- ag.Run(ctx) }()
	go func() { done <- share.Run(ctx, srv) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(stop)
	select {
	case <-srv.Ready():
	case <-time.After(eventuallyBound):
		t.Fatalf("server not ready after %v", eventuallyBound)
	}
	return &sharded{name: name, srv: srv, share: share, cl: cl, cut: cut, stop: stop}
}

// endpointState is the health state of the endpoint at addr in the
// instance's /health report.
func endpointState(s *sharded, addr string) string {
	for _, svc := range s.srv.Health().Services {
		for _, b := range svc.Backends {
			for _, e := range b.Endpoints {
				if e.IPAddress == addr {
					return e.HealthState
				}
			}
		}
	}
	return "absent"
}

// ownership checks that every key is owned by exactly the instances
// Owners names among live, and nobody else.
func ownership(keys []string, live []*sharded, k int) (bool, string) {
	names := []string{}
	for _, s := range live {
		names = append(names, s.name)
	}
	var b strings.Builder
	ok := true
	for _, s := range live {
		st := s.share.Stats()
		var want []string
		for _, key := range keys {
			if slices.Contains(fleet.Owners(key, names, k), s.name) {
				want = append(want, key)
			}
		}
		if !st.Connected || !slices.Equal(st.Owned, want) {
			ok = false
		}
		fmt.Fprintf(&b, "%s connected=%v owns %v (want %v); ", s.name, st.Connected, st.Owned, want)
	}
	return ok, b.String()
}

// TestShardedProbing: three instances share six endpoints' probing, two
// probers each; an endpoint that fails is seen unhealthy by the instance
// that does not probe it; an instance that dies without leaving (its
// client cut, so its leases expire) has its targets taken over within
// the lease TTL and an interval; a recovered endpoint is healthy again
// everywhere; a push that adds an endpoint has it divided and probed.
func TestShardedProbing(t *testing.T) {
	// Not parallel: see TestMain.
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	var bs []*hcBackend
	var keys []string
	for i := range 6 {
		b := newHCBackend(t, fmt.Sprintf("127.0.0.%d", 10+i))
		bs = append(bs, b)
		keys = append(keys, b.addr+"/hc")
	}
	slices.Sort(keys)
	push(t, st, shardedConfig(bs))
	ins := []*sharded{startSharded(t, e, "i1", 2), startSharded(t, e, "i2", 2), startSharded(t, e, "i3", 2)}

	start := time.Now()
	eventually(t, "each target owned by exactly 2 of 3 instances", func() (bool, string) { return ownership(keys, ins, 2) })
	t.Logf("ownership settled %v after the third instance started", time.Since(start).Round(time.Millisecond))
	// The observer, last, is the instance probing the fewest targets: at
	// most 4 of the 6 (12 probes over 3), so at least 2 it does not probe.
	slices.SortStableFunc(ins, func(a, b *sharded) int { return len(b.share.Stats().Owned) - len(a.share.Stats().Owned) })
	obs, dead, all := ins[2], ins[0], []string{"i1", "i2", "i3"}
	for _, s := range ins {
		for _, b := range bs {
			eventually(t, s.name+" sees "+b.addr+" healthy", func() (bool, string) {
				got := endpointState(s, b.addr)
				return got == "HEALTHY", got
			})
		}
	}

	// Every prober has published its first verdict: 6 targets × 2.
	eventually(t, "12 verdicts in etcd", func() (bool, string) {
		got := healthKeys(t, e)
		return len(got) == 12, fmt.Sprint(got)
	})

	// Probe load, measured at the backends: 6 targets × 2 probers over 3
	// instances is 4 targets each, so each backend gets 2 probes per
	// 200 ms interval (10/s), not 3 (15/s).
	w0 := writes(ins)
	before := probesOf(bs)
	time.Sleep(3 * time.Second)
	after := probesOf(bs)
	total := 0
	for i := range bs {
		total += int(after[i] - before[i])
	}
	perSec := float64(total) / 3 / float64(len(bs))
	t.Logf("probes per backend per second with 3 instances × 2 probers: %.1f (unsharded it would be 15); owned per instance: %d %d %d; etcd writes in 3 s of steady state: %d",
		perSec, len(ins[0].share.Stats().Owned), len(ins[1].share.Stats().Owned), len(ins[2].share.Stats().Owned), writes(ins)-w0)
	if perSec > 12.5 {
		t.Errorf("each backend got %.1f probes/s, want about 10 (2 probers at 200 ms), well under 3 probers' 15", perSec)
	}
	if w := writes(ins) - w0; w > 2 {
		t.Errorf("%d etcd writes in 3 s while nothing changed: verdicts should be written on change only", w)
	}

	// A backend the observer does not probe fails: it sees it unhealthy too.
	var victim *hcBackend
	for i, k := range keys {
		if !slices.Contains(fleet.Owners(k, all, 2), obs.name) {
			victim = bs[slices.IndexFunc(bs, func(b *hcBackend) bool { return b.addr+"/hc" == keys[i] })]
			break
		}
	}
	if victim == nil {
		t.Fatalf("%s owns every key; cannot pick a backend it does not probe", obs.name)
	}
	victim.failing.Store(true)
	failed := time.Now()
	for _, s := range ins {
		eventually(t, s.name+" sees "+victim.addr+" unhealthy", func() (bool, string) {
			got := endpointState(s, victim.addr)
			return got == "UNHEALTHY", got
		})
	}
	t.Logf("a failed backend not probed by %s was unhealthy on all three %v after it failed (3 × 200 ms to fail on its probers)", obs.name, time.Since(failed).Round(time.Millisecond))

	// A prober's own verdict is its to keep: one overwritten or deleted
	// by someone else is written again, and the observer, which does not
	// probe the endpoint, sees it healthy again. (While one verdict is
	// deleted and the other injected, it may see it down for a moment.)
	var other string
	for _, k := range keys {
		if o := fleet.Owners(k, all, 2); !slices.Contains(o, obs.name) && k != victim.addr+"/hc" {
			other = k
		}
	}
	if other == "" {
		t.Fatalf("no second backend %s does not probe", obs.name)
	}
	otherAddr := strings.TrimSuffix(other, "/hc")
	owners := fleet.Owners(other, all, 2)
	admin := dial(t, e)
	if _, err := admin.Put(ctxT(t), "/spillway/health/"+other+"/"+owners[0], `{"ok":false,"detail":"injected","at":"2026-01-01T00:00:00Z"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctxT(t), "/spillway/health/"+other+"/"+owners[1]); err != nil {
		t.Fatal(err)
	}
	for _, o := range owners {
		eventually(t, o+" writing its verdict for "+other+" again", func() (bool, string) {
			resp, err := admin.Get(ctxT(t), "/spillway/health/"+other+"/"+o)
			if err != nil || len(resp.Kvs) != 1 {
				return false, fmt.Sprint(resp, err)
			}
			var v fleet.Verdict
			json.Unmarshal(resp.Kvs[0].Value, &v)
			return v.OK, string(resp.Kvs[0].Value)
		})
	}
	// The observer follows the rewritten verdicts through its watch,
	// which may lag the owners' writes on a loaded machine: wait for it.
	eventually(t, obs.name+" seeing "+otherAddr+" healthy after its probers' verdicts were written again", func() (bool, string) {
		got := endpointState(obs, otherAddr)
		return got == "HEALTHY", got
	})

	// Another instance dies without leaving: its connection to etcd is
	// cut first, so it cannot revoke its leases and they expire (TTL 2 s).
	dead.cut.Cut()
	died := time.Now()
	dead.stop()
	rest := ins[1:]
	eventually(t, "the two others owning every target", func() (bool, string) { return ownership(keys, rest, 2) })
	took := time.Since(died)
	t.Logf("targets moved off the dead instance in %v (lease TTL 2 s + check 200 ms + probe interval 200 ms)", took.Round(time.Millisecond))
	if took > 2*time.Second+200*time.Millisecond+200*time.Millisecond+3*time.Second {
		t.Errorf("takeover took %v, want within TTL + interval (2.4 s) and slack", took)
	}
	for _, s := range rest {
		if got := endpointState(s, victim.addr); got != "UNHEALTHY" {
			t.Errorf("%s: %s is %s after %s died, want still UNHEALTHY", s.name, victim.addr, got, dead.name)
		}
	}
	victim.failing.Store(false)
	for _, s := range rest {
		eventually(t, s.name+" sees "+victim.addr+" healthy again", func() (bool, string) {
			got := endpointState(s, victim.addr)
			return got == "HEALTHY", got
		})
	}

	// The published verdicts in etcd: one per (target, live prober); the
	// dead instance's left with its lease.
	eventually(t, "6 targets × 2 live probers' verdicts in etcd", func() (bool, string) {
		got := healthKeys(t, e)
		return len(got) == 12 && !slices.ContainsFunc(got, func(k string) bool { return strings.HasSuffix(k, "/"+dead.name) }), fmt.Sprint(got)
	})

	// A push that adds a backend: the running instances divide it too.
	nb := newHCBackend(t, "127.0.0.16")
	nb.failing.Store(true)
	bs = append(bs, nb)
	keys = append(keys, nb.addr+"/hc")
	slices.Sort(keys)
	push(t, st, shardedConfig(bs))
	eventually(t, "the two live instances owning all 7 targets", func() (bool, string) { return ownership(keys, rest, 2) })
	for _, s := range rest {
		eventually(t, s.name+" sees the new "+nb.addr+" unhealthy", func() (bool, string) {
			got := endpointState(s, nb.addr)
			return got == "UNHEALTHY", got
		})
	}
}

// healthKeys lists the verdict keys in etcd, checking each is a Verdict.
func healthKeys(t *testing.T, e *fleettest.Etcd) []string {
	t.Helper()
	resp, err := dial(t, e).Get(ctxT(t), "/spillway/health/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range resp.Kvs {
		var v fleet.Verdict
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			t.Fatalf("%s: %v", kv.Key, err)
		}
		got = append(got, string(kv.Key))
	}
	return got
}

// oneOwner reports whether one of the instances owns every key (one
// prober per target).
func oneOwner(keys []string, instances ...string) bool {
	first := fleet.Owners(keys[0], instances, 1)[0]
	for _, k := range keys[1:] {
		if fleet.Owners(k, instances, 1)[0] != first {
			return false
		}
	}
	return true
}

// TestShardedProbingWithoutEtcd: with one prober per target, two
// instances lose etcd. Each keeps probing what it probed and believes its
// own results only: a backend it probes that fails turns unhealthy on it;
// one only the other probes stays as last seen (never an empty view).
// When etcd is back they follow each other's verdicts again.
func TestShardedProbingWithoutEtcd(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	var bs []*hcBackend
	var keys []string
	for i := range 6 {
		b := newHCBackend(t, fmt.Sprintf("127.0.0.%d", 20+i))
		bs = append(bs, b)
		keys = append(keys, b.addr+"/hc")
	}
	// The test needs both instances to own some targets; ports are
	// random, and all six land on one instance 1 time in 32: draw the
	// last backend again until they do not.
	for try := 0; oneOwner(keys, "i1", "i2") && try < 50; try++ {
		bs[5] = newHCBackend(t, "127.0.0.25")
		keys[5] = bs[5].addr + "/hc"
	}
	slices.Sort(keys)
	push(t, st, shardedConfig(bs))
	ins := []*sharded{startSharded(t, e, "i1", 1), startSharded(t, e, "i2", 1)}
	eventually(t, "each target owned by exactly 1 of 2 instances", func() (bool, string) { return ownership(keys, ins, 1) })
	owned1 := ins[0].share.Stats().Owned
	if len(owned1) == 0 || len(owned1) == len(keys) {
		t.Fatalf("i1 owns %v of %v; the test needs both instances to own some", owned1, keys)
	}
	byKey := func(k string) *hcBackend {
		return bs[slices.IndexFunc(bs, func(b *hcBackend) bool { return b.addr+"/hc" == k })]
	}
	var mine, theirs *hcBackend // probed by i1, by i2
	for _, k := range keys {
		if slices.Contains(owned1, k) {
			mine = byKey(k)
		} else {
			theirs = byKey(k)
		}
	}
	for _, s := range ins {
		for _, b := range bs {
			eventually(t, s.name+" sees "+b.addr+" healthy", func() (bool, string) {
				got := endpointState(s, b.addr)
				return got == "HEALTHY", got
			})
		}
	}

	e.Stop()
	for _, s := range ins {
		eventually(t, s.name+" noticing etcd is gone", func() (bool, string) {
			st := s.share.Stats()
			return !st.Connected, fmt.Sprintf("%+v", st)
		})
	}
	if got := ins[0].share.Stats().Owned; !slices.Equal(got, owned1) {
		t.Errorf("i1 without etcd probes %v, want what it probed: %v", got, owned1)
	}
	mine.failing.Store(true)
	theirs.failing.Store(true)
	eventually(t, "i1 seeing the backend it probes unhealthy", func() (bool, string) {
		got := endpointState(ins[0], mine.addr)
		return got == "UNHEALTHY", got
	})
	eventually(t, "i2 seeing the backend it probes unhealthy", func() (bool, string) {
		got := endpointState(ins[1], theirs.addr)
		return got == "UNHEALTHY", got
	})
	for _, b := range bs {
		if b == mine {
			continue
		}
		if got := endpointState(ins[0], b.addr); got != "HEALTHY" {
			t.Errorf("i1 without etcd: %s is %s, want HEALTHY as last seen", b.addr, got)
		}
	}

	e.Restart()
	for _, s := range ins {
		for _, b := range []*hcBackend{mine, theirs} {
			eventually(t, s.name+" seeing "+b.addr+" unhealthy once etcd is back", func() (bool, string) {
				got := endpointState(s, b.addr)
				return got == "UNHEALTHY" && s.share.Stats().Connected, got
			})
		}
	}
}

func probesOf(bs []*hcBackend) []int64 {
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.probes.Load()
	}
	return out
}

func writes(ins []*sharded) int64 {
	var n int64
	for _, s := range ins {
		n += s.share.Stats().Writes
	}
	return n
}
