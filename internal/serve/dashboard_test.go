package serve_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/lab"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// chromium returns the path of a Chromium or Chrome binary. The test
// skips without one, unless SPILLWAY_REQUIRE_CHROMIUM is set (CI sets it:
// there a missing browser is a failure, not a skip).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("SPILLWAY_REQUIRE_CHROMIUM") != "" {
		t.Fatal("no chromium binary found and SPILLWAY_REQUIRE_CHROMIUM is set (fix: apt-get install -y chromium)")
	}
	t.Skip("no chromium binary (apt-get install -y chromium)")
	return ""
}

// TestDashboardInChromium drives the admin listener's /ui page in a real
// headless Chromium: the seed's with-policy config on the lab's real
// backends, under load. It asserts that the page shows every zone
// serving and a measured split, the header, the URL map's 70/30 split
// measured, per-backend rates and latency percentiles, per-endpoint
// rates and the transitions filter (operatorSections), drains a group
// with the page's controls (drainButton), then kills us-south1-a (its health checks
// fail) and asserts that the page shows the zone unhealthy and drained,
// the measured split moved to us-south1-b and -c, and a "drained"
// transition on the timeline. With SPILLWAY_UPDATE_SCREENSHOTS=1 it
// writes the two screenshots to docs/img/.
func TestDashboardInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	browser := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	cfg, err := config.Load(filepath.Join("..", "..", "examples", "seed-70-30", "with-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Probes every 500 ms with a generous 450 ms timeout: a loaded
	// machine (or -race) must not flap the zones the test wants serving.
	for i := range cfg.HealthChecks {
		cfg.HealthChecks[i].CheckIntervalMs = ptr(500)
		cfg.HealthChecks[i].TimeoutMs = ptr(450)
	}
	// The seed's backends on a port of their own, not 18080, so this test
	// never collides with the lab's tests (or a `spillway lab`) running
	// at the same time on the seed's addresses.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for i := range cfg.InstanceGroups {
		for j := range cfg.InstanceGroups[i].NamedPorts {
			cfg.InstanceGroups[i].NamedPorts[j].Port = port
		}
	}
	cfg.Frontends = cfg.Frontends[:1]
	cfg.Frontends[0].Address = "127.0.0.1:0"
	cfg.Frontends[0].Protocol = "HTTP"
	cfg.Frontends[0].Certificates = nil
	cfg.Frontends[0].SslPolicy = ""
	p, err := plan.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := lab.StartBackends(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	srv := servetest.Run(t, cfg, serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1, Instance: "lb-dash-test"})
	front := "http://" + srv.FrontendAddr(cfg.Frontends[0].Name) + "/"

	// Load: 100 requests a second until the test ends.
	var wg sync.WaitGroup
	defer wg.Wait()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	wg.Go(func() {
		client := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
			if resp, err := client.Get(front); err == nil {
				resp.Body.Close()
			}
		}
	})

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1440, 1500),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	const svc = `[data-service="bs-south-pref"]`
	measured := func(zone string) string {
		return fmt.Sprintf(`parseFloat((document.querySelector('%s tr[data-zone="%s"] .measured')||{}).dataset?.measured||"-1")`, svc, zone)
	}
	// Steady: every zone serving, a measured split with us-south1-a
	// taking about a third of the service.
	steady := fmt.Sprintf(`document.querySelectorAll('.zone[data-state="serving"]').length === 6 && %s > 0.2 &&
		parseInt(document.querySelector('%s .chart').dataset.points) >= 10 &&
		document.querySelectorAll('%s .bar span').length === 6`, measured("us-south1-a"), svc, svc)
	if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+srv.AdminAddr()+"/ui/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](steady, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		t.Fatalf("steady state never shown: %v\n%s", err, page(bctx))
	}
	operatorSections(t, bctx, srv, cfg)
	steadyShot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	drainButton(t, bctx, srv)

	if err := bs.FailHealth("us-south1-a"); err != nil {
		t.Fatal(err)
	}
	failed := fmt.Sprintf(`document.querySelector('.zone[data-zone="us-south1-a"]').dataset.state === "unhealthy" &&
		document.querySelector('%[1]s tr[data-zone="us-south1-a"]').dataset.state === "drained" &&
		%[2]s === 0 && %[3]s > 0.4 && %[4]s > 0.4 &&
		[...document.querySelectorAll('.timeline .kind[data-kind="drained"]')].length > 0`,
		svc, measured("us-south1-a"), measured("us-south1-b"), measured("us-south1-c"))
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](failed, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		t.Fatalf("failure never shown: %v\n%s", err, page(bctx))
	}
	failedShot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	// A standalone instance shows no fleet status; a fleet instance that
	// lost etcd shows it stale in the header.
	if hidden, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("fleet").hidden`)); err != nil || !hidden {
		t.Errorf("standalone: fleet status shown (hidden=%v, err=%v)", hidden, err)
	}
	srv.SetFleetStatus(control.FleetStatus{Instance: "lb-south-1", Revision: 7, Stale: true, StaleSince: time.Now(), StaleWhy: "fleet: etcd check: context deadline exceeded"})
	staleShown := `(() => { const f = document.getElementById("fleet"); return !f.hidden && f.dataset.stale === "true" &&
		f.textContent.includes("lb-south-1") && f.textContent.includes("config revision 7") && f.textContent.includes("STALE") })()`
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](staleShown, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Errorf("stale fleet instance never shown: %v", err)
	}
	// A runtime overlay entry (spillway ctl) shows in its section.
	req := serve.OverlayRequest{Op: "set", CapacityScaler: ptr(0.5), Actor: "dana", Reason: "dashboard test"}
	req.Service = "bs-south-pref"
	if err := srv.ChangeOverlay(ctx, req, "test"); err != nil {
		t.Fatal(err)
	}
	overlayShown := `(() => { const r = document.querySelector('#overlay tr[data-id="CAPACITY_SCALER service=bs-south-pref"]');
		return !document.getElementById("overlay-section").hidden && !!r && r.textContent.includes("dana") && r.textContent.includes("0.5") })()`
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](overlayShown, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Errorf("overlay entry never shown: %v\n%s", err, page(bctx))
	}
	dir := t.TempDir()
	if os.Getenv("SPILLWAY_UPDATE_SCREENSHOTS") != "" {
		dir = filepath.Join("..", "..", "docs", "img")
	}
	for name, b := range map[string][]byte{"dashboard-steady.png": steadyShot, "dashboard-zone-down.png": failedShot} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// operatorSections asserts the header, the frontend's 70/30 split, the
// per-backend rates, errors and latency percentiles, the per-endpoint
// rates and the transitions filter, with the load running.
func operatorSections(t *testing.T, bctx context.Context, srv *serve.Server, cfg *config.Config) {
	t.Helper()
	header := `(() => { const i = document.getElementById("info"); return !i.hidden && i.textContent.includes("instance lb-dash-test") &&
		/^[0-9a-f]{12}$/.test(i.dataset.configHash) && i.textContent.includes("version ") && parseInt(i.dataset.uptime) >= 1 })()`
	// The URL map's default route sends 70% to bs-south-pref, 30% to
	// bs-east-pref; measured over 10 s at 100 requests a second.
	split := `(() => { const f = document.querySelector('[data-frontend="fe-http"]'); if (!f) return false;
		const m = (svc) => parseFloat((f.querySelector('tr[data-split-service="' + svc + '"] .measured')||{dataset:{}}).dataset.measured || "-1");
		return Math.abs(m("bs-south-pref") - 0.7) < 0.1 && Math.abs(m("bs-east-pref") - 0.3) < 0.1 })()`
	backend := `(() => { const r = document.querySelector('[data-service="bs-south-pref"] tr[data-zone="us-south1-a"]'); if (!r) return false;
		const l = r.querySelector(".latency").dataset;
		return parseFloat(r.querySelector(".rate").dataset.rate) > 5 && r.querySelector(".errors").dataset.errors === "0" &&
			parseFloat(l.p50) > 0 && parseFloat(l.p50) <= parseFloat(l.p95) && parseFloat(l.p95) <= parseFloat(l.p99) })()`
	endpoint := `[...document.querySelectorAll('#endpoints tr[data-group="mig-us-south1-a"] .rate')].filter((r) => parseFloat(r.dataset.rate) > 0).length === 3`
	for _, c := range []struct{ what, js string }{{"header", header}, {"70/30 split", split}, {"backend rate and latency", backend}, {"endpoint rates", endpoint}} {
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](c.js, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Errorf("%s never shown: %v\n%s", c.what, err, page(bctx))
		}
	}
	// The transitions filter: a reload shows under "reload", not under
	// "ejected".
	if err := srv.Reload(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	filtered := func(kind string) string {
		return fmt.Sprintf(`(() => { const s = document.getElementById("filter-kind"); s.value = %q; s.dispatchEvent(new Event("input"));
			return [...document.querySelectorAll("#transitions li")].map((li) => li.dataset.kind || "none") })()`, kind)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`[...document.querySelectorAll('#transitions li[data-kind="reload"]')].length > 0`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("reload never on the timeline: %v", err)
	}
	for kind, want := range map[string]string{"reload": "reload", "ejected": "none"} {
		got, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](filtered(kind)))
		if err != nil || len(got) == 0 || slices.ContainsFunc(got, func(k string) bool { return k != want }) {
			t.Errorf("filter kind=%s shows %q (err %v), want only %q", kind, got, err, want)
		}
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](filtered(""))); err != nil {
		t.Fatal(err)
	}
}

// drainButton drains group mig-us-east4-c with the page's controls and
// asserts that no new request reaches it (its endpoints' rates fall to
// 0 on the page, and its request counter in /metrics stops), then
// undrains it with the page.
func drainButton(t *testing.T, bctx context.Context, srv *serve.Server) {
	t.Helper()
	const zone = "us-east4-c"
	if n := zoneRequests(t, srv, zone); n == 0 {
		t.Fatalf("no request reached %s before the drain", zone)
	}
	click := func(op string) {
		js := fmt.Sprintf(`(() => { document.getElementById("ctl-group").value = "mig-us-east4-c"; document.getElementById("ctl-reason").value = "dashboard test";
			document.getElementById("ctl-result").textContent = ""; document.getElementById(%q).click(); return true })()`, "ctl-"+op)
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatal(err)
		}
		done := fmt.Sprintf(`document.getElementById("ctl-result").textContent === %q`, op+": done")
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](done, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			t.Fatalf("%s button: %v\n%s", op, err, page(bctx))
		}
	}
	click("drain")
	drained := `(() => { const rs = [...document.querySelectorAll('#endpoints tr[data-group="mig-us-east4-c"] .rate')];
		return rs.length === 3 && rs.every((r) => parseFloat(r.dataset.rate) === 0) &&
			document.querySelector('[data-service="bs-east-pref"] tr[data-zone="us-east4-c"]').dataset.state === "drained" })()`
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](drained, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("drained group still shown taking requests: %v\n%s", err, page(bctx))
	}
	before := zoneRequests(t, srv, zone)
	time.Sleep(2 * time.Second) // ~200 requests of the load
	if after := zoneRequests(t, srv, zone); after != before {
		t.Errorf("drained %s got %v requests in 2 s", zone, after-before)
	}
	click("undrain")
}

// zoneRequests returns the requests answered in zone, from /metrics.
func zoneRequests(t *testing.T, srv *serve.Server, zone string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + srv.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "spillway_requests_total{") && strings.Contains(line, `zone="`+zone+`"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			n += v
		}
	}
	return n
}

