package lab

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spillwaylb/spillway/examples"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// Defaults of WinticketOptions.
const (
	DefaultWinticketRequests  = 200
	DefaultWinticketRate      = 100
	DefaultOutlierInterval    = time.Second
	DefaultBaseEjectionTime   = 5 * time.Second
	winticketSwitchService    = "bs-tokyo"
	winticketOutlierService   = "bs-default"
	winticketMaxUntilEjection = 50 // requests before the lab gives up on ejection
)

// WinticketConfig returns seed 003's config (examples/winticket/config.yaml,
// built into the binary).
func WinticketConfig() Config {
	return Config{Name: "winticket", File: "examples/winticket/config.yaml", Data: examples.Winticket()}
}

// WinticketOptions configure RunWinticket.
type WinticketOptions struct {
	// Config is the config to run (default: WinticketConfig). It must have
	// a backend service bs-default with outlierDetection over the
	// frontend's region and one other region, and a service bs-tokyo
	// whose weight the manual switch raises to 100.
	Config Config
	// Interval is the health-check interval the lab sets (default 200 ms).
	Interval time.Duration
	// OutlierInterval and BaseEjectionTime replace outlierDetection.interval
	// and .baseEjectionTime (defaults 1 s and 5 s, instead of the seed's
	// 10 s and 180 s) so that the scenario runs in seconds.
	OutlierInterval, BaseEjectionTime time.Duration
	// Requests per measured phase (default 200) and their rate in
	// requests per second (default 100).
	Requests int
	Rate     float64
	// Progress receives one line per phase (nil: none).
	Progress io.Writer
}

