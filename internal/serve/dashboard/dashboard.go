// Package dashboard is the admin listener's /ui page: it samples the
// health report, the request counters and the DNS answers once a second
// and serves the state now (header facts, frontends and their weighted
// splits, per-backend rates, errors and latency percentiles, per-endpoint
// rates), the request and error rates of the last minutes and the recent
// transitions. It is a component with a lifecycle (Start, Stop) and reads
// only what Source publishes; the counters it reads are kept on the
// request path by package serve (atomics, see docs/operations.md).
package dashboard

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// uiFiles are the dashboard's page, script and style sheet: no build
// step, no CDN.
//
//go:embed ui
var uiFiles embed.FS

// Dashboard limits: one sample a second, five minutes of history, the
// last 200 transitions, and the measured split over the last 10 s.
const (
	dashInterval    = time.Second
	dashHistory     = 300
	dashTransitions = 200
	dashShareWindow = 10
	dashTopRules    = 10
)

// Source is what the dashboard reads: published, read-only state of the
// running server.
type Source struct {
	// Health is the current health report (nil before the first).
	Health func() *report.Health
	// Plan is the plan in force, for the backends' RATE capacity.
	Plan func() *plan.Plan
	// Fleet is the fleet status, nil when standalone.
	Fleet func() *control.FleetStatus
	// DNS is the DNS server answering now, nil without DNS zones.
	DNS func() DNS
	// Counts are the cumulative request counts per backend service.
	Counts func() map[string]BackendCounts
	// Security are the security policy rules' counts (nil: none).
	Security func() []armor.RuleCount
	// Endpoints are the cumulative request counts and in-flight requests
	// of every endpoint of the plan in force (nil: none kept).
	Endpoints func() []EndpointCounts
	// Frontends are the frontends and, per weighted split of their URL
	// maps, the cumulative requests each service got (nil: none kept).
	Frontends func() []FrontendCounts
	// Info is the header's instance facts (nil: none shown).
	Info func() Info
	// CDN are the cumulative cache lookups per CDN-enabled backend
	// (nil: no cache).
	CDN func() map[string]CDNCounts
	// LatencyBounds are the upper bounds of BackendCounts.Latency's
	// buckets (the last bucket, one more, has no bound).
	LatencyBounds []time.Duration
	// Now is the clock.
	Now func() time.Time
}

// DNS is the part of the DNS GSLB server the dashboard asks: its members
// and an answer to a query.
type DNS interface {
	Members() []gslb.MemberInfo
	Exchange(q *dns.Msg, src netip.Addr, now time.Time) *dns.Msg
}

// Dashboard samples its Source once a second for the /ui page.
type Dashboard struct {
	src  Source
	stop context.CancelFunc
	done chan struct{}

	mu          sync.Mutex
	prev        *report.Health
	samples     []dashSample // oldest first, at most dashHistory
	transitions []Transition // oldest first, at most dashTransitions
}

// dashSample is one second's cumulative request counts per backend
// service and backend.
type dashSample struct {
	at        time.Time
	counts    map[string]BackendCounts // by service name
	endpoints map[endpointKey]EndpointCounts
	frontends []FrontendCounts
	cdn       map[string]CDNCounts // by backend service or bucket
}

// BackendCounts are cumulative counts of one service: requests answered
// by each backend (by index) and their 5xx, plus the 5xx the balancer
// answered itself (no backend picked or reached).
type BackendCounts struct {
	ByBackend, ErrByBackend []uint64
	LBErrors                uint64
	// Latency are each backend's requests by latency bucket
	// (Source.LatencyBounds), by backend index.
	Latency [][]uint64
	// Details count the answers no backend sent (statusDetails other
	// than response_sent_by_backend) by token: by backend index, and at
	// index len(ByBackend) those of no backend.
	Details []map[string]uint64
	// InFlight are the requests in flight to each backend now.
	InFlight []int64
}