// page returns the dashboard's main element, for failure messages.
func page(ctx context.Context) string {
	html, err := chromedp.Run(ctx, chromedp.OuterHTML("main"))
	if err != nil {
		return err.Error()
	}
	return html
}

func ptr[T any](v T) *T { return &v }

// TestDashboardControlsNeedToken: with an admin token, the page's
// controls send the token typed in and nothing else: a wrong token is
// refused (401, shown on the page, nothing changes), the right one
// drains; the page keeps the token in no cookie and no storage.
func TestDashboardControlsNeedToken(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	browser := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := config.Load(filepath.Join("..", "..", "examples", "seed-70-30", "with-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Frontends = cfg.Frontends[:1]
	cfg.Frontends[0].Address, cfg.Frontends[0].Protocol = "127.0.0.1:0", "HTTP"
	cfg.Frontends[0].Certificates, cfg.Frontends[0].SslPolicy = nil, ""
	const token = "dashboard-test-token-0123456789"
	srv := servetest.Run(t, cfg, serve.Options{Admin: "127.0.0.1:0", AdminToken: token, WatchInterval: -1})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+srv.AdminAddr()+"/ui/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	drain := func(tok string) string {
		js := fmt.Sprintf(`(() => { document.getElementById("ctl-token").value = %q; document.getElementById("ctl-result").textContent = "";
			document.getElementById("ctl-group").value = "mig-us-east4-c"; document.getElementById("ctl-drain").click(); return true })()`, tok)
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector('#ctl-group option[value="mig-us-east4-c"]') !== null`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("no group offered: %v", err)
		}
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatal(err)
		}
		res, err := chromedp.Run(bctx, chromedp.Poll[string](`(() => { const t = document.getElementById("ctl-result").textContent; return t.startsWith("drain:") && t })()`,
			chromedp.WithPollingTimeout(15*time.Second)))
		if err != nil {
			t.Fatalf("no answer to the drain button: %v\n%s", err, page(bctx))
		}
		return res
	}
	if res := drain("wrong-token-wrong-token-wrong"); !strings.Contains(res, "401") || srv.Overlay() != nil {
		t.Fatalf("drain with a wrong token: page says %q, overlay %+v; want 401 and no change", res, srv.Overlay())
	}
	if res := drain(token); res != "drain: done" || srv.Overlay() == nil || srv.Overlay().Entries[0].ID != "DRAIN group=mig-us-east4-c" {
		t.Fatalf("drain with the token: page says %q, overlay %+v; want done and the drain", res, srv.Overlay())
	}
	stored, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.cookie === "" && localStorage.length === 0 && sessionStorage.length === 0`))
	if err != nil || !stored {
		t.Errorf("the page stored something (cookie or storage): %v %v", stored, err)
	}
}