func (o *WinticketOptions) defaults() error {
	if o.Config.Data == nil {
		o.Config = WinticketConfig()
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.OutlierInterval <= 0 {
		o.OutlierInterval = DefaultOutlierInterval
	}
	if o.BaseEjectionTime <= 0 {
		o.BaseEjectionTime = DefaultBaseEjectionTime
	}
	if o.Requests <= 0 {
		o.Requests = DefaultWinticketRequests
	}
	if o.Rate <= 0 {
		o.Rate = DefaultWinticketRate
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Interval < 10*time.Millisecond || o.OutlierInterval < 100*time.Millisecond || o.BaseEjectionTime < time.Second {
		return fmt.Errorf("lab: winticket: use an interval of at least 10ms, an outlier interval of at least 100ms and a base ejection time of at least 1s")
	}
	return nil
}

// WinticketSettings are the lab's rewrites of the seed's config, printed
// with the results.
type WinticketSettings struct {
	// ProbeInterval is every health check's interval ("" when the config
	// has none, as with serverless groups).
	ProbeInterval string `json:"probeInterval"`
	// OutlierInterval and BaseEjectionTime are the lab's values;
	// ConfigInterval and ConfigBaseEjectionTime the config's.
	OutlierInterval         string `json:"outlierInterval"`
	BaseEjectionTime        string `json:"baseEjectionTime"`
	ConfigInterval          string `json:"configInterval"`
	ConfigBaseEjectionTime  string `json:"configBaseEjectionTime"`
	ConsecutiveGatewayFails int    `json:"consecutiveGatewayFailure"`
	// Primary is the frontend's region (Osaka), Fallback the other one
	// (Tokyo).
	Primary  string `json:"primaryRegion"`
	Fallback string `json:"fallbackRegion"`
	Frontend string `json:"frontend"`
}

// Phase is one step of the winticket scenario.
type Phase struct {
	// Name says what the phase does; Step numbers the seed's four phases.
	Step int    `json:"step"`
	Name string `json:"name"`
	// Requests sent, the regions that answered 200 and the statuses the
	// client saw ("error" when no HTTP answer).
	Requests int            `json:"requests"`
	Regions  map[string]int `json:"regions"`
	Status   map[string]int `json:"status"`
	// BackendFailures is the number of 503s the failing zone's backends
	// answered in this phase (the proxy may have retried them elsewhere).
	BackendFailures int `json:"backendFailures"`
	// Seconds is the phase's wall time.
	Seconds float64 `json:"seconds"`
	// Note explains the outcome; Health is the failing region's endpoints
	// in the health view (get-health) at the end of the phase.
	Note   string   `json:"note,omitempty"`
	Health []string `json:"health,omitempty"`
}

// Errors returns the requests that got no 200.
func (p *Phase) Errors() int {
	n := 0
	for k, v := range p.Status {
		if k != "200" {
			n += v
		}
	}
	return n
}

// WinticketReport is the outcome of RunWinticket.
type WinticketReport struct {
	Scenario string            `json:"scenario"`
	Settings WinticketSettings `json:"settings"`
	Phases   []Phase           `json:"phases"`
	// FailuresUntilEjection is the number of 503s the failing zone
	// answered before it was ejected; EjectedAfter the time from the
	// first failing request to the ejection; ReturnedAfter the time from
	// the ejection to its end.
	FailuresUntilEjection int     `json:"failuresUntilEjection"`
	EjectedAfter          float64 `json:"ejectedAfterSeconds"`
	ReturnedAfter         float64 `json:"returnedAfterSeconds"`
	// ReloadErrors is the number of failed requests across the reload.
	ReloadErrors int `json:"reloadErrors"`
}

// winticketRun is the state of one scenario run.
type winticketRun struct {
	o          *WinticketOptions
	srv        *serve.Server
	bs         *Backends
	url        string
	client     *http.Client
	zoneRegion map[string]string
	primary    string   // the frontend's region
	fallback   string   // the other region
	failZones  []string // the primary region's zones
	set        settings
	ejectedAt  time.Time // when the health view first showed the ejection
	// checkedBy says what health checks see of the failing region:
	// "health check green", or "no health check" (serverless groups).
	checkedBy string
	rep       *WinticketReport
}

// RunWinticket runs seed 003's scenario: Osaka (the frontend's region)
// starts answering 503 while its health check stays green, outlier
// detection ejects it and traffic moves to Tokyo, it comes back after the
// ejection time, and finally an operator switches the weights to
// bs-tokyo by hand (a Reload under load).
func RunWinticket(ctx context.Context, o WinticketOptions) (rep *WinticketReport, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	set, cleanup, err := newSettings(o.Interval)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cfg, fe, err := o.labConfig(set)
	if err != nil {
		return nil, err
	}
	rep = &WinticketReport{Scenario: "winticket"}
	if rep.Settings, err = o.settings(cfg); err != nil {
		return nil, err
	}
	p, err := plan.Compile(cfg)
	if err != nil {
		return nil, fmt.Errorf("lab: winticket: %w", err)
	}
	r, err := newWinticketRun(&o, rep, set, p, fe)
	if err != nil {
		return nil, err
	}
	if r.bs, err = StartBackends(ctx, p); err != nil {
		return nil, err
	}
	defer r.bs.Close()
	if r.srv, err = serve.New(cfg, serve.Options{WatchInterval: -1}); err != nil {
		return nil, fmt.Errorf("lab: winticket: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- r.srv.Run(runCtx) }()
	defer func() {
		cancel()
		if rerr := <-errc; rerr != nil && err == nil {
			err = fmt.Errorf("lab: winticket: serve: %w", rerr)
		}
	}()
	if err := r.awaitReady(ctx, errc, fe); err != nil {
		return nil, err
	}
	defer r.client.CloseIdleConnections()
	if err := sleep(ctx, 2*o.Interval); err != nil {
		return rep, err
	}
	if err := waitFor(ctx, r.srv, 15*time.Second, func(h *report.Health) string { return converged(h, nil) }); err != nil {
		return rep, fmt.Errorf("lab: winticket: backends never all became healthy: %w", err)
	}
	for _, step := range []func(context.Context) error{r.healthy, r.failRequests, r.recover, r.manualSwitch} {
		if err := step(ctx); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// settings returns the lab's settings of the run on cfg (the lab config)
// beside the outlier detection times of the config as given.
func (o *WinticketOptions) settings(cfg *config.Config) (WinticketSettings, error) {
	od := findService(cfg, winticketOutlierService).OutlierDetection
	set := WinticketSettings{
		ProbeInterval:           o.Interval.String(),
		OutlierInterval:         o.OutlierInterval.String(),
		BaseEjectionTime:        o.BaseEjectionTime.String(),
		ConsecutiveGatewayFails: config.DefaultOutlierConsecutiveGatewayFailure,
	}
	if od.ConsecutiveGatewayFailure != nil {
		set.ConsecutiveGatewayFails = *od.ConsecutiveGatewayFailure
	}
	if len(cfg.HealthChecks) == 0 {
		set.ProbeInterval = "" // serverless groups: nothing is probed
	}
	orig, err := o.Config.Parse()
	if err != nil {
		return set, err
	}
	if ood := findService(orig, winticketOutlierService).OutlierDetection; ood != nil {
		set.ConfigInterval = durationString(ood.Interval, config.DefaultOutlierIntervalSec)
		set.ConfigBaseEjectionTime = durationString(ood.BaseEjectionTime, config.DefaultOutlierBaseEjectionTimeSec)
	}
	return set, nil
}

// newWinticketRun returns the run of p through frontend fe: the
// frontend's region fails, the alphabetically first other region is the
// fallback.
func newWinticketRun(o *WinticketOptions, rep *WinticketReport, set settings, p *plan.Plan, fe *config.Frontend) (*winticketRun, error) {
	r := &winticketRun{o: o, rep: rep, set: set, zoneRegion: map[string]string{}, primary: fe.Region, checkedBy: "no health check"}
	for _, e := range p.Endpoints {
		if e.Group.Region == fe.Region && e.HealthCheck != nil {
			r.checkedBy = "health check green"
		}
	}
	for region, zones := range regionZones(p) {
		if region == fe.Region {
			r.failZones = zones
		} else if r.fallback == "" || region < r.fallback {
			r.fallback = region
		}
		for _, z := range zones {
			r.zoneRegion[z] = region
		}
	}
	if len(r.failZones) == 0 || r.fallback == "" {
		return nil, fmt.Errorf("lab: winticket: want backends in the frontend's region %s and in one other region", fe.Region)
	}
	rep.Settings.Primary, rep.Settings.Fallback = r.primary, r.fallback
	return r, nil
}

// awaitReady waits until the server is ready (errc receives its Run's
// error if it ends first; the error is put back for the caller's
// deferred wait), then sets the frontend's URL and the client.
func (r *winticketRun) awaitReady(ctx context.Context, errc chan error, fe *config.Frontend) error {
	select {
	case <-r.srv.Ready():
	case rerr := <-errc:
		errc <- rerr // for the deferred wait
		return fmt.Errorf("lab: winticket: serve: %w", rerr)
	case <-ctx.Done():
		return ctx.Err()
	}
	addr := r.srv.FrontendAddr(fe.Name)
	if addr == "" {
		return fmt.Errorf("lab: winticket: frontend %s did not bind", fe.Name)
	}
	r.rep.Settings.Frontend = "https://" + addr + "/"
	r.url = r.rep.Settings.Frontend
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the lab's own self-signed certificate
		MaxIdleConnsPerHost: DefaultConcurrency,
		DisableCompression:  true,
	}
	r.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	return nil
}

// labConfig parses the config and applies the lab settings: fast probes,
// an HTTPS frontend on an ephemeral port, and short outlier detection
// times on every service that sets outlierDetection.
func (o *WinticketOptions) labConfig(set settings) (*config.Config, *config.Frontend, error) {
	cfg, err := o.Config.Parse()
	if err != nil {
		return nil, nil, err
	}
	if findService(cfg, winticketSwitchService) == nil {
		return nil, nil, fmt.Errorf("lab: winticket: config %s has no backend service %s for the manual switch", o.Config.File, winticketSwitchService)
	}
	if svc := findService(cfg, winticketOutlierService); svc == nil || svc.OutlierDetection == nil {
		return nil, nil, fmt.Errorf("lab: winticket: config %s has no backend service %s with outlierDetection", o.Config.File, winticketOutlierService)
	}
	for i := range cfg.BackendServices {
		if od := cfg.BackendServices[i].OutlierDetection; od != nil {
			od.Interval = toDuration(o.OutlierInterval)
			od.BaseEjectionTime = toDuration(o.BaseEjectionTime)
		}
	}
	fe, err := rewrite(cfg, set)
	if err != nil {
		return nil, nil, fmt.Errorf("lab: winticket: %w", err)
	}
	return cfg, fe, nil
}

// switched returns the lab config (re-parsed and rewritten the same way,
// with the same certificate files, so the frontend's listener is kept)
// whose URL maps send everything to bs-tokyo: the operator's manual
// switch from weights 100/0/0 to 0/100/0.
func (r *winticketRun) switched() (*config.Config, error) {
	cfg, _, err := r.o.labConfig(r.set)
	if err != nil {
		return nil, err
	}
	for i := range cfg.URLMaps {
		ra := cfg.URLMaps[i].DefaultRouteAction
		if ra == nil {
			continue
		}
		for j := range ra.WeightedBackendServices {
			w := &ra.WeightedBackendServices[j]
			w.Weight = 0
			if config.RefName(w.BackendService) == winticketSwitchService {
				w.Weight = 100
			}
		}
	}
	return cfg, nil
}

func findService(cfg *config.Config, name string) *config.BackendService {
	for i := range cfg.BackendServices {
		if cfg.BackendServices[i].Name == name {
			return &cfg.BackendServices[i]
		}
	}
	return nil
}

func toDuration(d time.Duration) *config.Duration {
	return &config.Duration{Seconds: int64(d / time.Second), Nanos: int32(d % time.Second)}
}

func durationString(d *config.Duration, defSec int) string {
	if d == nil {
		return (time.Duration(defSec) * time.Second).String()
	}
	return (time.Duration(d.Seconds)*time.Second + time.Duration(d.Nanos)).String()
}

// newPhase starts a phase.
func newPhase(step int, name string) *Phase {
	return &Phase{Step: step, Name: name, Regions: map[string]int{}, Status: map[string]int{}}
}

// add counts a tally into the phase.
func (p *Phase) add(t *tally) {
	for k, v := range t.regions {
		p.Regions[k] += v
	}
	for k, v := range t.status {
		p.Status[k] += v
	}
}

func (r *winticketRun) finish(p *Phase, start time.Time, failedBefore int) {
	p.Seconds = time.Since(start).Seconds()
	p.BackendFailures = r.failed() - failedBefore
	p.Health = r.health()
	for _, k := range []string{r.primary, r.fallback} {
		p.Regions[k] += 0
	}
	p.Status["200"] += 0
	r.rep.Phases = append(r.rep.Phases, *p)
	fmt.Fprintf(r.o.Progress, "phase %d %s: %d requests, %s %d, %s %d, errors %d\n",
		p.Step, p.Name, p.Requests, r.primary, p.Regions[r.primary], r.fallback, p.Regions[r.fallback], p.Errors())
}

// failed is the number of 503s the failing zones have answered.
func (r *winticketRun) failed() int {
	n := 0
	for _, z := range r.failZones {
		n += r.bs.FailedRequests(z)
	}
	return n
}

// health lists the failing region's endpoints of the outlier-detecting
// service as get-health shows them.
func (r *winticketRun) health() []string {
	h := r.srv.Health()
	if h == nil {
		return nil
	}
	var out []string
	for _, svc := range h.Services {
		if svc.Name != winticketOutlierService {
			continue
		}
		for _, b := range svc.Backends {
			for _, e := range b.Endpoints {
				s := fmt.Sprintf("%s %s %s (%s) %s", svc.Name, b.Group, e.IPAddress, reportZone(b), e.HealthState)
				if e.Ejected {
					s += " EJECTED"
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// ejected reports whether any failing-zone endpoint of the outlier
// service is ejected.
func (r *winticketRun) ejected() bool {
	h := r.srv.Health()
	if h == nil {
		return false
	}
	for _, svc := range h.Services {
		if svc.Name != winticketOutlierService {
			continue
		}
		for _, b := range svc.Backends {
			if !slices.Contains(r.failZones, reportZone(b)) {
				continue
			}
			for _, e := range b.Endpoints {
				if e.Ejected {
					return true
				}
			}
		}
	}
	return false
}

// load sends n requests at the configured rate from DefaultConcurrency
// connections and counts them into p.
func (r *winticketRun) load(ctx context.Context, p *Phase, n int) error {
	o := &Options{Requests: n, Rate: r.o.Rate, Concurrency: DefaultConcurrency}
	res := &Result{Regions: map[string]int{}, Zones: map[string]int{}, Status: map[string]int{}}
	if err := send(ctx, []string{r.url}, o, r.zoneRegion, res); err != nil {
		return fmt.Errorf("lab: winticket: %s: %w", p.Name, err)
	}
	p.Requests += n
	for k, v := range res.Regions {
		p.Regions[k] += v
	}
	for k, v := range res.Status {
		p.Status[k] += v
	}
	return nil
}

// single sends one request and counts it into p.
func (r *winticketRun) single(ctx context.Context, p *Phase) {
	t := &tally{zones: map[string]int{}, regions: map[string]int{}, status: map[string]int{}}
	one(ctx, r.client, r.url, r.zoneRegion, t)
	p.Requests++
	p.add(t)
}

// singleWhileEjected sends one request and counts it into p if the
// primary region was still ejected when it returned; a request during
// which the ejection ended could have gone either way, so it is counted
// in neither phase. It reports whether the region is still ejected.
func (r *winticketRun) singleWhileEjected(ctx context.Context, p *Phase) bool {
	t := &tally{zones: map[string]int{}, regions: map[string]int{}, status: map[string]int{}}
	one(ctx, r.client, r.url, r.zoneRegion, t)
	if !r.ejected() {
		return false
	}
	p.Requests++
	p.add(t)
	return true
}

// healthy is phase 1: everything is served by the frontend's region.
func (r *winticketRun) healthy(ctx context.Context) error {
	start, before := time.Now(), r.failed()
	p := newPhase(1, "healthy")
	if err := r.load(ctx, p, r.o.Requests); err != nil {
		return err
	}
	p.Note = fmt.Sprintf("all to %s, the frontend's (nearest) region", label(r.primary))
	r.finish(p, start, before)
	return nil
}

// failRequests is phase 2: the primary region answers 503 with green
// health checks until outlier detection ejects it.
func (r *winticketRun) failRequests(ctx context.Context) error {
	for _, z := range r.failZones {
		if err := r.bs.FailRequests(z); err != nil {
			return err
		}
	}
	start, before := time.Now(), r.failed()
	p := newPhase(2, regionName(r.primary)+" answers 503, "+r.checkedBy)
	gap := time.Duration(float64(time.Second) / r.o.Rate)
	for !r.ejected() {
		if p.Requests >= winticketMaxUntilEjection {
			return fmt.Errorf("lab: winticket: %s not ejected after %d requests (%d answered 503); health: %v", r.primary, p.Requests, r.failed()-before, r.health())
		}
		r.single(ctx, p)
		if err := sleep(ctx, gap); err != nil {
			return err
		}
	}
	r.ejectedAt = time.Now()
	r.rep.EjectedAfter = r.ejectedAt.Sub(start).Seconds()
	r.rep.FailuresUntilEjection = r.failed() - before
	p.Note = fmt.Sprintf("%s answered %d×503 to %d client requests (%d of them got 503; without a retryPolicy a 503 is retried once), then outlier detection ejected it %.2fs after the first failure",
		label(r.primary), r.rep.FailuresUntilEjection, p.Requests, p.Errors(), r.rep.EjectedAfter)
	r.finish(p, start, before)

	start, before = time.Now(), r.failed()
	p = newPhase(2, regionName(r.primary)+" ejected")
	if err := r.load(ctx, p, r.o.Requests); err != nil {
		return err
	}
	p.Note = fmt.Sprintf("100%% %s while %s is ejected", label(r.fallback), label(r.primary))
	r.finish(p, start, before)
	return nil
}

// recover is phase 3: the primary region answers again, and takes
// traffic back once its ejection time is over.
func (r *winticketRun) recover(ctx context.Context) error {
	for _, z := range r.failZones {
		if err := r.bs.Recover(ctx, z); err != nil {
			return err
		}
	}
	start, before := time.Now(), r.failed()
	p := newPhase(3, regionName(r.primary)+" healthy again, still ejected")
	limit := 3*r.o.BaseEjectionTime + 3*r.o.OutlierInterval + 5*time.Second
	gap := time.Duration(float64(time.Second) / r.o.Rate)
	for r.ejected() {
		if time.Since(start) > limit {
			return fmt.Errorf("lab: winticket: %s still ejected after %s", r.primary, limit)
		}
		if !r.singleWhileEjected(ctx, p) {
			break
		}
		if err := sleep(ctx, 4*gap); err != nil {
			return err
		}
	}
	r.rep.ReturnedAfter = time.Since(r.ejectedAt).Seconds()
	p.Note = fmt.Sprintf("%s returns %.1fs after its ejection (lab baseEjectionTime %s, outlier interval %s)", label(r.primary), r.rep.ReturnedAfter, r.o.BaseEjectionTime, r.o.OutlierInterval)
	r.finish(p, start, before)

	start, before = time.Now(), r.failed()
	p = newPhase(3, regionName(r.primary)+" back")
	if err := r.load(ctx, p, r.o.Requests); err != nil {
		return err
	}
	p.Note = fmt.Sprintf("%s takes its traffic back", label(r.primary))
	r.finish(p, start, before)
	return nil
}

// manualSwitch is phase 4: the operator reloads with weights 0/100/0
// while traffic flows.
func (r *winticketRun) manualSwitch(ctx context.Context) error {
	cfg, err := r.switched()
	if err != nil {
		return err
	}
	start, before := time.Now(), r.failed()
	p := newPhase(4, "reload 0/100/0 under load")
	var wg sync.WaitGroup
	var loadErr error
	wg.Go(func() { loadErr = r.load(ctx, p, 2*r.o.Requests) })
	// Reload a quarter of the way through the traffic.
	if err := sleep(ctx, time.Duration(float64(r.o.Requests)/2/r.o.Rate*float64(time.Second))); err != nil {
		wg.Wait()
		return err
	}
	reloadStart := time.Now()
	rerr := r.srv.Reload(ctx, cfg)
	took := time.Since(reloadStart)
	wg.Wait()
	if rerr != nil {
		return fmt.Errorf("lab: winticket: reload: %w", rerr)
	}
	if loadErr != nil {
		return loadErr
	}
	r.rep.ReloadErrors = p.Errors()
	p.Note = fmt.Sprintf("Reload (weights %s 100) took %s; %d failed requests across it", winticketSwitchService, took.Round(time.Microsecond), r.rep.ReloadErrors)
	r.finish(p, start, before)

	start, before = time.Now(), r.failed()
	p = newPhase(4, "after the switch")
	if err := r.load(ctx, p, r.o.Requests); err != nil {
		return err
	}
	p.Note = fmt.Sprintf("100%% %s (%s)", label(r.fallback), winticketSwitchService)
	r.finish(p, start, before)
	return nil
}

// WriteWinticketJSON prints the report as indented JSON.
func WriteWinticketJSON(w io.Writer, rep *WinticketReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("lab: write JSON: %w", err)
	}
	return nil
}

// WriteWinticketTable prints the lab settings, one row per phase and the
// health view after each phase.
func WriteWinticketTable(w io.Writer, rep *WinticketReport) error {
	s := rep.Settings
	var b strings.Builder
	fmt.Fprintf(&b, "WINTICKET (seed 003): bs-default = %s + %s with outlierDetection; the frontend serves from %s\n", label(s.Fallback), label(s.Primary), label(s.Primary))
	probes := "no health checks"
	if s.ProbeInterval != "" {
		probes = "health checks every " + s.ProbeInterval
	}
	fmt.Fprintf(&b, "lab settings: %s; outlierDetection.interval %s -> %s, baseEjectionTime %s -> %s (consecutiveGatewayFailure %d unchanged); frontend %s\n\n",
		probes, s.ConfigInterval, s.OutlierInterval, s.ConfigBaseEjectionTime, s.BaseEjectionTime, s.ConsecutiveGatewayFails, s.Frontend)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "phase\t\trequests\t%s\t%s\tclient errors\t503s answered by %s\ttime\n", regionName(s.Primary), regionName(s.Fallback), regionName(s.Primary))
	for _, p := range rep.Phases {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%.1fs\n", p.Step, p.Name, p.Requests, p.Regions[s.Primary], p.Regions[s.Fallback], p.Errors(), p.BackendFailures, p.Seconds)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("lab: write table: %w", err)
	}
	b.WriteString("\n")
	var last []string
	for _, p := range rep.Phases {
		fmt.Fprintf(&b, "%d %s: %s\n", p.Step, p.Name, p.Note)
		if !slices.Equal(p.Health, last) {
			for _, h := range p.Health {
				fmt.Fprintf(&b, "    get-health: %s\n", h)
			}
		}
		last = p.Health
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("lab: write table: %w", err)
	}
	return nil
}

// reportZone is a health view backend's zone, or its region for a
// regional (serverless) group, as groupZone places it.
func reportZone(b report.Backend) string {
	if b.Zone == "" {
		return b.Region
	}
	return b.Zone
}

// label names a region for the report: "Osaka (asia-northeast2)".
func label(region string) string {
	if n := regionName(region); n != region {
		return n + " (" + region + ")"
	}
	return region
}

// regionName is the city of the seed's regions, else the region.
func regionName(region string) string {
	switch region {
	case "asia-northeast1":
		return "Tokyo"
	case "asia-northeast2":
		return "Osaka"
	}
	return region
}
