package serve_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
// serving and a measured split, then kills us-south1-a (its health checks
// fail) and asserts that the page shows the zone unhealthy and drained,
// the measured split moved to us-south1-b and -c, and a "drained"
// transition on the timeline. With SPILLWAY_UPDATE_SCREENSHOTS=1 it
// writes the two screenshots to docs/img/.
func TestDashboardInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	browser := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cfg, err := config.Load(filepath.Join("..", "..", "examples", "seed-70-30", "with-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.HealthChecks {
		cfg.HealthChecks[i].CheckIntervalMs = ptr(200)
		cfg.HealthChecks[i].TimeoutMs = ptr(150)
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
	srv := servetest.Run(t, cfg, serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
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
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1280, 1500),
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
	steadyShot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}

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

// page returns the dashboard's main element, for failure messages.
func page(ctx context.Context) string {
	html, err := chromedp.Run(ctx, chromedp.OuterHTML("main"))
	if err != nil {
		return err.Error()
	}
	return html
}

func ptr[T any](v T) *T { return &v }