// Transition is one change the dashboard's timeline shows.
type Transition struct {
	Time time.Time `json:"time"`
	// What changed: a zone or group ("us-south1-a"), an endpoint, or the
	// config.
	What string `json:"what"`
	// Kind is unhealthy, healthy, drained, undrained, drain-blocked,
	// unblocked, ejected, returned, overlay or reload.
	Kind   string `json:"kind"`
	Detail string `json:"detail,omitempty"`
	// Service is the backend service the change is about, when it is
	// about one (the page filters on it).
	Service string `json:"service,omitempty"`
}

// DashState is what GET /ui/state returns.
type DashState struct {
	Time        time.Time     `json:"time"`
	Version     uint64        `json:"version"`
	Services    []DashService `json:"backendServices"`
	Regions     []DashRegion  `json:"regions"`
	Transitions []Transition  `json:"transitions"`
	DNS         []DashName    `json:"dns,omitempty"`
	// SecurityRules are the security policy rules that decided the most
	// requests, most first (at most dashTopRules).
	SecurityRules []armor.RuleCount `json:"securityRules,omitempty"`
	// Fleet is the instance's fleet status (as in /health), absent when
	// standalone.
	Fleet *control.FleetStatus `json:"fleet,omitempty"`
	// Overlay is the runtime overlay in force (spillway ctl), absent
	// when none.
	Overlay *report.Overlay `json:"overlay,omitempty"`
	// BGP is the anycast view (as in /health), absent without
	// spillway.bgp.
	BGP *report.BGP `json:"bgp,omitempty"`
	// Step is the spacing of the rate series.
	Step string `json:"step"`
	// Info is the header's instance facts (absent when unknown).
	Info *Info `json:"info,omitempty"`
	// Frontends are the frontends and their URL maps' weighted splits.
	Frontends []DashFrontend `json:"frontends,omitempty"`
	// Endpoints are every endpoint's request rate over the last 10 s.
	Endpoints []DashEndpoint `json:"endpoints,omitempty"`
	// CDN are the CDN-enabled backend services and buckets and their
	// cache hit ratio.
	CDN []DashCDN `json:"cdn,omitempty"`
}

// DashService is one backend service on the dashboard.
type DashService struct {
	Name      string        `json:"name"`
	Algorithm string        `json:"loadBalancingAlgorithm"`
	AutoDrain bool          `json:"autoCapacityDrain"`
	Threshold int           `json:"failoverHealthThreshold"`
	Backends  []DashBackend `json:"backends"`
	// Rate and ErrorRate are requests per second and the share of them
	// answered 5xx, one value per step, oldest first.
	Rate      []float64 `json:"rate"`
	ErrorRate []float64 `json:"errorRate"`
	// Measured says whether Measured shares of the backends are known
	// (requests arrived in the window).
	Measured bool `json:"measured"`
	// LBDetails count, over the last 10 s, the service's requests the
	// balancer answered without reaching a backend, by statusDetails.
	LBDetails map[string]uint64 `json:"lbDetails,omitempty"`
}

// DashBackend is one backend (group) of a service.
type DashBackend struct {
	Group      string `json:"group"`
	Zone       string `json:"zone"`
	Region     string `json:"region"`
	Preference string `json:"preference"`
	Healthy    int    `json:"healthy"`
	Members    int    `json:"members"`
	// State is serving, degraded (some members down), unhealthy (none
	// healthy), drained or drain-blocked.
	State string `json:"state"`
	// Capacity is the RATE capacity in requests per second (-1: no
	// rate limit).
	Capacity float64 `json:"capacity"`
	// Share is the engine's split (clients without a region); Measured
	// the share of the service's requests this backend answered over the
	// last 10 s.
	Share    float64 `json:"share"`
	Measured float64 `json:"measured"`
	// Over the last 10 s: requests per second, 5xx answers, the answers
	// not sent by the backend by statusDetails, and latency percentiles
	// in ms (-1: no request), interpolated in the latency histogram's
	// buckets. InFlight are its requests in flight now.
	Rate      float64           `json:"rate"`
	Errors5xx uint64            `json:"errors5xx"`
	Details   map[string]uint64 `json:"details,omitempty"`
	P50       float64           `json:"p50"`
	P95       float64           `json:"p95"`
	P99       float64           `json:"p99"`
	InFlight  int64             `json:"inFlight"`
}

