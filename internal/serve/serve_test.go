package serve_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// backend is a real HTTP server on a loopback address that answers with
// its zone and can fail its health path.
type backend struct {
	zone    string
	srv     *http.Server
	addr    string
	unready atomic.Bool
}

func startBackend(t *testing.T, zone string) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{zone: zone, addr: ln.Addr().String()}
	b.serve(t, ln)
	return b
}

// serve (re)starts the backend's server on ln.
func (b *backend) serve(t *testing.T, ln net.Listener) {
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			if b.unready.Load() {
				http.Error(w, "unready", http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "ok")
			return
		}
		io.WriteString(w, b.zone)
	})}
	srv := b.srv
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// zonesConfig writes a one-service config over the given zones (two
// backends each) with fast probes and a short undrain hold.
func zonesConfig(t *testing.T, weights string, backends map[string][]*backend, order []string) *config.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString(`healthChecks:
- name: hc
  type: HTTP
  checkIntervalMs: 50
  timeoutMs: 40
  healthyThreshold: 2
  unhealthyThreshold: 2
  httpHealthCheck: {requestPath: /healthz}
serviceLbPolicies:
- name: pol
  loadBalancingAlgorithm: SPRAY_TO_REGION
  autoCapacityDrain: {enable: true}
spillway: {undrainHoldSec: 1}
networkEndpointGroups:
`)
	for i, z := range order {
		fmt.Fprintf(&b, "- name: neg-%d\n  zone: %s\n  endpoints:\n", i, z)
		for _, be := range backends[z] {
			host, port, _ := net.SplitHostPort(be.addr)
			fmt.Fprintf(&b, "  - {ipAddress: %s, port: %s}\n", host, port)
		}
	}
	b.WriteString("backendServices:\n- name: bs\n  healthChecks: [hc]\n  serviceLbPolicy: pol\n  backends:\n")
	for i := range order {
		fmt.Fprintf(&b, "  - {group: neg-%d, balancingMode: RATE, maxRatePerEndpoint: 100000}\n", i)
	}
	fmt.Fprintf(&b, "urlMaps:\n- name: um\n  defaultService: bs\n%sfrontends:\n- {name: fe, address: \"127.0.0.1:0\", protocol: HTTP, urlMap: um, region: us-east1}\n", weights)
	c, err := config.Parse([]byte(b.String()), "test.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return c
}

// steadyProbes makes c's health checks probe every second with a 1 s
// timeout: no CPU starvation short of a second flips a verdict, for
// tests about something other than health checking.
func steadyProbes(c *config.Config) *config.Config {
	for i := range c.HealthChecks {
		interval, timeout := 1000, 1000
		c.HealthChecks[i].CheckIntervalMs, c.HealthChecks[i].TimeoutMs = &interval, &timeout
	}
	return c
}

func startServer(t *testing.T, c *config.Config) (*serve.Server, string) {
	t.Helper()
	s := servetest.Run(t, c, serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	return s, "http://" + s.FrontendAddr("fe")
}

type counts struct {
	mu     sync.Mutex
	zones  map[string]int
	status map[int]int
	errs   int
	// details counts the X-Spillway-Status-Details of answers other
	// than 200 (why the load balancer answered them), for the message.
	details map[string]int
}

// load sends requests from `workers` keep-alive clients until stop closes.
func load(url string, workers int, stop <-chan struct{}) *counts {
	c := &counts{zones: map[string]int{}, status: map[int]int{}, details: map[string]int{}}
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := cl.Get(url)
				c.mu.Lock()
				if err != nil {
					c.errs++
				} else {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					c.status[resp.StatusCode]++
					if resp.StatusCode == 200 {
						c.zones[string(body)]++
					} else {
						c.details[fmt.Sprint(resp.StatusCode, " ", resp.Header.Get("X-Spillway-Status-Details"))]++
					}
				}
				c.mu.Unlock()
			}
		}()
	}
	return c
}

// waitFor polls cond until it holds. The bound only decides how long a
// failing test takes: generous, so that a loaded 2-core machine does not
// fail a test that would pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func drained(s *serve.Server, zone string) bool {
	for _, b := range s.Health().Services[0].Backends {
		if b.Zone == zone {
			return b.Drained
		}
	}
	return false
}