// TestDashboardCDNHitRatio: the page's Cloud CDN section shows each
// CDN-enabled backend's hit ratio. Three of every four requests ask for
// one cached object and the fourth for a new one, so the service's ratio
// is about 75%; the CDN-enabled bucket, never asked, shows no ratio.
func TestDashboardCDNHitRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	browser := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	origin := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		io.WriteString(w, "object")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go origin.Serve(ln)
	defer origin.Close()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	srv := servetest.Run(t, servetest.Parse(t, fmt.Sprintf(`
networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- {name: bs-web, backends: [{group: neg}], enableCDN: true, cdnPolicy: {cacheMode: USE_ORIGIN_HEADERS}}
backendBuckets:
- {name: bb-static, bucketName: %s, enableCdn: true}
urlMaps:
- name: um
  defaultService: bs-web
  hostRules: [{hosts: ['*'], pathMatcher: pm}]
  pathMatchers:
  - {name: pm, defaultService: bs-web, pathRules: [{paths: ['/static/*'], service: global/backendBuckets/bb-static}]}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
`, host, port, t.TempDir())), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	front := "http://" + srv.FrontendAddr("fe")

	var wg sync.WaitGroup
	defer wg.Wait()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	wg.Go(func() {
		client := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
			path := "/hot"
			if i%4 == 3 {
				path = "/cold/" + strconv.Itoa(i)
			}
			if resp, err := client.Get(front + path); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	})

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+srv.AdminAddr()+"/ui/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	shown := `(() => { const r = document.querySelector('#cdn tr[data-cdn-backend="bs-web"]'); const b = document.querySelector('#cdn tr[data-cdn-backend="bb-static"]');
		if (document.getElementById("cdn-section").hidden || !r || !b) return false;
		const ratio = parseFloat(r.querySelector(".hit-ratio").dataset.ratio || "-1");
		return ratio > 0.6 && ratio < 0.9 && parseInt(r.querySelector(".hits").textContent) > 20 &&
			b.dataset.kind === "bucket" && b.querySelector(".hit-ratio").dataset.ratio === "" })()`
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](shown, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		t.Fatalf("hit ratio never shown: %v\n%s", err, page(bctx))
	}
}
