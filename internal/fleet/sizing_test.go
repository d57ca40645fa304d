package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
)

// writeCounter counts the writes (puts and deletes) under the fleet's
// prefix by the key's first path element (config, instances, health,
// control, ...), from a watch: every write is one event.
type writeCounter struct {
	mu sync.Mutex
	n  map[string]int
	// health counts the health writes by key, for the messages: a write
	// for an endpoint nobody touched is a verdict that flipped by itself.
	health map[string]int
}

func countWrites(t *testing.T, cl *clientv3.Client) *writeCounter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &writeCounter{n: map[string]int{}, health: map[string]int{}}
	ch := cl.Watch(ctx, fleet.DefaultPrefix, clientv3.WithPrefix())
	go func() {
		for resp := range ch {
			w.mu.Lock()
			for _, ev := range resp.Events {
				class, rest, _ := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), fleet.DefaultPrefix), "/")
				w.n[class]++
				if class == "health" {
					w.health[rest]++
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// sum is the number of writes counted since the last take.
func (w *writeCounter) sum() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return total(w.n)
}

// quiet waits until no write has been counted for a second: the writes
// a change caused have all landed (instead of sleeping for a guess).
func (w *writeCounter) quiet(t *testing.T, what string) {
	t.Helper()
	last, since := -1, time.Now()
	eventually(t, what+", then no etcd write for 1 s", func() (bool, string) {
		if n := w.sum(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= time.Second, fmt.Sprintf("%d writes since the last phase, the last %v ago", last, time.Since(since).Round(time.Millisecond))
	})
}

// verdictsAre waits until every prober's verdict for key in etcd says
// ok (or, with ok false, says not ok).
func verdictsAre(t *testing.T, cl *clientv3.Client, key string, probers int, ok bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d verdicts ok=%v for %s", probers, ok, key), func() (bool, string) {
		resp, err := cl.Get(ctxT(t), fleet.DefaultPrefix+"health/"+key+"/", clientv3.WithPrefix())
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, kv := range resp.Kvs {
			var v fleet.Verdict
			if json.Unmarshal(kv.Value, &v) != nil || v.OK != ok {
				return false, string(kv.Key) + " " + string(kv.Value)
			}
			got = append(got, string(kv.Key))
		}
		return len(got) == probers, fmt.Sprint(got)
	})
}

// take returns the counts since the last take and resets them, and
// the health writes by key.
func (w *writeCounter) take() map[string]int {
	out, _ := w.takeKeys()
	return out
}

// takeKeys is take with the health writes by key.
func (w *writeCounter) takeKeys() (map[string]int, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out, health := w.n, w.health
	w.n, w.health = map[string]int{}, map[string]int{}
	return out, health
}

