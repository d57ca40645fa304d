// Package sim drives Spillway's control state and decision engine on a
// virtual clock: probes, failures, drain and undrain happen in virtual
// time, and requests are sampled from the same engine.View the proxy uses,
// so a simulation predicts what `spillway serve` does. RunDNS does the
// same for DNS queries to a GSLB name, through the DNS interface (the
// gslb.Server itself, adapted by the CLI). It is pure and deterministic
// for a given seed.
package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/route"
)

// epoch is virtual time zero.
func epoch() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// Options configure one simulation.
type Options struct {
	// Requests is the number of requests counted in count mode (Rate 0).
	Requests int
	// Rate (requests per second) and Duration select rate mode: requests
	// arrive evenly over Duration, and RATE capacity and spillover apply.
	Rate     float64
	Duration time.Duration
	// Step is the timeline bucket width in rate mode (0: Duration/10).
	Step time.Duration
	Seed uint64
	// ClientRegion is where requests come from ("" = the frontend's
	// region, or none).
	ClientRegion string
	// ClientIP, when set, is the one client address all requests come
	// from, as in a lab or a curl loop: under WATERFALL_BY_REGION it binds
	// them to that client's second-layer proxies and zones, as the proxy
	// does. Empty: requests from many clients (the split over all of them).
	ClientIP string
	// URLMap names the URL map ("" = the first frontend's, or the only one).
	URLMap string
	// Host and Path are matched against the URL map (default "/" on any host).
	Host, Path string
	// Down are failed before counting starts: zones, regions, group names
	// or ip:port endpoints.
	Down []string
	// Events script failures and recoveries after counting starts (rate
	// mode), at offsets from the start of counting.
	Events []Event
	// FailAs is what a down endpoint does to requests sent to it before
	// its health checks take it out (default FailRefused).
	FailAs FailMode
}

// Event fails (Down) or recovers targets at an offset.
type Event struct {
	At      time.Duration
	Down    bool
	Targets []string
}

// Result is a simulation's outcome. Counts, not shares.
type Result struct {
	Requests int            `json:"requests"`
	Regions  map[string]int `json:"regions"`
	// Zones counts by zone; a regional group's (plan.Group.ZoneOrRegion)
	// under its region's name.
	Zones  map[string]int `json:"zones"`
	Status map[string]int `json:"status"`
	// Retries counts the retries made after failed attempts (a request
	// retried once counts one).
	Retries int `json:"retries"`
	// ConvergedAfter is the virtual time from the failure to the last
	// state change before counting.
	ConvergedAfter Duration `json:"convergedAfter"`
	// Timeline holds per-step counts in rate mode.
	Timeline []Bucket `json:"timeline,omitempty"`
	// Services explains each backend service's state at the end.
	Services []ServiceState `json:"services"`
	// Reasons counts the reasons of non-200 answers.
	Reasons map[string]int `json:"reasons,omitempty"`
	// ClientSpread, when set (ClientSpread, for one client under
	// WATERFALL_BY_REGION), is each zone's and region's share range over
	// many clients: what any one client may see.
	ClientSpread map[string]ZoneRange `json:"clientSpread,omitempty"`
	// ZoneOrder is the Zones keys for printing, sorted.
	ZoneOrder []string `json:"-"`
}

// Duration marshals as a Go duration string.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Bucket is one timeline step.
type Bucket struct {
	Start    Duration       `json:"start"`
	Requests int            `json:"requests"`
	Zones    map[string]int `json:"zones"`
	Status   map[string]int `json:"status"`
	// Retried counts the retries of the step's requests.
	Retried int `json:"retried"`
}

// ServiceState is a backend service's backends at the end of a run.
type ServiceState struct {
	Name     string         `json:"name"`
	Backends []BackendState `json:"backends"`
}

// BackendState is one backend of a service at the end of a run.
type BackendState struct {
	Group        string  `json:"group"`
	Zone         string  `json:"zone"`
	Preferred    bool    `json:"preferred"`
	Healthy      int     `json:"healthy"`
	Members      int     `json:"members"`
	Drained      bool    `json:"drained"`
	DrainBlocked bool    `json:"drainBlocked"`
	Share        float64 `json:"share"` // of the service's traffic from the client region
}