// DashRegion is a region and its zones' health (over the groups there).
type DashRegion struct {
	Name  string     `json:"name"`
	Zones []DashZone `json:"zones"`
}

// DashZone is one zone's health over its groups.
type DashZone struct {
	Zone    string `json:"zone"`
	Healthy int    `json:"healthy"`
	Members int    `json:"members"`
	State   string `json:"state"`
}

// DashName is a GSLB name and the members it answers now, as seen by a
// resolver without a client subnet.
type DashName struct {
	Name    string       `json:"name"`
	Answers []DashAnswer `json:"answers"`
	Members int          `json:"members"`
}

// DashAnswer is one address in a DNS answer.
type DashAnswer struct {
	Member  string `json:"member"`
	Address string `json:"address"`
	Region  string `json:"region,omitempty"`
}

// New returns a dashboard reading src.
func New(src Source) *Dashboard { return &Dashboard{src: src} }

// Start samples once a second until Stop.
func (d *Dashboard) Start(ctx context.Context) error {
	ctx, d.stop = context.WithCancel(ctx)
	d.done = make(chan struct{})
	go func() { defer close(d.done); d.run(ctx) }()
	return nil
}

// Stop ends the sampling.
func (d *Dashboard) Stop(context.Context) error {
	if d.stop != nil {
		d.stop()
		<-d.done
	}
	return nil
}