func TestZoneKilledUnderLoadThenRecovers(t *testing.T) {
	order := []string{"us-east1-b", "us-east1-c", "us-east1-d"}
	bes := map[string][]*backend{}
	for _, z := range order {
		bes[z] = []*backend{startBackend(t, z), startBackend(t, z)}
	}
	s, url := startServer(t, zonesConfig(t, "", bes, order))
	waitFor(t, "first probes", func() bool { return s.Health().Services[0].Backends[0].Endpoints[0].HealthState == "HEALTHY" })

	// Kill zone b's listeners under load.
	stop := make(chan struct{})
	c := load(url, 4, stop)
	time.Sleep(200 * time.Millisecond)
	for _, b := range bes["us-east1-b"] {
		b.srv.Close()
	}
	waitFor(t, "us-east1-b drained", func() bool { return drained(s, "us-east1-b") })
	c.mu.Lock()
	c.status = map[int]int{}
	c.zones = map[string]int{}
	c.errs = 0
	c.mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	time.Sleep(100 * time.Millisecond)
	c.mu.Lock()
	after := fmt.Sprint(c.status, c.errs, c.zones)
	if c.status[200] == 0 || len(c.status) != 1 || c.errs != 0 || c.zones["us-east1-b"] != 0 {
		t.Errorf("after convergence: %s; want only 200s and nothing from us-east1-b", after)
	}
	c.mu.Unlock()

	// Recovery: the listeners come back; after the (shortened) undrain
	// hold the zone takes traffic again.
	for _, b := range bes["us-east1-b"] {
		ln, err := net.Listen("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		b.serve(t, ln)
	}
	waitFor(t, "us-east1-b undrained", func() bool { return !drained(s, "us-east1-b") })
	stop = make(chan struct{})
	c = load(url, 4, stop)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	time.Sleep(100 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.zones["us-east1-b"] == 0 || c.errs != 0 {
		t.Errorf("after recovery: zones %v, errors %d; want us-east1-b back", c.zones, c.errs)
	}
}

// Three reloads under load lose no request: every request is answered
// 200 (no 5xx, no transport error). The probes are slow and patient
// (steadyProbes): with zonesConfig's 50 ms / 40 ms, a CPU-starved
// machine can time out two probes in a row of both endpoints and mark
// every endpoint down (503s that say nothing about reloads). One 504
// backend_timeout in 10,337 requests, seen on a loaded 2-core
// machine, was a defect, not load: the transport's 100 ms probe
// deadline (when to start watching the client's context) cut the
// writing of a request whose goroutine had not been scheduled for that
// long, and the cut counted as a backend timeout, not retried (h1
// TestStarvedBeforeSendIsNoTimeout).
func TestReloadEverySecondUnderLoadLosesNothing(t *testing.T) {
	order := []string{"us-east1-b", "us-east1-c"}
	bes := map[string][]*backend{}
	for _, z := range order {
		bes[z] = []*backend{startBackend(t, z)}
	}
	cfg := steadyProbes(zonesConfig(t, "", bes, order))
	s, url := startServer(t, cfg)
	stop := make(chan struct{})
	c := load(url, 4, stop)
	for i := 0; i < 3; i++ {
		time.Sleep(time.Second)
		if err := s.Reload(context.Background(), steadyProbes(zonesConfig(t, "", bes, order))); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	time.Sleep(200 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.errs != 0 || len(c.status) != 1 || c.status[200] == 0 {
		t.Fatalf("requests lost across reloads: status %v (%v), transport errors %d", c.status, c.details, c.errs)
	}
	t.Logf("%d requests across 3 reloads, all answered 200", c.status[200])
}

func TestBadReloadKeepsServing(t *testing.T) {
	order := []string{"us-east1-b"}
	bes := map[string][]*backend{"us-east1-b": {startBackend(t, "us-east1-b")}}
	s, url := startServer(t, zonesConfig(t, "", bes, order))
	bad := zonesConfig(t, "", bes, order)
	bad.URLMaps[0].DefaultService = "nope"
	if err := s.Reload(context.Background(), bad); err == nil {
		t.Fatal("a config with a dangling reference was accepted")
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after a rejected reload: %d", resp.StatusCode)
	}
}

// The WINTICKET case (seed 003): Osaka answers 503 while its health check
// stays green; outlier detection ejects it, traffic moves to Tokyo, and
// Osaka returns after baseEjectionTime.
func TestOutlierEjectsMisbehavingRegion(t *testing.T) {
	tokyo := startBackend(t, "tokyo")
	osaka := startBackend(t, "osaka")
	var failing atomic.Bool
	failing.Store(true)
	osaka.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || !failing.Load() {
			io.WriteString(w, "osaka")
			return
		}
		http.Error(w, "broken", http.StatusServiceUnavailable)
	})
	th, tp, _ := net.SplitHostPort(tokyo.addr)
	oh, op, _ := net.SplitHostPort(osaka.addr)
	cfg := fmt.Sprintf(`healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 50, timeoutMs: 40, httpHealthCheck: {requestPath: /healthz}}
networkEndpointGroups:
- {name: neg-tokyo, zone: asia-northeast1-a, endpoints: [{ipAddress: %s, port: %s}]}
- {name: neg-osaka, zone: asia-northeast2-a, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- name: bs-default
  healthChecks: [hc]
  outlierDetection:
    interval: {seconds: 1}
    baseEjectionTime: {seconds: 1}
    maxEjectionPercent: 50
    consecutiveErrors: 5
    consecutiveGatewayFailure: 5
    enforcingConsecutiveGatewayFailure: 100
  backends:
  - {group: neg-tokyo, balancingMode: RATE, maxRatePerEndpoint: 100000}
  - {group: neg-osaka, balancingMode: RATE, maxRatePerEndpoint: 100000}
urlMaps:
- {name: um, defaultService: bs-default}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um, region: asia-northeast2}
`, th, tp, oh, op)
	c, err := config.Parse([]byte(cfg), "winticket.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, url := startServer(t, c)
	get := func() (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	// Osaka is nearest, so it gets the traffic and fails. The default
	// retry (GET, 503) goes to the next backend in the failover order,
	// Tokyo, so clients see no error while Osaka's failures count
	// towards its ejection.
	fails := 0
	for i := 0; i < 20; i++ {
		if code, _ := get(); code == 503 {
			fails++
		}
	}
	waitFor(t, "osaka ejected", func() bool {
		for _, b := range s.Health().Services[0].Backends {
			if b.Zone == "asia-northeast2-a" {
				return b.Endpoints[0].Ejected
			}
		}
		return false
	})
	if fails > 0 {
		t.Errorf("%d requests failed before the ejection, want 0 (the default retry goes to Tokyo)", fails)
	}
	if got := promValue(metricsText(t, s), `spillway_outlier_ejections_total{backend_service="bs-default"}`); got < 1 {
		t.Errorf("spillway_outlier_ejections_total = %v after an ejection", got)
	}
	for i := 0; i < 20; i++ {
		if code, body := get(); code != 200 || body != "tokyo" {
			t.Fatalf("while Osaka is ejected: %d %q, want 200 from tokyo", code, body)
		}
	}
	// Osaka heals; after baseEjectionTime it takes traffic again.
	failing.Store(false)
	waitFor(t, "osaka back", func() bool { _, b := get(); return b == "osaka" })
}

// The admin listener's /metrics reports health, drain and reload state.
func TestMetrics(t *testing.T) {
	order := []string{"us-east1-b", "us-east1-c"}
	bes := map[string][]*backend{"us-east1-b": {startBackend(t, "us-east1-b")}, "us-east1-c": {startBackend(t, "us-east1-c")}}
	s, _ := startServer(t, zonesConfig(t, "", bes, order))
	bes["us-east1-b"][0].unready.Store(true)
	waitFor(t, "us-east1-b drained", func() bool { return drained(s, "us-east1-b") })
	bad := zonesConfig(t, "", bes, order)
	bad.URLMaps[0].DefaultService = "nope"
	if err := s.Reload(context.Background(), bad); err == nil {
		t.Fatal("bad config accepted")
	}
	if err := s.Reload(context.Background(), zonesConfig(t, "", bes, order)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`spillway_backend_drained{backend_service="bs",group="neg-0",preference="DEFAULT",region="us-east1",zone="us-east1-b"} 1`,
		`spillway_backend_drained{backend_service="bs",group="neg-1",preference="DEFAULT",region="us-east1",zone="us-east1-c"} 0`,
		`spillway_backend_traffic_share{backend_service="bs",group="neg-1",preference="DEFAULT",region="us-east1",zone="us-east1-c"} 1`,
		`spillway_config_reloads_total 1`,
		`spillway_config_reload_failures_total 1`,
		`spillway_offered_rate_rps{backend_service="bs",client_region=`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A reload that moves a frontend to a port in use is rejected before
// anything is swapped: the old listener and plan keep serving.
func TestReloadToBusyPortKeepsServing(t *testing.T) {
	order := []string{"us-east1-b"}
	bes := map[string][]*backend{"us-east1-b": {startBackend(t, "us-east1-b")}}
	s, url := startServer(t, zonesConfig(t, "", bes, order))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	before := s.Snapshot().Plan
	moved := zonesConfig(t, "", bes, order)
	moved.Frontends[0].Address = busy.Addr().String()
	err = s.Reload(context.Background(), moved)
	if err == nil || !strings.Contains(err.Error(), "listen on "+busy.Addr().String()) {
		t.Fatalf("reload to a busy port: %v", err)
	}
	if s.Snapshot().Plan != before {
		t.Error("the plan was swapped although the reload failed")
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("old listener gone after a rejected reload: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("old listener answers %d", resp.StatusCode)
	}
}
