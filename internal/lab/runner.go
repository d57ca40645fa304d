// Package lab is `spillway lab`: a real local lab that reproduces seed
// 000's test-results table with real traffic. For every (config, scenario)
// it starts real HTTP backends on loopback (one per configured endpoint
// address), runs the real server (internal/serve: health checks, control
// loop, proxy) in-process, fails zones, waits until health checks and
// auto-capacity drain have converged, sends HTTPS requests through the
// frontend and counts which zone answered.
//
// Every scenario gets a fresh set of backends and a fresh server, so no
// state (health, drain, measured demand, pooled connections) carries from
// one scenario to the next and nothing has to undrain; that is why the
// lab leaves spillway.undrainHoldSec at its default.
package lab

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
	"github.com/spillwaylb/spillway/internal/sim"
)

// FailMode is how the lab fails a zone.
type FailMode int

// The failure modes.
const (
	// FailHealthCheck makes the zone's health path answer 503 while its
	// sockets stay up (mode 1).
	FailHealthCheck FailMode = 1
	// FailListeners closes the zone's listeners and open connections
	// (mode 2).
	FailListeners FailMode = 2
)

// Defaults of Options.
const (
	DefaultRequests    = 1000
	DefaultInterval    = 200 * time.Millisecond
	DefaultRate        = 300
	DefaultConcurrency = 8
)

// Options configure a lab run.
type Options struct {
	// Configs to run (default: the seed's with-policy, no-policy and
	// baseline).
	Configs []Config
	// Scenarios lists the zones to fail, one entry per scenario (nil or
	// empty entry = steady state). Default, per config: steady, then the
	// first one, two, ... all zones of the frontend's region, in name
	// order (for the seed: steady; us-south1-a; a,b; a,b,c).
	Scenarios [][]string
	// Requests per scenario (default 1000).
	Requests int
	// FailMode is how zones fail (default FailHealthCheck).
	FailMode FailMode
	// Interval is the health-check interval the lab sets (default 200 ms).
	Interval time.Duration
	// Rate paces the requests, in requests per second (default 300). The
	// seed measured at low load: the rate must stay well below the RATE
	// capacity that is left after failures (the seed's groups take
	// 3 × 100 rps each; with two primary zones drained the remaining one
	// takes 70% of the traffic), or spillover, not health, decides.
	Rate float64
	// Concurrency is the number of client connections (default 8).
	Concurrency int
	// Progress receives one line per scenario (nil: none).
	Progress io.Writer
}