// run samples once a second until ctx ends.
func (d *Dashboard) run(ctx context.Context) {
	t := time.NewTicker(dashInterval)
	defer t.Stop()
	for {
		d.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample records the counters and the transitions since the last sample.
func (d *Dashboard) sample() {
	h := d.src.Health()
	if h == nil {
		return
	}
	now := d.src.Now()
	smp := dashSample{at: now, counts: d.src.Counts(), endpoints: d.endpointCounts()}
	if d.src.Frontends != nil {
		smp.frontends = d.src.Frontends()
	}
	if d.src.CDN != nil {
		smp.cdn = d.src.CDN()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.prev != nil {
		d.transitions = appendBounded(d.transitions, diffHealth(d.prev, h, now), dashTransitions)
	}
	d.prev = h
	d.samples = appendBounded(d.samples, []dashSample{smp}, dashHistory)
	// Only the rate series look further back than the window: the
	// sample that just left it keeps its request and 5xx counts only, so
	// five minutes of history stay small with many endpoints.
	if i := len(d.samples) - dashShareWindow - 2; i >= 0 {
		d.samples[i] = thinned(d.samples[i])
	}
}

// thinned returns s with the request and 5xx counts (and the cache
// lookups, which the hit ratio series needs) only. It makes new maps:
// state reads the old ones without the lock.
func thinned(s dashSample) dashSample {
	out := dashSample{at: s.at, counts: make(map[string]BackendCounts, len(s.counts)), cdn: s.cdn}
	for k, c := range s.counts {
		out.counts[k] = BackendCounts{ByBackend: c.ByBackend, ErrByBackend: c.ErrByBackend, LBErrors: c.LBErrors}
	}
	return out
}

// appendBounded appends xs to s and keeps the last n.
func appendBounded[T any](s, xs []T, n int) []T {
	s = append(s, xs...)
	if len(s) > n {
		s = slices.Clone(s[len(s)-n:])
	}
	return s
}

// diffHealth lists what changed from a to b: endpoints turning healthy
// or unhealthy, backends drained, undrained, blocked or unblocked.
func diffHealth(a, b *report.Health, now time.Time) []Transition {
	type key struct{ svc, group string }
	old := map[key]*report.Backend{}
	for i := range a.Services {
		for j := range a.Services[i].Backends {
			bh := &a.Services[i].Backends[j]
			old[key{a.Services[i].Name, bh.Group}] = bh
		}
	}
	var out []Transition
	seenGroup := map[string]bool{}
	seenEndpoint := map[string]bool{}
	for i := range b.Services {
		svc := &b.Services[i]
		for j := range svc.Backends {
			nb := &svc.Backends[j]
			ob := old[key{svc.Name, nb.Group}]
			if ob == nil {
				continue
			}
			for _, t := range drainTransitions(ob, nb, nb.Zone+" ("+svc.Name+")", now) {
				t.Service = svc.Name
				out = append(out, t)
			}
			// Endpoint health is shared by the services that use the
			// group: report it once per group.
			if !seenGroup[nb.Group] {
				seenGroup[nb.Group] = true
				out = append(out, endpointTransitions(ob, nb, seenEndpoint, now)...)
			}
		}
	}
	return out
}

// drainTransitions lists a backend's drain changes from ob to nb.
func drainTransitions(ob, nb *report.Backend, where string, now time.Time) []Transition {
	var out []Transition
	switch {
	case nb.Drained && !ob.Drained:
		out = append(out, Transition{Time: now, What: where, Kind: "drained", Detail: nb.Why})
	case !nb.Drained && ob.Drained:
		out = append(out, Transition{Time: now, What: where, Kind: "undrained", Detail: nb.Why})
	}
	switch {
	case nb.DrainBlocked && !ob.DrainBlocked:
		out = append(out, Transition{Time: now, What: where, Kind: "drain-blocked", Detail: nb.Why})
	case !nb.DrainBlocked && ob.DrainBlocked:
		out = append(out, Transition{Time: now, What: where, Kind: "unblocked"})
	}
	return out
}

// endpointTransitions lists the endpoints of a group that turned healthy
// or unhealthy from ob to nb, each endpoint once (seen).
func endpointTransitions(ob, nb *report.Backend, seen map[string]bool, now time.Time) []Transition {
	was := map[string]string{}
	for _, e := range ob.Endpoints {
		was[e.IPAddress] = e.HealthState
	}
	var out []Transition
	for _, e := range nb.Endpoints {
		if seen[e.IPAddress] {
			continue
		}
		prev, ok := was[e.IPAddress]
		// A first probe that finds an endpoint healthy changes nothing
		// a reader cares about.
		if !ok || prev == e.HealthState || e.HealthState == "UNKNOWN" || prev == "UNKNOWN" && e.HealthState == "HEALTHY" {
			continue
		}
		seen[e.IPAddress] = true
		kind := "healthy"
		if e.HealthState == "UNHEALTHY" {
			kind = "unhealthy"
		}
		what := e.IPAddress + " (" + nb.Zone + ")"
		if e.Instance != "" {
			what = e.Instance + " (" + nb.Zone + ")"
		}
		out = append(out, Transition{Time: now, What: what, Kind: kind, Detail: e.Detail})
	}
	return out
}

// NoteReload records a config reload on the timeline.
func (d *Dashboard) NoteReload(now time.Time, detail string) {
	d.Note(Transition{Time: now, What: "config", Kind: "reload", Detail: detail})
}

// Note records a transition the health reports do not show (a reload,
// an outlier ejection, an overlay change) on the timeline.
func (d *Dashboard) Note(t Transition) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.transitions = appendBounded(d.transitions, []Transition{t}, dashTransitions)
}

// state builds the page's data.
func (d *Dashboard) state() *DashState {
	h := d.src.Health()
	p := d.src.Plan()
	st := &DashState{Time: d.src.Now(), Step: dashInterval.String(), Fleet: d.src.Fleet()}
	if d.src.Info != nil {
		info := d.src.Info()
		st.Info = &info
	}
	if h == nil || p == nil {
		return st
	}
	st.Version, st.Overlay, st.BGP = h.Version, h.Overlay, h.BGP
	d.mu.Lock()
	samples := slices.Clone(d.samples) // sample thins old elements in place
	st.Transitions = slices.Clone(d.transitions)
	d.mu.Unlock()
	slices.Reverse(st.Transitions) // newest first

	zones := map[string]*DashZone{}
	zoneRegion := map[string]string{}
	seenGroup := map[string]bool{}
	for _, sh := range h.Services {
		ds := DashService{Name: sh.Name, Algorithm: sh.Algorithm, AutoDrain: sh.AutoDrain, Threshold: sh.Threshold}
		svc := p.ServiceByName[sh.Name]
		measured, ok := measuredShares(samples, sh.Name, len(sh.Backends))
		ds.Measured = ok
		ds.Rate, ds.ErrorRate = rates(samples, sh.Name)
		for i, bh := range sh.Backends {
			db := backendRow(&bh, svc, i)
			if ok {
				db.Measured = measured[i]
			}
			ds.Backends = append(ds.Backends, db)
			if seenGroup[bh.Group] {
				continue
			}
			seenGroup[bh.Group] = true
			z := zones[bh.Zone]
			if z == nil {
				z = &DashZone{Zone: bh.Zone}
				zones[bh.Zone] = z
				zoneRegion[bh.Zone] = bh.Region
			}
			z.Healthy += bh.Healthy
			z.Members += bh.Members
		}
		ds.LBDetails = backendWindow(&ds, samples, d.src.LatencyBounds)
		st.Services = append(st.Services, ds)
	}
	byRegion := map[string][]DashZone{}
	for name, z := range zones {
		switch {
		case z.Members > 0 && z.Healthy == z.Members:
			z.State = "serving"
		case z.Healthy == 0:
			z.State = "unhealthy"
		default:
			z.State = "degraded"
		}
		byRegion[zoneRegion[name]] = append(byRegion[zoneRegion[name]], *z)
	}
	for r, zs := range byRegion {
		sort.Slice(zs, func(i, j int) bool { return zs[i].Zone < zs[j].Zone })
		st.Regions = append(st.Regions, DashRegion{Name: r, Zones: zs})
	}
	sort.Slice(st.Regions, func(i, j int) bool { return st.Regions[i].Name < st.Regions[j].Name })
	st.DNS = d.dnsAnswers()
	st.SecurityRules = topRules(d.src.Security)
	st.Frontends, st.Endpoints = frontendViews(samples), endpointViews(samples)
	st.CDN = cdnViews(samples, p)
	return st
}

// backendRow returns backend i of a service as the page shows it, its
// capacity and scaler from the plan's service svc (nil: unknown).
func backendRow(bh *report.Backend, svc *plan.Service, i int) DashBackend {
	db := DashBackend{Group: bh.Group, Zone: bh.Zone, Region: bh.Region, Preference: bh.Preference,
		Healthy: bh.Healthy, Members: bh.Members, State: backendState(bh), Capacity: -1, Share: bh.Share,
		P50: -1, P95: -1, P99: -1}
	if svc == nil || i >= len(svc.Backends) {
		return db
	}
	if b := svc.Backends[i]; !math.IsInf(b.Capacity, 1) {
		db.Capacity = b.Capacity
	}
	// A capacityScaler of 0 (the config's, or a drain with spillway ctl)
	// takes the backend out of the split: drained.
	if svc.Backends[i].Scaler == 0 && db.State != "drain-blocked" {
		db.State = "drained"
	}
	return db
}

// topRules returns the dashTopRules rules with the most requests, the
// default rules (which decide whatever no rule matched) left out.
func topRules(counts func() []armor.RuleCount) []armor.RuleCount {
	if counts == nil {
		return nil
	}
	rs := slices.DeleteFunc(counts(), func(r armor.RuleCount) bool { return r.Priority == config.DefaultRulePriority })
	slices.SortStableFunc(rs, func(a, b armor.RuleCount) int { return cmp.Compare(b.Count, a.Count) })
	return rs[:min(len(rs), dashTopRules)]
}

// backendState names a backend's state for the page.
func backendState(b *report.Backend) string {
	switch {
	case b.Drained:
		return "drained"
	case b.DrainBlocked:
		return "drain-blocked"
	case b.Healthy == 0:
		return "unhealthy"
	case b.Healthy < b.Members:
		return "degraded"
	}
	return "serving"
}

// measuredShares returns each backend's share of the service's answered
// requests over the last dashShareWindow samples.
func measuredShares(samples []dashSample, svc string, n int) ([]float64, bool) {
	if len(samples) < 2 {
		return nil, false
	}
	last := samples[len(samples)-1]
	first := samples[max(0, len(samples)-1-dashShareWindow)]
	a, b := first.counts[svc], last.counts[svc]
	if len(b.ByBackend) != n || len(a.ByBackend) != n {
		return nil, false
	}
	out := make([]float64, n)
	total := 0.0
	for i := range n {
		out[i] = float64(delta(a.ByBackend[i], b.ByBackend[i]))
		total += out[i]
	}
	if total == 0 {
		return nil, false
	}
	for i := range out {
		out[i] /= total
	}
	return out, true
}

// rates returns a service's request rate and 5xx share per sample step.
func rates(samples []dashSample, svc string) (rate, errRate []float64) {
	for k := 1; k < len(samples); k++ {
		a, b := samples[k-1].counts[svc], samples[k].counts[svc]
		dt := samples[k].at.Sub(samples[k-1].at).Seconds()
		if dt <= 0 || len(a.ByBackend) != len(b.ByBackend) {
			rate, errRate = append(rate, 0), append(errRate, 0)
			continue
		}
		var n, e uint64
		for i := range b.ByBackend {
			n += delta(a.ByBackend[i], b.ByBackend[i])
			e += delta(a.ErrByBackend[i], b.ErrByBackend[i])
		}
		le := delta(a.LBErrors, b.LBErrors)
		n, e = n+le, e+le
		rate = append(rate, float64(n)/dt)
		if n > 0 {
			errRate = append(errRate, float64(e)/float64(n))
		} else {
			errRate = append(errRate, 0)
		}
	}
	return rate, errRate
}

// dnsAnswers asks the running DNS server for every GSLB name, as a
// resolver at 127.0.0.1 without a client subnet would, and names the
// member behind each address.
func (d *Dashboard) dnsAnswers() []DashName {
	g := d.src.DNS()
	if g == nil {
		return nil
	}
	type memberKey struct{ name, addr string }
	byAddr := map[memberKey]DashAnswer{}
	var names []string
	count := map[string]int{}
	qtype := map[string]uint16{}
	for _, m := range g.Members() {
		if !slices.Contains(names, m.Name) {
			names = append(names, m.Name)
		}
		count[m.Name]++
		if _, ok := qtype[m.Name]; !ok {
			qtype[m.Name] = dns.TypeA
			if m.Address.Is6() && !m.Address.Is4In6() {
				qtype[m.Name] = dns.TypeAAAA
			}
		}
		byAddr[memberKey{m.Name, m.Address.String()}] = DashAnswer{Member: m.Member, Address: m.Address.String(), Region: m.Region}
	}
	src := netip.MustParseAddr("127.0.0.1")
	var out []DashName
	for _, n := range names {
		q := new(dns.Msg)
		q.SetQuestion(dns.Fqdn(n), qtype[n])
		dn := DashName{Name: strings.TrimSuffix(n, "."), Members: count[n]}
		if r := g.Exchange(q, src, d.src.Now()); r != nil {
			for _, rr := range r.Answer {
				var a string
				switch v := rr.(type) {
				case *dns.A:
					a = v.A.String()
				case *dns.AAAA:
					a = v.AAAA.String()
				default:
					continue
				}
				ans, ok := byAddr[memberKey{n, a}]
				if !ok {
					ans = DashAnswer{Address: a}
				}
				dn.Answers = append(dn.Answers, ans)
			}
		}
		out = append(out, dn)
	}
	return out
}

// Handler serves the page (GET /ui, assets under /ui/) and its data
// (GET /ui/state).
func (d *Dashboard) Handler() http.Handler {
	sub, _ := fs.Sub(uiFiles, "ui")
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
	mux.HandleFunc("GET /ui/state", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(d.state())
	})
	mux.Handle("GET /ui/", securityHeaders(files))
	return mux
}

// securityHeaders sets a strict content security policy on the page:
// its own script and style only, data from the same origin.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// delta is b − a for counters that only grow, 0 if a reload renumbered
// them.
func delta(a, b uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}