// patientProbes makes a drainZonesConfig probe every second with a 1 s
// timeout (was 200 ms / 150 ms): with two probes in a row needed to
// change a verdict, only a stall of the prober of more than a second,
// twice, could flip one on a loaded machine. A test that counts verdict
// changes must see only those it caused.
func patientProbes(t *testing.T, cfg string) string {
	t.Helper()
	const fast = "checkIntervalMs: 200, timeoutMs: 150"
	if !strings.Contains(cfg, fast) {
		t.Fatalf("drainZonesConfig has no %q any more: update patientProbes", fast)
	}
	return strings.Replace(cfg, fast, "checkIntervalMs: 1000, timeoutMs: 1000", 1)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestFleetSizing measures the etcd writes a fleet sends (docs/fleet.md,
// "Sizing"): M instances (server, agent, probe share, control loop each)
// over N endpoints in three zones, with 2 probers per endpoint. Phases:
// steady state; one endpoint flapping every second; a whole zone failing
// (drained by the leader) and recovering. SPILLWAY_FLEET_SIZING="M,N"
// sets the size (default 3 instances, 12 endpoints).
func TestFleetSizing(t *testing.T) {
	// Not parallel: see TestMain.
	m, n := 3, 12
	if v := os.Getenv("SPILLWAY_FLEET_SIZING"); v != "" {
		if _, err := fmt.Sscanf(v, "%d,%d", &m, &n); err != nil || m < 2 || n < 3 {
			t.Fatalf("SPILLWAY_FLEET_SIZING=%q: want M,N with M >= 2 instances and N >= 3 endpoints", v)
		}
	}
	e := fleettest.Start(t)
	cl := dial(t, e)
	st := fleet.NewStore(cl, "")
	zones := make([][]*hcBackend, 3)
	var all []*hcBackend
	for i := range n {
		b := newHCBackend(t, fmt.Sprintf("127.0.%d.%d", 60+i/200, 1+i%200))
		zones[i%3] = append(zones[i%3], b)
		all = append(all, b)
	}
	w := countWrites(t, cl)
	push(t, st, patientProbes(t, drainZonesConfig(zones...)))
	var nodes []*node
	for i := range m {
		nodes = append(nodes, startNode(t, e, fmt.Sprintf("i%d", i+1), fleet.DefaultProbers))
	}
	start := time.Now()
	eventually(t, "every instance sees every endpoint healthy", func() (bool, string) {
		for _, nd := range nodes {
			for _, b := range all {
				if got := endpointState(nd.s, b.addr); got != "HEALTHY" {
					return false, nd.s.name + " " + b.addr + " " + got
				}
			}
		}
		return true, ""
	})
	var keys []string
	var ins []*sharded
	for _, b := range all {
		keys = append(keys, b.addr+"/hc")
	}
	slices.Sort(keys)
	for _, nd := range nodes {
		ins = append(ins, nd.s)
	}
	eventually(t, "probing ownership settled", func() (bool, string) { return ownership(keys, ins, fleet.DefaultProbers) })
	w.quiet(t, "the new probers' first verdicts")
	startup := w.take()
	t.Logf("start of %d instances over %d endpoints (%v): etcd writes %v", m, n, time.Since(start).Round(100*time.Millisecond), startup)

	const steadyFor = 4 * time.Second
	time.Sleep(steadyFor)
	steady, steadyKeys := w.takeKeys()
	t.Logf("steady state, %v: etcd writes %v (%.2f/s)", steadyFor, steady, float64(total(steady))/steadyFor.Seconds())
	if total(steady) > 1 {
		t.Errorf("%d etcd writes in %v of steady state (%v; health by key %v); nothing changed, so there should be none", total(steady), steadyFor, steady, steadyKeys)
	}

	// One endpoint flaps: down until both its probers say so, up until
	// both say so, twice. Each change is one verdict per prober.
	flap := all[0]
	for range 2 {
		flap.failing.Store(true)
		verdictsAre(t, cl, flap.addr+"/hc", fleet.DefaultProbers, false)
		flap.failing.Store(false)
		verdictsAre(t, cl, flap.addr+"/hc", fleet.DefaultProbers, true)
	}
	w.quiet(t, "the flaps' verdicts")
	flapped, flappedKeys := w.takeKeys()
	t.Logf("one endpoint down and up twice (4 verdict changes): etcd writes %v", flapped)
	if h := flapped["health"]; h < 4 || h > 4*fleet.DefaultProbers {
		t.Errorf("%d health writes for 4 verdict changes, want 4..%d (one per change per prober); by key: %v", h, 4*fleet.DefaultProbers, flappedKeys)
	}

	// A whole zone fails: drained by the leader, applied everywhere; then
	// it recovers and is undrained after the 1 s hold.
	drained := func(want bool) func() (bool, string) {
		return func() (bool, string) {
			for _, nd := range nodes {
				if nd.s.srv.Snapshot().View.Backend(0, 0).Drained != want {
					return false, nd.s.name
				}
			}
			return true, ""
		}
	}
	for _, b := range zones[0] {
		b.failing.Store(true)
	}
	eventually(t, "zone us-east1-b drained on every instance", drained(true))
	w.quiet(t, "the drain")
	down, downKeys := w.takeKeys()
	for _, b := range zones[0] {
		b.failing.Store(false)
	}
	eventually(t, "zone us-east1-b undrained on every instance", drained(false))
	w.quiet(t, "the undrain")
	up, upKeys := w.takeKeys()
	t.Logf("zone of %d endpoints down: etcd writes %v; back up: %v", len(zones[0]), down, up)
	byKey := map[string]map[string]int{"down": downKeys, "up": upKeys}
	for what, got := range map[string]map[string]int{"down": down, "up": up} {
		if h := got["health"]; h > len(zones[0])*fleet.DefaultProbers {
			t.Errorf("zone %s: %d health writes, want at most %d (one per endpoint per prober); by key: %v", what, h, len(zones[0])*fleet.DefaultProbers, byKey[what])
		}
		if c := got["control"]; c < 1 || c > 3 {
			t.Errorf("zone %s: %d control writes, want 1..3 (the leader's drain state)", what, c)
		}
	}
}
