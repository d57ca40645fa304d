package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/dashboard"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// fleetViewConfig is a 70/30 split over two services on one group of
// the endpoints bs, health-checked at path.
func fleetViewConfig(bs []*hcBackend, path string) string {
	var eps strings.Builder
	for _, b := range bs {
		host, port, _ := net.SplitHostPort(b.addr)
		fmt.Fprintf(&eps, "  - {ipAddress: %s, port: %s}\n", host, port)
	}
	return `healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 500, timeoutMs: 500, healthyThreshold: 1, unhealthyThreshold: 2, httpHealthCheck: {requestPath: ` + path + `}}
networkEndpointGroups:
- name: neg
  zone: us-east1-b
  endpoints:
` + eps.String() + `backendServices:
- {name: bs-web, healthChecks: [hc], backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]}
- {name: bs-canary, healthChecks: [hc], backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]}
urlMaps:
- name: um
  defaultRouteAction:
    weightedBackendServices:
    - {backendService: bs-web, weight: 70}
    - {backendService: bs-canary, weight: 30}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
`
}

// viewInstance is a fleet instance started from its own config file (the
// fleet holds none), probing every endpoint itself.
type viewInstance struct {
	name string
	srv  *serve.Server
	stop func()
}

func startViewInstance(t *testing.T, e *fleettest.Etcd, name, cfgYAML string) *viewInstance {
	t.Helper()
	file := filepath.Join(t.TempDir(), "spillway.yaml")
	if err := os.WriteFile(file, []byte(cfgYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	st := fleet.NewStore(dial(t, e), "")
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("in", name)
	cfg, status, err := fleet.Start(context.Background(), st, file, 2*time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := fleet.NewInstance(st, fleet.InstanceOptions{Instance: name, Region: "us-east1", Logger: log,
		LeaseTTL: 2 * time.Second, CheckInterval: 200 * time.Millisecond, CheckTimeout: checkTimeout,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, SummaryInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(cfg, serve.Options{Admin: "127.0.0.1:0", Logger: log, WatchInterval: -1, Instance: name, OverlayStore: inst.Overlay()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srvDone, instDone := make(chan error, 1), make(chan error, 1)
	go func() { srvDone <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case <-time.After(eventuallyBound):
		cancel()
		t.Fatalf("server not ready after %v", eventuallyBound)
	}
	go func() { instDone <- inst.Run(ctx, srv, status) }()
	var once sync.Once
	in := &viewInstance{name: name, srv: srv}
	in.stop = func() {
		once.Do(func() {
			cancel()
			for _, c := range []chan error{instDone, srvDone} {
				if err := <-c; err != nil {
					t.Error(err)
				}
			}
		})
	}
	t.Cleanup(in.stop)
	return in
}

// dashState reads the instance's /ui/state.
func (in *viewInstance) dashState(t *testing.T) *dashboard.DashState {
	t.Helper()
	resp, err := http.Get("http://" + in.srv.AdminAddr() + "/ui/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st dashboard.DashState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// load sends rps requests a second to the instance's frontend until ctx
// ends.
func (in *viewInstance) load(ctx context.Context, wg *sync.WaitGroup, rps int) {
	url := "http://" + in.srv.FrontendAddr("fe") + "/"
	wg.Go(func() {
		client := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(time.Second / time.Duration(rps))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if resp, err := client.Get(url); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	})
}

// TestFleetView: two instances on one embedded etcd, each from its own
// config file (so two config hashes) whose health checks differ: a's
// path fails on the second endpoint, b's does not. Each publishes its
// summary under its lease; the dashboard of either shows both instances
// with their config hashes, the endpoint a finds down and b up, and
// each instance's request rate and measured 70/30 split under load (a
// at 40 requests a second, b at 10). At rest a summary is not written
// again; a clean stop removes the instance from the other's view. In
// headless Chromium (when installed) the page shows the same; with
// SPILLWAY_UPDATE_SCREENSHOTS=1 it writes docs/img/dashboard-fleet.png.
func TestFleetView(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	cl := dial(t, e)
	bs := []*hcBackend{newHCBackend(t, "127.0.0.36"), newHCBackend(t, "127.0.0.37")}
	bs[1].failing.Store(true) // fails /healthz (a's check), not /ready (b's)
	a := startViewInstance(t, e, "a", fleetViewConfig(bs, "/healthz"))
	b := startViewInstance(t, e, "b", fleetViewConfig(bs, "/ready"))

	disagree := func(in *viewInstance) func() (bool, string) {
		return func() (bool, string) {
			st := in.dashState(t)
			v := st.FleetView
			if v == nil || len(v.Instances) != 2 || !v.Connected {
				return false, fmt.Sprintf("%+v", v)
			}
			d := v.Disagreements
			ok := len(d) == 1 && d[0].Group == "neg" && d[0].Address == bs[1].addr &&
				strings.Join(d[0].Down, ",") == "a" && strings.Join(d[0].Up, ",") == "b" && v.ConfigHashes == 2 &&
				v.Instances[0].Instance == in.name && v.Instances[0].Self && v.Instances[0].ConfigHash == st.Info.ConfigHash
			return ok, fmt.Sprintf("%+v", v)
		}
	}
	eventually(t, "a's view: b, two configs, the second endpoint down on a and up on b", disagree(a))
	eventually(t, "b's view: the same", disagree(b))

	// At rest (no request, no health change) no summary is written again.
	writes := atomic.Int64{}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	wch := cl.Watch(wctx, fleet.DefaultPrefix+"summary/", clientv3.WithPrefix())
	go func() {
		for resp := range wch {
			writes.Add(int64(len(resp.Events)))
		}
	}()
	time.Sleep(2 * time.Second) // four summary intervals
	if n := writes.Load(); n != 0 {
		t.Errorf("%d summary writes in 2 s at rest, want none", n)
	}

	var wg sync.WaitGroup
	lctx, stopLoad := context.WithCancel(context.Background())
	defer func() { stopLoad(); wg.Wait() }()
	a.load(lctx, &wg, 40)
	b.load(lctx, &wg, 10)
	eventually(t, "each instance's rate and split in b's view", func() (bool, string) {
		v := b.dashState(t).FleetView
		if v == nil || len(v.Instances) != 2 {
			return false, fmt.Sprintf("%+v", v)
		}
		rate := map[string]float64{}
		split := map[string]float64{}
		for _, in := range v.Instances {
			rate[in.Instance] = in.Rate
			for _, sp := range in.Splits {
				for _, w := range sp.Services {
					if sp.Measured && w.Service == "bs-web" {
						split[in.Instance] = w.Measured
					}
				}
			}
		}
		ok := rate["a"] > 20 && rate["a"] < 60 && rate["b"] > 3 && rate["b"] < 20 && rate["a"] > 2*rate["b"] &&
			split["a"] > 0.55 && split["a"] < 0.85 && split["b"] > 0.4
		return ok, fmt.Sprintf("rates %v, bs-web's measured share %v", rate, split)
	})
	stopLoad()
	wg.Wait()
	t.Logf("summary writes of two instances over the load and the test so far: %d", writes.Load())

	// In Chromium too when it is installed (CI requires it); the
	// /ui/state checks above run without.
	if browser := servetest.ChromiumPath(); browser != "" || os.Getenv("SPILLWAY_REQUIRE_CHROMIUM") != "" {
		fleetViewInChromium(t, servetest.Chromium(t), a, bs[1].addr)
	} else {
		t.Log("no chromium binary: the fleet view checked through /ui/state only (apt-get install -y chromium)")
	}

	b.stop()
	eventually(t, "b leaves a's view at once on a clean stop", func() (bool, string) {
		v := a.dashState(t).FleetView
		return v != nil && len(v.Instances) == 1 && len(v.Disagreements) == 0, fmt.Sprintf("%+v", v)
	})
}

// fleetViewInChromium asserts the fleet section of a's page in a real
// headless Chromium.
func fleetViewInChromium(t *testing.T, browser string, a *viewInstance, down string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.WindowSize(1440, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+a.srv.AdminAddr()+"/ui/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	shown := fmt.Sprintf(`(() => { const s = document.getElementById("fleetview-section"); if (s.hidden) return false;
		const rows = [...document.querySelectorAll("#fleetview tbody tr")];
		const d = document.querySelector('#disagreements tr[data-endpoint="%s"]');
		return rows.length === 2 && rows[0].dataset.instance === "a" && rows[0].dataset.self === "true" &&
			rows[0].dataset.configHash !== rows[1].dataset.configHash && rows[1].dataset.instance === "b" &&
			document.getElementById("fleetview-meta").dataset.configHashes === "2" &&
			!!d && d.dataset.downOn === "a" && d.dataset.upOn === "b" })()`, down)
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](shown, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		html, _ := chromedp.Run(bctx, chromedp.OuterHTML("#fleetview-section"))
		t.Fatalf("fleet view never shown: %v\n%s", err, html)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if os.Getenv("SPILLWAY_UPDATE_SCREENSHOTS") != "" {
		dir = filepath.Join("..", "..", "docs", "img")
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard-fleet.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
