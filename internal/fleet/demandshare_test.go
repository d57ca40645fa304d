package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/netcut"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// newCutter forwards connections to etcd until Cut (package netcut): an
// instance whose client dials through it can be cut off from etcd without
// a chance to revoke its leases.
func newCutter(t *testing.T, target string) *netcut.Forwarder {
	t.Helper()
	c, err := netcut.Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Cut)
	return c
}

// dialVia is dial through a cutter.
func dialVia(t *testing.T, c *netcut.Forwarder) *clientv3.Client {
	t.Helper()
	cl, err := fleet.ClientConfig{Endpoints: []string{c.Addr()}, DialTimeout: 2 * time.Second}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// demander is one instance's DemandShare, run on a client of its own, fed
// windows directly (standing in for the server's measureDemand).
type demander struct {
	name  string
	share *fleet.DemandShare
	cut   *netcut.Forwarder // its connection to etcd
	stop  func()
}

func startDemander(t *testing.T, e *fleettest.Etcd, name string) *demander {
	t.Helper()
	cut := newCutter(t, e.ClientAddr)
	cl := dialVia(t, cut)
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("in", name)
	share, err := fleet.NewDemandShare(fleet.NewStore(cl, ""), fleet.DemandShareOptions{
		Instance: name, Logger: log, LeaseTTL: 2 * time.Second,
		CheckInterval: 200 * time.Millisecond, CheckTimeout: checkTimeout,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- share.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(stop)
	return &demander{name: name, share: share, cut: cut, stop: stop}
}

// window hands the share one window of rps from European clients to
// web-bs.
func (d *demander) window(rps float64) {
	d.share.Publish(time.Now(), time.Second, control.DemandRates{"web-bs": {"europe-west1": rps}}, nil)
}

func (d *demander) remoteEU() float64 { return d.share.Remote()["web-bs"]["europe-west1"] }

// remoteIs waits until every demander's remote European rate is want.
func remoteIs(t *testing.T, what string, want float64, ds ...*demander) {
	t.Helper()
	for _, d := range ds {
		eventually(t, d.name+" "+what, func() (bool, string) {
			got := d.remoteEU()
			return got == want, fmt.Sprintf("remote %v, stats %+v", got, d.share.Stats())
		})
	}
}

func demandWrites(ds ...*demander) int64 {
	var n int64
	for _, d := range ds {
		n += d.share.Stats().Writes
	}
	return n
}

// seed001Split is the engine's split of web-bs for European clients in
// seed 001's worked example (examples/spillover) at a demand of rps, by
// group.
func seed001Split(t *testing.T, rps float64) map[string]float64 {
	t.Helper()
	c, err := config.Load("../../examples/spillover/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	st := control.New(p)
	st.SetDemand(0, p.RegionIndex["europe-west1"], rps, time.Now())
	got := map[string]float64{}
	for _, sh := range engine.NewView(st).Split(0, p.RegionIndex["europe-west1"]).Shares {
		got[p.Services[0].Backends[sh.Backend].Group.Name] += sh.Fraction
	}
	return got
}

// TestDemandShareSeed001: seed 001's worked example on three instances,
// each receiving 1500 rps of European clients. Each sees the other two's
// 3000 rps, so each counts 4500 against europe-west1's 3000 rps of
// capacity and sends a third of its requests to us-east1: 3000 / 1500
// fleet-wide, as one instance receiving 4500 rps would. Steady windows
// (rates within 5%) write nothing; a foreign write to an instance's key
// is undone; an instance cut off from etcd stops counting once its
// lease expires.
func TestDemandShareSeed001(t *testing.T) {
	// Not parallel: see TestMain.
	e := fleettest.Start(t)
	ds := []*demander{startDemander(t, e, "i1"), startDemander(t, e, "i2"), startDemander(t, e, "i3")}
	for _, d := range ds {
		d.window(1500)
	}
	remoteIs(t, "seeing the other two's 1500 + 1500 rps", 3000, ds...)
	for _, d := range ds {
		total := 1500 + d.remoteEU()
		got := seed001Split(t, total)
		t.Logf("%s: 1500 local + %.0f remote = %.0f rps; europe-west1 %.4f (%.0f fleet-wide), us-east1 %.4f (%.0f)",
			d.name, d.remoteEU(), total, got["web-europe-west1"], 3*1500*got["web-europe-west1"], got["web-us-east1"], 3*1500*got["web-us-east1"])
		if math.Abs(got["web-us-east1"]-1.0/3) > 0.05/3 || math.Abs(3*1500*got["web-europe-west1"]-3000) > 150 {
			t.Errorf("%s: split %v, want 1/3 to us-east1 (1500 of 4500 fleet-wide) within 5%%", d.name, got)
		}
	}
	if alone := seed001Split(t, 1500); alone["web-us-east1"] != 0 {
		t.Errorf("1500 rps counted alone spill %v, want nothing (the per-instance count this replaces)", alone)
	}

	// 50 windows of jitter within ±4% per instance: nothing is written.
	w0 := demandWrites(ds...)
	for k := range 50 {
		for i, d := range ds {
			d.window(1500 * (1 + 0.04*math.Sin(float64(k+i))))
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if w := demandWrites(ds...) - w0; w != 0 {
		t.Errorf("%d writes over 50 windows of rates within 5%% of the published ones, want 0", w)
	}

	// A ramp from 1500 to 3000 rps on i1 over 50 windows (1.4% a window):
	// written at each step past the larger of 5% and the counting-noise
	// floor 3√r (7.7% at 1500 rps, 5.5% at 3000), about 10 times, and the
	// others follow within that floor.
	w0 = demandWrites(ds...)
	for k := range 51 {
		ds[0].window(1500 * math.Pow(2, float64(k)/50))
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	ramp := demandWrites(ds...) - w0
	t.Logf("writes over a 50-window ramp from 1500 to 3000 rps on one instance: %d (one every %.1f windows)", ramp, 50/float64(ramp))
	if ramp < 7 || ramp > 14 {
		t.Errorf("%d writes over the ramp, want about 10 (one per step of 7.7%% to 5.5%%: ln 2 / ln 1.066)", ramp)
	}
	for _, d := range ds[1:] {
		if got, want := d.remoteEU(), 1500+3000-3*math.Sqrt(3000); got < want {
			t.Errorf("%s: remote %v after i1's ramp to 3000, want at least %.0f (4500 less the noise floor)", d.name, got, want)
		}
	}
	ds[0].window(1500)
	remoteIs(t, "seeing i1 back at 1500", 3000, ds[1:]...)

	// Someone else overwrites i1's record: i1 writes its own again.
	admin := dial(t, e)
	if _, err := admin.Put(ctxT(t), "/spillway/demand/i1", `{"rates":{"web-bs":{"europe-west1":99999}}}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "i1 writing its own record again after a foreign write", func() (bool, string) {
		ds[0].window(1500) // the server's next window
		resp, err := admin.Get(ctxT(t), "/spillway/demand/i1")
		if err != nil || len(resp.Kvs) != 1 {
			return false, fmt.Sprint(resp, err)
		}
		var r fleet.DemandRecord
		json.Unmarshal(resp.Kvs[0].Value, &r)
		return r.Rates["web-bs"]["europe-west1"] == 1500 && r.WindowSec == 1 && !r.At.IsZero(), string(resp.Kvs[0].Value)
	})
	remoteIs(t, "seeing i1's own record again", 3000, ds[1:]...)

	// i3 is cut off from etcd (so it cannot revoke its lease) and stops:
	// its 1500 rps leave the others' remote once the lease expires and the
	// grace for a peer that may reconnect is over (TTL + MaxBackoff + CheckTimeout).
	ds[2].cut.Cut()
	cut := time.Now()
	ds[2].stop()
	// Still there: it goes with the lease, not with a revoke or delete.
	if resp, err := admin.Get(ctxT(t), "/spillway/demand/i3"); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("i3's record right after it was cut off: %v %v, want it still there until its lease expires", resp, err)
	}
	remoteIs(t, "no longer counting i3", 1500, ds[:2]...)
	took := time.Since(cut)
	t.Logf("i3's demand left the fleet's %v after it was cut off (lease TTL 2 s, grace 4.3 s: TTL + MaxBackoff + CheckTimeout)", took.Round(time.Millisecond))
	if took < 3*time.Second {
		t.Errorf("i3's demand left after %v, before its lease could expire (at least 1.3 s) and the grace (4.3 s) end", took)
	}
	if got := ds[0].share.Stats().Peers; len(got) != 1 || got[0] != "i2" {
		t.Errorf("i1's peers %v, want [i2]", got)
	}
}

// TestDemandShareWithoutEtcd: etcd stops. Each instance keeps the
// other's rate as last seen (the fleet still serves). When etcd is back
// each publishes again under a new lease and sees what the other
// measured meanwhile.
func TestDemandShareWithoutEtcd(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	a, b := startDemander(t, e, "a"), startDemander(t, e, "b")
	a.window(100)
	b.window(200)
	remoteIs(t, "seeing the other's rate", 200, a)
	remoteIs(t, "seeing the other's rate", 100, b)

	e.Stop()
	for _, d := range []*demander{a, b} {
		eventually(t, d.name+" noticing etcd is gone", func() (bool, string) {
			st := d.share.Stats()
			return !st.Connected, fmt.Sprintf("%+v", st)
		})
	}
	a.window(300) // cannot be written now
	for range 5 {
		b.window(200)
		time.Sleep(200 * time.Millisecond)
	}
	if got := a.remoteEU(); got != 200 {
		t.Errorf("a without etcd: remote %v, want b's 200 as last seen", got)
	}
	if got := b.remoteEU(); got != 100 {
		t.Errorf("b without etcd: remote %v, want a's 100 as last seen", got)
	}

	w0 := demandWrites(a, b)
	e.Restart()
	remoteIs(t, "seeing a's rate written while etcd was down, once it is back", 300, b)
	remoteIs(t, "seeing b's rate again", 200, a)
	// b's record from before the outage may still be there (etcd keeps
	// leases across a restart), so a can see b's rate before b wrote.
	eventually(t, "each instance publishing again on rejoin (2 writes)", func() (bool, string) {
		w := demandWrites(a, b) - w0
		return w >= 2, fmt.Sprintf("%d writes", w)
	})
}

// rateConfig is seed 001 scaled down by 30: europe-west1 and us-east1,
// each a group of 10 endpoints with maxRatePerEndpoint 10 (100 rps per
// region), behind a frontend in europe-west1.
func rateConfig(eu, us []string) string {
	var b strings.Builder
	for _, g := range []struct {
		name, zone string
		addrs      []string
	}{{"web-europe-west1", "europe-west1-b", eu}, {"web-us-east1", "us-east1-b", us}} {
		fmt.Fprintf(&b, "- name: %s\n  zone: %s\n  endpoints:\n", g.name, g.zone)
		for _, a := range g.addrs {
			host, port, _ := net.SplitHostPort(a)
			fmt.Fprintf(&b, "  - {ipAddress: %s, port: %s}\n", host, port)
		}
	}
	return "networkEndpointGroups:\n" + b.String() + `backendServices:
- name: web-bs
  backends:
  - {group: web-europe-west1, balancingMode: RATE, maxRatePerEndpoint: 10}
  - {group: web-us-east1, balancingMode: RATE, maxRatePerEndpoint: 10}
urlMaps:
- {name: um, defaultService: web-bs}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um, region: europe-west1}
`
}

// rateInstance is one in-process fleet instance counting RATE across the
// fleet: a real serve.Server and its DemandShare, and a client sending it
// requests at a set rate and counting which region answered.
type rateInstance struct {
	name  string
	srv   *serve.Server
	share *fleet.DemandShare
	cut   *netcut.Forwarder // its connection to etcd
	stop  func()

	rps      atomic.Int64 // requests per second the client sends (0: none)
	eu, us   atomic.Int64 // answers from each region
	failures atomic.Int64
}

func startRateInstance(t *testing.T, e *fleettest.Etcd, name string) *rateInstance {
	t.Helper()
	cut := newCutter(t, e.ClientAddr)
	cl := dialVia(t, cut)
	st := fleet.NewStore(cl, "")
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("in", name)
	cfg, _, err := fleet.Start(context.Background(), st, "", 2*time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	in := &rateInstance{name: name, cut: cut}
	in.share, err = fleet.NewDemandShare(st, fleet.DemandShareOptions{
		Instance: name, Logger: log, LeaseTTL: 2 * time.Second,
		CheckInterval: 200 * time.Millisecond, CheckTimeout: checkTimeout,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if in.srv, err = serve.New(cfg, serve.Options{Admin: "127.0.0.1:0", Logger: log, WatchInterval: -1, DemandShare: in.share}); err != nil {
		t.Fatal(err)
	}
	in.srv.SetFleetStatus(control.FleetStatus{Instance: name})
	in.srv.SetFleetSources(fleet.Sources(nil, nil, in.share))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := in.srv.Run(ctx); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() { in.share.Run(ctx) })
	select {
	case <-in.srv.Ready():
	case <-time.After(eventuallyBound):
		t.Fatalf("server not ready after %v", eventuallyBound)
	}
	wg.Go(func() { in.load(ctx) })
	stopped := false
	in.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(in.stop)
	return in
}

// load sends GET / at in.rps requests per second, evenly spaced, until
// ctx ends; up to 8 at once.
func (in *rateInstance) load(ctx context.Context) {
	url := "http://" + in.srv.FrontendAddr("fe") + "/"
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	defer wg.Wait()
	next := time.Now()
	for ctx.Err() == nil {
		rps := in.rps.Load()
		if rps <= 0 {
			time.Sleep(10 * time.Millisecond)
			next = time.Now()
			continue
		}
		next = next.Add(time.Second / time.Duration(rps))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			resp, err := client.Get(url)
			if err != nil {
				in.failures.Add(1)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch string(body) {
			case "eu":
				in.eu.Add(1)
			case "us":
				in.us.Add(1)
			default:
				in.failures.Add(1)
			}
		})
	}
}

// offered is the offered rate the instance's split is for (/health).
func (in *rateInstance) offered() float64 {
	return in.srv.Health().Services[0].Frontends[0].OfferedRate
}

// usShare is the engine's share of us-east1 for the frontend's clients.
func (in *rateInstance) usShare() float64 {
	for _, f := range in.srv.Health().Services[0].Frontends {
		for _, b := range f.Backends {
			if b.Group == "web-us-east1" {
				return b.Share
			}
		}
	}
	return -1
}

// measured counts the answers by region over d.
func measured(ins []*rateInstance, d time.Duration) (eu, us []int64) {
	for _, in := range ins {
		eu, us = append(eu, -in.eu.Load()), append(us, -in.us.Load())
	}
	time.Sleep(d)
	for i, in := range ins {
		eu[i] += in.eu.Load()
		us[i] += in.us.Load()
	}
	return eu, us
}

func rateWrites(ins []*rateInstance) int64 {
	var n int64
	for _, in := range ins {
		n += in.share.Stats().Writes
	}
	return n
}

// TestFleetRateServers: seed 001 scaled down (100 rps of capacity per
// region) on three real servers, each sent 50 rps of real requests from
// European clients: 150 rps fleet-wide, so each sends a third to
// us-east1 (100 / 50 fleet-wide), measured at the backends, within 0.05:
// each instance's published rate may be up to 5% off its current one
// (it is written again only past 5%), and the control state keeps a
// demand within 5% too (on a loaded machine whose clients fall short of
// 50 rps, the share expected is that of the rate they did send). Without
// the share each would count its 50 rps alone and send nothing to us-east1,
// so the fleet would take 150 rps in europe-west1. Then one instance's
// load halves (the others follow within a window or two), and an
// instance is cut off from etcd: its demand leaves the fleet's once its
// lease expires.
func TestFleetRateServers(t *testing.T) {
	// Not parallel: see TestMain.
	e := fleettest.Start(t)
	var eu, us []string
	for range 10 {
		eu, us = append(eu, backend(t, "eu")), append(us, backend(t, "us"))
	}
	push(t, fleet.NewStore(dial(t, e), ""), rateConfig(eu, us))
	ins := []*rateInstance{startRateInstance(t, e, "i1"), startRateInstance(t, e, "i2"), startRateInstance(t, e, "i3")}
	for _, in := range ins {
		in.rps.Store(50)
	}
	// 50 rps each, 150 fleet-wide over 100 of capacity: a third spills.
	start := time.Now()
	for _, in := range ins {
		eventually(t, in.name+" sending a third to us-east1", func() (bool, string) {
			got := in.usShare()
			return math.Abs(got-1.0/3) < 0.05, fmt.Sprintf("us-east1 share %.4f", got)
		})
	}
	t.Logf("every instance's split at 1/3 ± 0.05 %v after the load started", time.Since(start).Round(time.Millisecond))
	w0 := rateWrites(ins)
	const steady = 6 * time.Second
	euN, usN := measured(ins, steady)
	steadyWrites := rateWrites(ins) - w0
	var euAll, usAll int64
	for i := range ins {
		euAll, usAll = euAll+euN[i], usAll+usN[i]
	}
	// The share to spill is the fleet's demand over the 100 rps of
	// capacity: a third at 150 rps. On a loaded machine the clients may
	// send less than their 50 rps each; the fleet's split then follows
	// the demand they did send.
	secs := steady.Seconds()
	sent := float64(euAll+usAll) / secs
	want := max(0, 1-100/sent)
	t.Logf("fleet-wide: %.1f rps to europe-west1, %.1f rps to us-east1 (capacity 100 each): %.1f rps sent, so %.3f to spill; etcd writes in %v of steady load: %d (%.2f/s for 3 instances)",
		float64(euAll)/secs, float64(usAll)/secs, sent, want, steady, steadyWrites, float64(steadyWrites)/secs)
	for i, in := range ins {
		share := float64(usN[i]) / float64(euN[i]+usN[i])
		t.Logf("%s over %v: %d to europe-west1, %d to us-east1 (%.3f); engine share %.4f for a fleet demand of %.1f rps",
			in.name, steady, euN[i], usN[i], share, in.usShare(), in.offered())
		// One window's rate, which a stall of the load's goroutine on a
		// loaded machine can push out of the band for a moment.
		eventually(t, in.name+" reporting an offered rate of 150 rps (the fleet's) within the two 5% bands in /health", func() (bool, string) {
			got := in.offered()
			return math.Abs(got-150) <= 0.1*150, fmt.Sprintf("%.1f rps", got)
		})
		if math.Abs(share-want) > 0.05 {
			t.Errorf("%s sent %.3f of its requests to us-east1, want %.3f ± 0.05 (1/3 at 150 rps)", in.name, share, want)
		}
	}
	if got := float64(usAll) / float64(euAll+usAll); math.Abs(got-want) > 0.03 {
		t.Errorf("fleet-wide share of us-east1 %.3f, want %.3f ± 0.03 (1/3 at 150 rps)", got, want)
	}
	for _, in := range ins {
		if f := in.failures.Load(); f > 0 {
			t.Errorf("%s: %d requests failed", in.name, f)
		}
		// /health and /metrics name the peers whose demand counts (once
		// connected: a loaded machine may have cost a session).
		eventually(t, in.name+" connected with the 2 other instances in /health fleet.demand", func() (bool, string) {
			var r report.Health
			if err := json.Unmarshal([]byte(adminGet(t, in.srv, "/health")), &r); err != nil {
				t.Fatal(err)
			}
			d := r.Fleet.Demand
			return d != nil && d.Connected && len(d.Peers) == 2 && !slices.Contains(d.Peers, in.name), fmt.Sprintf("%+v", d)
		})
		if m := adminGet(t, in.srv, "/metrics"); !strings.Contains(m, "spillway_fleet_demand_peers 2") {
			t.Errorf("%s: /metrics lacks spillway_fleet_demand_peers 2:\n%s", in.name, grepFleet(m))
		}
	}

	// i3's load halves: 125 rps fleet-wide, 25 spill (a fifth).
	w0 = rateWrites(ins)
	changed := time.Now()
	ins[2].rps.Store(25)
	// A starved load goroutine sends less than asked: the split must
	// follow the fleet demand the instance measures (a fifth at 125 rps),
	// once that demand shows the drop from 150.
	for _, in := range ins {
		eventually(t, in.name+" sending to us-east1 what the fleet's demand spills (a fifth at 125 rps)", func() (bool, string) {
			got, d := in.usShare(), in.offered()
			want := max(0, 1-100/d)
			return d < 140 && math.Abs(got-want) < 0.05, fmt.Sprintf("us-east1 share %.4f, fleet demand %.1f rps (spill %.4f)", got, d, want)
		})
	}
	t.Logf("i3's load 50 → 25 rps: every split at 1/5 ± 0.05 %v later; etcd writes meanwhile: %d", time.Since(changed).Round(time.Millisecond), rateWrites(ins)-w0)

	// i3 is cut off from etcd and stops: the other two count only each
	// other once its lease expires and the grace is over: 100 rps over 100
	// of capacity.
	ins[2].cut.Cut()
	cut := time.Now()
	ins[2].stop()
	for _, in := range ins[:2] {
		eventually(t, in.name+" no longer counting i3", func() (bool, string) {
			st := in.share.Stats()
			return len(st.Peers) == 1 && in.usShare() < 0.05, fmt.Sprintf("peers %v, us-east1 share %.4f", st.Peers, in.usShare())
		})
	}
	t.Logf("i3's demand left the others' %v after it was cut off from etcd (lease TTL 2 s, grace 4.3 s: TTL + MaxBackoff + CheckTimeout)", time.Since(cut).Round(time.Millisecond))
}

// TestDemandShareSameName: two instances wrongly given the same name
// overwrite each other's record. Each writes it again with its next
// window only, so they write at most once a window each rather than in a
// loop.
func TestDemandShareSameName(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	a, b := startDemander(t, e, "dup"), startDemander(t, e, "dup")
	a.window(100)
	b.window(200)
	eventually(t, "both dup instances writing their first record", func() (bool, string) {
		n := demandWrites(a, b)
		return n >= 2, fmt.Sprintf("%d writes", n)
	})
	w0 := demandWrites(a, b)
	const windows = 20
	start := time.Now()
	for range windows {
		a.window(100)
		b.window(200)
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	w := demandWrites(a, b) - w0
	// A record overwritten by the other is written again with the next
	// window or the next check (every 200 ms), whichever comes first: on
	// a loaded machine the windows come late and the checks count too.
	checks := int64(time.Since(start)/(200*time.Millisecond)) + 1
	t.Logf("two instances named dup: %d writes over %d windows and %d checks", w, windows, checks)
	if w > 2*(windows+checks)+2 {
		t.Errorf("%d writes over %d windows and %d checks, want at most one a window or check each", w, windows, checks)
	}
}