func (o *Options) defaults() error {
	if o.Requests <= 0 {
		o.Requests = DefaultRequests
	}
	if o.FailMode == 0 {
		o.FailMode = FailHealthCheck
	}
	if o.FailMode != FailHealthCheck && o.FailMode != FailListeners {
		return fmt.Errorf("lab: fail mode %d: use 1 (health checks fail) or 2 (listeners stop)", o.FailMode)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Interval < 10*time.Millisecond {
		return fmt.Errorf("lab: interval %s: use at least 10ms", o.Interval)
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if len(o.Configs) == 0 {
		cs, err := SeedConfigs(nil)
		if err != nil {
			return err
		}
		o.Configs = cs
	}
	return nil
}

// Report is the outcome of a lab run.
type Report struct {
	Scenarios []Result `json:"scenarios"`
	// Elapsed is the wall time of the whole run.
	Elapsed time.Duration `json:"-"`
	// Requests, FailMode, Interval and Rate echo the options used.
	Requests int           `json:"-"`
	FailMode FailMode      `json:"-"`
	Interval time.Duration `json:"-"`
	Rate     float64       `json:"-"`
	// Fleet, when not empty, describes the fleet the requests went
	// through (a line under the table's title).
	Fleet string `json:"-"`
	// Brief leaves out the explanation under the table.
	Brief bool `json:"-"`
}

// Result is one scenario's counts.
type Result struct {
	Config   string         `json:"config"`
	Down     []string       `json:"down"`
	Requests int            `json:"requests"`
	Regions  map[string]int `json:"regions"`
	Zones    map[string]int `json:"zones"`
	Status   map[string]int `json:"status"`

	// Primary is the frontend's region (the one whose zones fail);
	// RegionOrder lists the regions primary first, and RegionZones their
	// zones, for display.
	Primary     string              `json:"-"`
	RegionOrder []string            `json:"-"`
	RegionZones map[string][]string `json:"-"`
	// Proxies is the plan's spillway.secondLayerProxies when a backend
	// service of the config uses WATERFALL_BY_REGION (0 when none does):
	// the verdict then judges zones by the spread that many proxies give.
	Proxies int `json:"-"`
	// AnyClient is, when Proxies > 0, each zone's and region's share
	// range over DefaultSpreadClients simulated clients in the same
	// scenario (sim.ClientSpread): the lab's one client is one draw of it.
	AnyClient map[string]sim.ZoneRange `json:"anyClient,omitempty"`
	// Converged is the time from failing the zones to a converged health
	// view; Elapsed the scenario's wall time.
	Converged time.Duration `json:"-"`
	Elapsed   time.Duration `json:"-"`
}

// Share returns n as a percentage of the scenario's requests.
func (r *Result) Share(n int) float64 {
	if r.Requests == 0 {
		return 0
	}
	return 100 * float64(n) / float64(r.Requests)
}

// Run runs every config × scenario and returns the counts. It stops at the
// first scenario that fails (an address that cannot be bound, a lab that
// does not converge) and returns what it has with the error.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Requests: o.Requests, FailMode: o.FailMode, Interval: o.Interval, Rate: o.Rate}
	set, cleanup, err := newSettings(o.Interval)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	for _, c := range o.Configs {
		scenarios := o.Scenarios
		if len(scenarios) == 0 {
			if scenarios, err = defaultScenarios(c, set); err != nil {
				return rep, err
			}
		}
		for _, down := range scenarios {
			res, err := runScenario(ctx, c, down, set, &o, nil)
			if err != nil {
				rep.Elapsed = time.Since(start)
				return rep, err
			}
			rep.Scenarios = append(rep.Scenarios, *res)
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// defaultScenarios: steady, then 1..n zones of the frontend's region.
func defaultScenarios(c Config, set settings) ([][]string, error) {
	p, fe, err := compile(c, set)
	if err != nil {
		return nil, err
	}
	zones := regionZones(p)[fe.Region]
	if len(zones) == 0 {
		return nil, fmt.Errorf("lab config %s: the frontend's region %q has no backends to fail (fix: set frontends[].region to the primary region)", c.Name, fe.Region)
	}
	out := [][]string{nil}
	for i := range zones {
		out = append(out, slices.Clone(zones[:i+1]))
	}
	return out, nil
}

func compile(c Config, set settings) (*plan.Plan, *config.Frontend, error) {
	cfg, err := c.Parse()
	if err != nil {
		return nil, nil, err
	}
	fe, err := rewrite(cfg, set)
	if err != nil {
		return nil, nil, fmt.Errorf("lab config %s: %w", c.Name, err)
	}
	p, err := plan.Compile(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("lab config %s: %w", c.Name, err)
	}
	return p, fe, nil
}

// regionZones maps each region to its zones (that have groups), sorted.
func regionZones(p *plan.Plan) map[string][]string {
	m := map[string][]string{}
	for _, g := range p.Groups {
		if z := groupZone(g); !slices.Contains(m[g.Region], z) {
			m[g.Region] = append(m[g.Region], z)
		}
	}
	for _, zs := range m {
		sort.Strings(zs)
	}
	return m
}

// ScenarioName is "steady" or the failed zones, e.g. "us-south1-a,b down".
func ScenarioName(down []string) string {
	if len(down) == 0 {
		return "steady"
	}
	parts := []string{down[0]}
	prefix := ""
	if i := strings.LastIndexByte(down[0], '-'); i > 0 {
		prefix = down[0][:i+1]
	}
	for _, z := range down[1:] {
		if prefix != "" && strings.HasPrefix(z, prefix) {
			parts = append(parts, strings.TrimPrefix(z, prefix))
		} else {
			parts = append(parts, z)
		}
	}
	return strings.Join(parts, ",") + " down"
}

// starter starts the Spillway side of a scenario on p's config: one
// standalone server, or a fleet's instances. It returns the servers
// (once ready) and a function that stops them all.
type starter func(ctx context.Context, p *plan.Plan) (servers []*serve.Server, stop func() error, err error)

// startStandalone is the standalone lab's starter: one serve.Server.
func startStandalone(ctx context.Context, p *plan.Plan) ([]*serve.Server, func() error, error) {
	srv, err := serve.New(p.Config, serve.Options{WatchInterval: -1})
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(runCtx) }()
	stop := func() error { cancel(); return <-errc }
	select {
	case <-srv.Ready():
		return []*serve.Server{srv}, stop, nil
	case rerr := <-errc:
		cancel()
		return nil, nil, fmt.Errorf("serve: %w", rerr)
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	}
}

// frontendURLs returns each server's https:// URL of frontend fe.
func frontendURLs(servers []*serve.Server, fe string) ([]string, error) {
	var urls []string
	for _, srv := range servers {
		addr := srv.FrontendAddr(fe)
		if addr == "" {
			return nil, fmt.Errorf("frontend %s did not bind", fe)
		}
		urls = append(urls, "https://"+addr+"/")
	}
	return urls, nil
}

// waitAll waits until every server's health view has converged on the
// down zones (see converged).
func waitAll(ctx context.Context, servers []*serve.Server, limit time.Duration, down []string) error {
	for _, srv := range servers {
		if err := waitFor(ctx, srv, limit, func(h *report.Health) string { return converged(h, down) }); err != nil {
			return err
		}
	}
	return nil
}

// runScenario starts backends and Spillway (launch; nil: one standalone
// server) for one config, fails the down zones, waits for convergence
// on every server and counts o.Requests requests, sent round-robin
// through the servers' frontends.
func runScenario(ctx context.Context, c Config, down []string, set settings, o *Options, launch starter) (res *Result, err error) {
	start := time.Now()
	label := c.Name + " / " + ScenarioName(down)
	fmt.Fprintf(o.Progress, "%s: ", label)
	defer func() {
		if err != nil {
			fmt.Fprintln(o.Progress, "failed")
		}
	}()
	p, fe, err := compile(c, set)
	if err != nil {
		return nil, err
	}
	for _, z := range down {
		if !slices.ContainsFunc(p.Groups, func(g *plan.Group) bool { return g.Zone == z }) {
			return nil, fmt.Errorf("lab: %s: zone %q has no backends in config %s", label, z, c.Name)
		}
	}

	bs, err := StartBackends(ctx, p)
	if err != nil {
		return nil, err
	}
	defer bs.Close()

	if launch == nil {
		launch = startStandalone
	}
	servers, stop, err := launch(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("lab: %s: %w", label, err)
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = fmt.Errorf("lab: %s: serve: %w", label, serr)
		}
	}()
	urls, err := frontendURLs(servers, fe.Name)
	if err != nil {
		return nil, fmt.Errorf("lab: %s: %w", label, err)
	}
	convergedAfter, err := failAndConverge(ctx, servers, bs, down, o, label)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "%d requests... ", o.Requests)

	res, zoneRegion := newResult(p, fe, c.Name, append([]string{}, down...), o.Requests, convergedAfter)
	if res.Proxies > 0 {
		if res.AnyClient, err = sim.ClientSpread(p, sim.Options{Down: down, Requests: 1000, Seed: 1}, sim.DefaultSpreadClients); err != nil {
			return nil, fmt.Errorf("lab: %s: simulate the client spread: %w", label, err)
		}
	}
	sendStart := time.Now()
	if err := send(ctx, urls, o, zoneRegion, res); err != nil {
		return nil, fmt.Errorf("lab: %s: %w", label, err)
	}
	res.Elapsed = time.Since(start)
	fmt.Fprintf(o.Progress, "done in %.1fs (requests %.1fs)\n", res.Elapsed.Seconds(), time.Since(sendStart).Seconds())
	return res, nil
}

// failAndConverge waits until every server has found every backend
// healthy, fails the down zones and waits until every server has
// converged on them, then lets the last changes settle. It returns the
// time from the failure to convergence.
func failAndConverge(ctx context.Context, servers []*serve.Server, bs *Backends, down []string, o *Options, label string) (time.Duration, error) {
	deadline := 15*time.Second + 20*o.Interval
	// Steady state first: every endpoint is probed (the prober starts each
	// target within its first interval) and found healthy before the
	// failure, as in the seed. An endpoint that passes its first probe
	// stays "UNKNOWN" in the health view (never probed and healthy look
	// the same to the engine), so only a failure would show here.
	if err := sleep(ctx, 2*o.Interval); err != nil {
		return 0, err
	}
	if err := waitAll(ctx, servers, deadline, nil); err != nil {
		return 0, fmt.Errorf("lab: %s: backends never all became healthy: %w", label, err)
	}
	if len(down) > 0 {
		fmt.Fprint(o.Progress, "waiting for convergence... ")
	}
	failed := time.Now()
	if err := failZones(bs, o.FailMode, down); err != nil {
		return 0, err
	}
	if err := waitAll(ctx, servers, deadline, down); err != nil {
		return 0, fmt.Errorf("lab: %s: no convergence: %w", label, err)
	}
	convergedAfter := time.Since(failed)
	// Settle: let anything published right after the last change land.
	if err := sleep(ctx, 2*o.Interval); err != nil {
		return 0, err
	}
	if len(down) > 0 {
		fmt.Fprintf(o.Progress, "converged in %.1fs, ", convergedAfter.Seconds())
	}
	return convergedAfter, nil
}

// failZones fails each zone's backends the mode's way: their health
// checks, or their listeners.
func failZones(bs *Backends, mode FailMode, zones []string) error {
	for _, z := range zones {
		var err error
		if mode == FailListeners {
			err = bs.StopListeners(z)
		} else {
			err = bs.FailHealth(z)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// newResult returns the empty result of a scenario run on p through
// frontend fe: every region and zone counted at 0, and the regions of
// zones for send. down is stored as given.
func newResult(p *plan.Plan, fe *config.Frontend, cfgName string, down []string, requests int, converged time.Duration) (*Result, map[string]string) {
	rz := regionZones(p)
	res := &Result{
		Config: cfgName, Down: down, Requests: requests,
		Regions: map[string]int{}, Zones: map[string]int{}, Status: map[string]int{"200": 0, "503": 0},
		Primary: fe.Region, RegionZones: rz, Converged: converged, RegionOrder: regionOrder(rz, fe.Region),
	}
	for reg, zs := range rz {
		res.Regions[reg] = 0
		for _, z := range zs {
			res.Zones[z] = 0
		}
	}
	for _, svc := range p.Services {
		if svc.Algorithm == plan.WaterfallByRegion {
			res.Proxies = p.SecondLayerProxies
		}
	}
	zoneRegion := map[string]string{}
	for _, g := range p.Groups {
		zoneRegion[g.Zone] = g.Region
	}
	return res, zoneRegion
}

func regionOrder(rz map[string][]string, primary string) []string {
	var out []string
	for r := range rz {
		if r != primary {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	if _, ok := rz[primary]; ok {
		out = append([]string{primary}, out...)
	}
	return out
}

// converged returns "" when the health view shows the down zones' endpoints
// UNHEALTHY, every other endpoint HEALTHY (or UNKNOWN, which serves), and (with autoCapacityDrain) the
// down zones' backends drained or drain-blocked; otherwise what it is
// still waiting for.
func converged(h *report.Health, down []string) string {
	if h == nil {
		return "no health report yet"
	}
	for _, svc := range h.Services {
		for _, b := range svc.Backends {
			isDown := slices.Contains(down, b.Zone)
			for _, e := range b.Endpoints {
				switch {
				case isDown && e.HealthState != "UNHEALTHY":
					return fmt.Sprintf("%s %s (%s) is %s, want UNHEALTHY", svc.Name, e.IPAddress, b.Zone, e.HealthState)
				case !isDown && e.HealthState == "UNHEALTHY":
					return fmt.Sprintf("%s %s (%s) is UNHEALTHY (%s), want HEALTHY", svc.Name, e.IPAddress, b.Zone, e.Detail)
				}
			}
			if svc.AutoDrain && isDown && len(b.Endpoints) > 0 && !b.Drained && !b.DrainBlocked {
				return fmt.Sprintf("%s: group %s is not drained yet", svc.Name, b.Group)
			}
			if !isDown && b.Drained {
				return fmt.Sprintf("%s: group %s is drained", svc.Name, b.Group)
			}
		}
	}
	return ""
}

// waitFor polls the server's health view until cond returns "".
func waitFor(ctx context.Context, srv *serve.Server, limit time.Duration, cond func(*report.Health) string) error {
	deadline := time.Now().Add(limit)
	for {
		why := cond(srv.Health())
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still waiting after %s: %s", limit, why)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tally is one worker's counts.
type tally struct {
	zones, regions, status map[string]int
	lastErr                error
}

// send sends o.Requests GET requests, paced at o.Rate in all, from
// o.Concurrency keep-alive HTTPS connections per URL, and adds the
// answers to res. The requests go round-robin through urls (several
// frontends share the same total rate); the connections to urls[i] come
// from the client address 127.0.0.(1+i), so each frontend of a fleet
// has a client of its own (one URL: 127.0.0.1, the standalone lab's
// client, which `spillway simulate --client-ip 127.0.0.1` models).
func send(ctx context.Context, urls []string, o *Options, zoneRegion map[string]string, res *Result) error {
	clients := make([]*http.Client, len(urls))
	for i := range urls {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i))}}
		tr := &http.Transport{
			DialContext:         d.DialContext,
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the lab's own self-signed certificate
			MaxIdleConnsPerHost: o.Concurrency,
			MaxConnsPerHost:     o.Concurrency,
			DisableCompression:  true,
		}
		defer tr.CloseIdleConnections()
		clients[i] = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}

	jobs := make(chan int)
	tallies := make([]tally, o.Concurrency*len(urls))
	var wg sync.WaitGroup
	for w := range tallies {
		t := &tallies[w]
		t.zones, t.regions, t.status = map[string]int{}, map[string]int{}, map[string]int{}
		wg.Go(func() {
			for i := range jobs {
				one(ctx, clients[i], urls[i], zoneRegion, t)
			}
		})
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / o.Rate)
	var err error
	for i := range o.Requests {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			if err = sleep(ctx, d); err != nil {
				break
			}
		}
		select {
		case jobs <- i % len(urls):
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tallies {
		for k, v := range t.zones {
			res.Zones[k] += v
		}
		for k, v := range t.regions {
			res.Regions[k] += v
		}
		for k, v := range t.status {
			res.Status[k] += v
		}
		if t.lastErr != nil {
			errs = append(errs, t.lastErr)
		}
	}
	// A few failed requests are a result (counted under "error"); all of
	// them failing means the lab itself is broken.
	if n := res.Status["error"]; n == o.Requests {
		return fmt.Errorf("all %d requests failed without an HTTP answer: %w", n, errors.Join(errs...))
	}
	return nil
}

// one sends a request and counts its answer.
func one(ctx context.Context, client *http.Client, url string, zoneRegion map[string]string, t *tally) {
	code, zone, err := fetch(ctx, client, url)
	t.status[code]++
	if err != nil {
		t.lastErr = err
	}
	if zone == "" {
		return
	}
	t.zones[zone]++
	reg := zoneRegion[zone]
	if reg == "" {
		reg = config.RegionOfZone(zone)
	}
	t.regions[reg]++
}

// fetch sends a GET and returns the answer's status code ("error" when
// there is no HTTP answer, "bad-body" for a 200 whose body names no
// zone) and, for a 200, the zone named in the body.
func fetch(ctx context.Context, client *http.Client, url string) (code, zone string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "error", "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "error", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "error", "", fmt.Errorf("read body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return strconv.Itoa(resp.StatusCode), "", nil
	}
	var r response
	if err := json.Unmarshal(body, &r); err != nil || r.Zone == "" {
		return "bad-body", "", nil
	}
	return "200", r.Zone, nil
}