// Run simulates p under o.
func Run(p *plan.Plan, o Options) (*Result, error) {
	s, err := newSim(p, o)
	if err != nil {
		return nil, err
	}
	return s.run()
}

type sim struct {
	p      *plan.Plan
	o      Options
	st     *control.State
	view   *engine.View
	rng    *rand.Rand
	now    time.Time
	down   []bool // per endpoint
	queue  eventQueue
	table  *route.Table
	client engine.Client
	req    route.Request
	res    *Result
	// lastChange is the virtual time of the last state change.
	lastChange time.Time
	// dns is the DNS server of a DNS simulation (RunDNS), nil otherwise.
	dns *dnsRun
	// flying holds the requests whose failed attempt awaits its retry.
	flying flights
}

// newCore returns a simulation of p's control state at virtual time
// zero, before any probe.
func newCore(p *plan.Plan, seed uint64) *sim {
	return &sim{p: p, st: control.New(p), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: epoch(), down: make([]bool, len(p.Endpoints))}
}

func newSim(p *plan.Plan, o Options) (*sim, error) {
	if o.Rate > 0 && o.Duration <= 0 {
		return nil, fmt.Errorf("--rate needs --duration (for example --duration 60s)")
	}
	um, fe, err := pickURLMap(p, o.URLMap)
	if err != nil {
		return nil, err
	}
	table, err := route.Compile(um.Config)
	if err != nil {
		return nil, fmt.Errorf("URL map %s: %w", um.Name, err)
	}
	p, client, err := clientOf(p, o, fe)
	if err != nil {
		return nil, err
	}
	s := newCore(p, o.Seed)
	s.o = o
	if o.Requests <= 0 && o.Rate <= 0 {
		s.o.Requests = 1000
	}
	s.table = table
	s.client = client
	s.req = route.Request{Host: o.Host, Path: o.Path, Method: "GET"}
	if s.req.Path == "" {
		s.req.Path = "/"
	}
	if err := s.checkTargets(o.Down, o.Events); err != nil {
		return nil, err
	}
	s.res = newResult(p)
	return s, nil
}

// clientOf returns the simulated client of o: its hash key (--client-ip)
// and its region (--client-region, else the frontend's fe). A region
// the plan does not have joins a copy of p, which clientOf returns.
func clientOf(p *plan.Plan, o Options, fe *plan.Frontend) (*plan.Plan, engine.Client, error) {
	client := engine.Client{Region: -1}
	if o.ClientIP != "" {
		a, err := netip.ParseAddr(o.ClientIP)
		if err != nil {
			return nil, client, fmt.Errorf("--client-ip %q: not an IP address (fix: give one address, such as 127.0.0.1 or ::1)", o.ClientIP)
		}
		client.Addr, client.HasAddr = engine.HashKey(a.Unmap().String()), true
	}
	region := o.ClientRegion
	if region == "" && fe != nil {
		region = fe.Region
	}
	if region != "" {
		// Any built-in Google Cloud region may send the requests, not only
		// the plan's regions: it joins a copy of the plan.
		var err error
		if p, client.Region, err = p.WithClientRegion(region); err != nil {
			return nil, client, fmt.Errorf("--client-region: %w", err)
		}
	}
	return p, client, nil
}

// checkTargets fails on the first --down or event target that names
// nothing in the plan.
func (s *sim) checkTargets(down []string, events []Event) error {
	for _, d := range down {
		if _, err := s.resolve(d); err != nil {
			return fmt.Errorf("--down: %w", err)
		}
	}
	for _, ev := range events {
		for _, t := range ev.Targets {
			if _, err := s.resolve(t); err != nil {
				return fmt.Errorf("event at %s: %w", ev.At, err)
			}
		}
	}
	return nil
}

// newResult returns an empty result over p's regions and zones (zones
// sorted), with the 200 and 503 statuses present.
func newResult(p *plan.Plan) *Result {
	res := &Result{Regions: map[string]int{}, Zones: map[string]int{}, Status: map[string]int{"200": 0, "503": 0}}
	seen := map[string]bool{}
	for _, g := range p.Groups {
		res.Regions[g.Region] = 0
		z := g.ZoneOrRegion()
		if !seen[z] {
			seen[z] = true
			res.ZoneOrder = append(res.ZoneOrder, z)
		}
		res.Zones[z] = 0
	}
	sort.Strings(res.ZoneOrder)
	return res
}

func pickURLMap(p *plan.Plan, name string) (*plan.URLMap, *plan.Frontend, error) {
	if name != "" {
		um := p.URLMaps[name]
		if um == nil {
			return nil, nil, fmt.Errorf("--url-map %q: unknown URL map (fix: use one of %s)", name, strings.Join(urlMapNames(p), ", "))
		}
		for _, f := range p.Frontends {
			if f.URLMap == um {
				return um, f, nil
			}
		}
		return um, nil, nil
	}
	for _, f := range p.Frontends {
		if f.URLMap != nil {
			return f.URLMap, f, nil
		}
	}
	if len(p.URLMaps) == 1 {
		for _, um := range p.URLMaps {
			return um, nil, nil
		}
	}
	if len(p.URLMaps) == 0 {
		return nil, nil, fmt.Errorf("the config has no urlMaps: nothing routes requests (fix: add a urlMaps entry with a defaultService)")
	}
	return nil, nil, fmt.Errorf("the config has several URL maps and no frontend picks one (fix: pass --url-map, one of %s)", strings.Join(urlMapNames(p), ", "))
}

func urlMapNames(p *plan.Plan) []string {
	var n []string
	for k := range p.URLMaps {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// matchEndpoints returns the IDs of the endpoints a --down target names
// (by zone, region, group, ip:port or instance).
func (s *sim) matchEndpoints(t string) []int {
	var ids []int
	for _, e := range s.p.Endpoints {
		g := e.Group
		if t == g.Zone || t == g.Region || t == g.Name || t == e.Addr || t == e.Instance {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// resolve maps a --down target to endpoint IDs.
func (s *sim) resolve(t string) ([]int, error) {
	ids := s.matchEndpoints(t)
	if len(ids) == 0 {
		return nil, fmt.Errorf("%q matches no zone, region, group, instance or ip:port endpoint (fix: %s)", t, s.endpointHint())
	}
	return ids, nil
}

// endpointHint suggests --down targets that name endpoints.
func (s *sim) endpointHint() string {
	if len(s.p.Endpoints) == 0 {
		return "the config has no endpoints"
	}
	zones := map[string]bool{}
	for _, g := range s.p.Groups {
		zones[g.ZoneOrRegion()] = true
	}
	var zl []string
	for z := range zones {
		zl = append(zl, z)
	}
	sort.Strings(zl)
	return fmt.Sprintf("use one of the zones %s, or an endpoint address such as %s", strings.Join(zl, ", "), s.p.Endpoints[0].Addr)
}

func (s *sim) setDown(targets []string, down bool) {
	for _, t := range targets {
		for _, id := range s.matchEndpoints(t) {
			s.down[id] = down
		}
	}
	if s.dns != nil {
		s.dns.setDown(targets, down)
	}
}

func (s *sim) refresh() {
	if s.view == nil || s.view.Version != s.st.Version() {
		s.view = engine.NextView(s.st, s.view)
		s.lastChange = s.now
	}
}

func (s *sim) run() (*Result, error) {
	s.warmStart()
	failAt := s.now
	s.setDown(s.o.Down, true)
	s.advance(s.now.Add(s.horizon()))
	s.res.ConvergedAfter = Duration(s.lastChange.Sub(failAt))

	if s.o.Rate > 0 {
		s.runRate()
	} else {
		for i := 0; i < s.o.Requests; i++ {
			s.request(-1)
		}
		s.land(maxTime())
	}
	s.explain()
	return s.res, nil
}

// warmStart starts from a running deployment: every endpoint has passed
// its probes, and probes are spread over their interval.
func (s *sim) warmStart() {
	for _, e := range s.p.Endpoints {
		s.st.ObserveProbe(e.ID, true, "", s.now)
		if hc := e.HealthCheck; hc != nil {
			off := time.Duration(s.rng.Int64N(int64(hc.Interval)))
			heap.Push(&s.queue, &event{at: s.now.Add(off), kind: evProbe, ep: e.ID})
		}
	}
	s.refresh()
}

// horizon is long enough for every health check to cross its thresholds.
func (s *sim) horizon() time.Duration {
	h := time.Second
	for _, hc := range s.p.HealthChecks {
		t := hc.Interval*time.Duration(max(hc.HealthyThreshold, hc.UnhealthyThreshold)+1) + hc.Timeout
		h = max(h, t)
	}
	return h
}

// advance processes queued events up to and including `until`, then
// settles pending undrain deadlines that fall before it.
func (s *sim) advance(until time.Time) {
	for {
		next := s.queue.peek()
		dl := s.st.NextDeadline()
		if !dl.IsZero() && !dl.After(until) && (next == nil || dl.Before(next.at)) {
			s.now = dl
			s.st.Tick(s.now)
			s.refresh()
			continue
		}
		if next == nil || next.at.After(until) {
			break
		}
		ev := heap.Pop(&s.queue).(*event)
		s.now = ev.at
		switch ev.kind {
		case evProbe:
			s.probe(ev)
		case evProbeFailed:
			s.st.ObserveProbe(ev.ep, false, "simulated failure: probe timed out", s.now)
		case evDNSProbe:
			s.dns.probe(ev, s.now)
			heap.Push(&s.queue, ev)
		case evScript:
			s.setDown(ev.script.Targets, ev.script.Down)
		}
		s.refresh()
		if s.dns != nil {
			s.dns.sample(s.now, s.view)
		}
	}
	s.now = until
	s.st.Tick(s.now)
	s.refresh()
}

// probe runs the probe of event ev and queues the next one. A probe of
// a blackholed endpoint fails when its health check's timeout expires.
func (s *sim) probe(ev *event) {
	e := s.p.Endpoints[ev.ep]
	switch {
	case !s.down[ev.ep]:
		s.st.ObserveProbe(ev.ep, true, "", s.now)
	case s.o.FailAs == FailBlackhole:
		heap.Push(&s.queue, &event{at: s.now.Add(e.HealthCheck.Timeout), kind: evProbeFailed, ep: ev.ep})
	default:
		s.st.ObserveProbe(ev.ep, false, "simulated failure", s.now)
	}
	ev.at = ev.at.Add(e.HealthCheck.Interval)
	heap.Push(&s.queue, ev)
}

// maxTime is a time after every event of a run.
func maxTime() time.Time { return epoch().Add(1 << 62) }

// until lands the requests in flight due by t and advances the clock to t.
func (s *sim) until(t time.Time) {
	s.land(t)
	s.advance(t)
}

// request samples one request at the current virtual time, counted in
// timeline bucket `bucket` (-1: none), and returns the backend service it
// went to (-1 for none). A request whose attempt meets a down endpoint is
// retried as the proxy would, now or when the attempt's timeout expires.
func (s *sim) request(bucket int) int {
	s.res.Requests++
	if bucket >= 0 {
		s.res.Timeline[bucket].Requests++
	}
	a := s.table.Match(&s.req)
	var code, zone string
	svcID := -1
	switch {
	case a.Redirect != nil:
		code = strconv.Itoa(a.Redirect.Code)
	case a.Fault != nil && a.Fault.Abort != nil && route.Percent(s.rng.Uint64(), a.Fault.Abort.Percentage):
		// Aborted before any backend is chosen, as the proxy does.
		code = strconv.Itoa(a.Fault.Abort.HTTPStatus)
		s.reason("fault injection abort")
	default:
		name, _ := a.PickService(a.NextDraw())
		svc := s.p.ServiceByName[name]
		if svc == nil {
			if s.p.Buckets[name] != nil {
				// A backend bucket answers from its directory (or cache).
				code = "200"
				s.reason("served by backend bucket " + name)
				break
			}
			code = "503"
			s.reason("backend service " + name + " cannot be served")
			break
		}
		svcID = svc.ID
		d := s.view.PickClient(svc.ID, s.client, s.view.NextDraw(svc.ID, s.client.Region), 0, false)
		if d.Status != 0 {
			code = strconv.Itoa(d.Status)
			s.reason(d.Reason)
			break
		}
		var done bool
		if code, zone, done = s.send(d, s.p.RetryPolicy(a.Retry, s.req.Method), exchangeTimeout(a.Timeout, svc), bucket); !done {
			return svcID
		}
	}
	s.count(bucket, code, zone)
	return svcID
}

// exchangeTimeout is the proxy's timeout of an exchange: the route's,
// else the backend service's timeoutSec (30 s when unset).
func exchangeTimeout(route time.Duration, svc *plan.Service) time.Duration {
	if route > 0 {
		return route
	}
	return svc.Timeout
}

// reason counts why a request was not served.
func (s *sim) reason(why string) {
	if s.res.Reasons == nil {
		s.res.Reasons = map[string]int{}
	}
	s.res.Reasons[why]++
}

func (s *sim) runRate() {
	start := s.now
	step := s.o.Step
	if step <= 0 {
		step = s.o.Duration / 10
		if step <= 0 {
			step = s.o.Duration
		}
	}
	for _, ev := range s.o.Events {
		heap.Push(&s.queue, &event{at: start.Add(ev.At), kind: evScript, script: ev})
	}
	// Steady state: the demand a running deployment would have measured.
	s.primeDemand()
	window := s.p.DemandWindow
	counts := make([][]int, len(s.p.Services))
	for i := range counts {
		counts[i] = make([]int, len(s.p.Regions)+1) // last: no region
	}
	nextWindow := start.Add(window)
	total := int(s.o.Rate * s.o.Duration.Seconds())
	interval := time.Duration(float64(time.Second) / s.o.Rate)
	for i := 0; i < total; i++ {
		t := start.Add(time.Duration(i) * interval)
		for !nextWindow.After(t) {
			s.until(nextWindow)
			for svc := range counts {
				for r := range counts[svc] {
					region := r
					if r == len(s.p.Regions) {
						region = -1
					}
					s.st.SetDemand(svc, region, float64(counts[svc][r])/window.Seconds(), s.now)
					counts[svc][r] = 0
				}
			}
			s.refresh()
			nextWindow = nextWindow.Add(window)
		}
		s.until(t)
		if bs := start.Add(time.Duration(len(s.res.Timeline)) * step); len(s.res.Timeline) == 0 || !t.Before(bs) {
			s.res.Timeline = append(s.res.Timeline, Bucket{Start: Duration(bs.Sub(start)), Zones: map[string]int{}, Status: map[string]int{}})
		}
		if svc := s.request(len(s.res.Timeline) - 1); svc >= 0 {
			col := s.client.Region
			if col < 0 {
				col = len(s.p.Regions)
			}
			counts[svc][col]++
		}
	}
	s.until(start.Add(s.o.Duration))
	// Requests sent near the end still get their answers.
	s.land(maxTime())
}

// primeDemand sets each service's demand to its expected share of the rate.
func (s *sim) primeDemand() {
	a := s.table.Match(&s.req)
	tot := 0
	for _, w := range a.Services {
		tot += w.Weight
	}
	for _, w := range a.Services {
		if svc := s.p.ServiceByName[w.Name]; svc != nil && tot > 0 {
			s.st.SetDemand(svc.ID, s.client.Region, s.o.Rate*float64(w.Weight)/float64(tot), s.now)
		}
	}
	s.refresh()
}

func (s *sim) explain() {
	for _, svc := range s.p.Services {
		ss := ServiceState{Name: svc.Name}
		sp := s.view.Split(svc.ID, s.client.Region)
		for _, b := range svc.Backends {
			st := s.view.Backend(svc.ID, b.Index)
			bs := BackendState{Group: b.Group.Name, Zone: b.Group.ZoneOrRegion(), Preferred: b.Preferred, Healthy: st.Healthy, Members: st.Members, Drained: st.Drained, DrainBlocked: st.DrainBlocked}
			for _, sh := range sp.Shares {
				if sh.Backend == b.Index {
					bs.Share = sh.Fraction
				}
			}
			ss.Backends = append(ss.Backends, bs)
		}
		s.res.Services = append(s.res.Services, ss)
	}
}

type evKind uint8

const (
	evProbe evKind = iota
	evScript
	evDNSProbe    // ep is the DNS check's index
	evProbeFailed // a blackholed endpoint's probe timed out
)

type event struct {
	at     time.Time
	kind   evKind
	ep     int
	script Event
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].ep < q[j].ep
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
func (q eventQueue) peek() *event {
	if len(q) == 0 {
		return nil
	}
	return q[0]
}
