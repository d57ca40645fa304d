// Package serve composes `spillway serve`: it loads a config, runs the
// active health checks, owns the control state in one event-loop
// goroutine, publishes immutable snapshots to the proxy through an atomic
// pointer, and hot-reloads the config (SIGHUP, file watch, or Reload).
//
// Data flow:
//
//	probe results ─┐
//	demand window ─┼─► loop: control.State.Step / Tick ─► engine.View ─► atomic Snapshot ─► proxy handlers
//	reloads ───────┘
//
// The Server keeps the event loop, the snapshot and the frontends. Parts
// that stand on their own live in sub-packages: tlsreload (the HTTPS
// frontends' certificates and policies, reloaded in place) and accesslog
// (the access log writer and its counts). The fleet's value types
// (FleetStatus, DemandRates) are package control's.
package serve

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/probe"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/route"
	"github.com/spillwaylb/spillway/internal/serve/accesslog"
	"github.com/spillwaylb/spillway/internal/serve/tlsreload"
)

// Options configure a Server.
type Options struct {
	// Admin is the admin listener address ("" = none). An address that is
	// not loopback (127.0.0.0/8, ::1, localhost) needs AdminToken.
	Admin string
	// AdminToken, when set, is the bearer token the admin API wants: on
	// every endpoint but GET /healthz when Admin is not loopback, and on
	// mutating endpoints (POST /reload) and profiling always. At least 16
	// characters.
	AdminToken string
	// AdminLimits bound the admin listener (zero fields take their
	// defaults).
	AdminLimits AdminLimits
	// Pprof serves net/http/pprof under /debug/pprof/ on the admin
	// listener (off by default).
	Pprof  bool
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// ConfigPath, when set, is re-read on Reload requests from SIGHUP and
	// polled for changes every WatchInterval (0 = 1 s; negative = no watch).
	// The certificate, key and CA files of HTTPS frontends are polled at
	// the same interval, with or without ConfigPath.
	ConfigPath    string
	WatchInterval time.Duration
	// Transport overrides the backend transport (tests).
	Transport http.RoundTripper
	// MaxConnections bounds the client connections of all frontends
	// together (0 = no limit; spillway serve defaults to half the
	// process's file-descriptor limit). Past it, new connections wait in
	// the kernel's accept queue until one closes.
	MaxConnections int
	// Stdout is where an access log with path "stdout" goes (default
	// os.Stdout).
	Stdout io.Writer
	// ProbeShare, in fleet mode with sharded probing, decides which
	// targets this instance probes and the health it believes (see
	// ProbeShare). Nil: probe every target and believe the results
	// (standalone).
	ProbeShare ProbeShare
	// DemandShare, in fleet mode, adds the other instances' offered
	// rates to the demand this instance measures, so that RATE capacity
	// is counted across the fleet (see DemandShare). Nil: this
	// instance's demand alone (standalone).
	DemandShare DemandShare
}

// Server is a running Spillway instance.
type Server struct {
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	snap   atomic.Pointer[proxy.Snapshot]
	health atomic.Pointer[HealthReport]

	transport http.RoundTripper
	prober    *probe.Prober
	events    chan event
	ready     chan struct{}
	stopped   chan struct{} // closed when the loop has returned

	mu        sync.Mutex // guards frontends and addrs (listener management)
	frontends map[string]*frontend
	conns     *connLimiter // Options.MaxConnections; nil for no limit
	admin     string

	outcomes chan proxy.Outcome
	metrics  *metrics
	// reqMetrics are the per-request counters (reqmetrics.go).
	reqMetrics *requestMetrics
	// alog is the access log (package accesslog).
	alog *accesslog.Log
	// dash is the /ui dashboard's sampler (dashboard.go).
	dash *dashboard
	// targetUpdates carries probe target sets from the loop to the
	// prober once Run has started (1 slot, latest wins).
	targetUpdates chan []probe.Target

	// dns is the running DNS GSLB server (nil when the config has no
	// dnsZones); guarded by mu. firstDNS is the one New built, started by
	// Run; runCtx is Run's context, for DNS servers started on reload.
	dns      *dnsServer
	firstDNS *gslb.Server
	runCtx   context.Context
	// passive counts the requests of frontends DNS names depend on.
	passive passiveCounters

	// inForce is configSum of the config in force, recorded whenever a
	// config is applied (New, Reload, ReloadFile, the watcher). The
	// watcher compares the file with it, not with the last file it read.
	inForce atomic.Pointer[[32]byte]
	// fleet is the fleet status (fleet.go); empty when standalone.
	fleet fleetStatus

	// Owned by the loop goroutine.
	state    *control.State
	targets  map[probe.Target][]int
	outliers *outliers
}

// dnsServer is the running DNS GSLB server: the sockets (front, served
// until cancel; done reports) and the Server answering on them (srv,
// whose health checks run until healthCancel; healthDone reports). A
// reload replaces srv and keeps front when the DNS frontends are the
// same.
type dnsServer struct {
	srv          *gslb.Server
	front        *gslb.Front
	cancel       context.CancelFunc
	done         chan error
	healthCancel context.CancelFunc
	healthDone   chan error
}

type frontend struct {
	cfg     *plan.Frontend
	handler atomic.Pointer[http.Handler]
	tls     *tlsreload.Frontend // HTTPS only
	srv     frontendServer
	ln      net.Listener
	done    chan struct{}
}

// frontendServer is what serves a frontend's listener: *h1.Server
// (the default, HTTP and HTTPS) or *http.Server (spillway.http1Server
// NET_HTTP).
type frontendServer interface {
	Shutdown(ctx context.Context) error
	Close() error
}

type event struct {
	probe *probe.Result
	// verdict marks probe as the fleet's verdict (ObserveShared), its
	// thresholds already applied.
	verdict bool
	reload  *reloadReq
	// do runs on the loop, with the state (a fleet's control loop
	// reading or setting drain state: drainhost.go).
	do func()
}

type reloadReq struct {
	cfg       *config.Config
	sum       [32]byte // configSum(cfg), before validation
	p         *plan.Plan
	dns       *gslb.Server
	listeners map[string]net.Listener     // pre-bound for new frontend addresses
	tls       map[string]*tlsreload.State // loaded TLS of every HTTPS frontend
	errc      chan error
}

// New compiles cfg and prepares a Server; Run starts it.
func New(cfg *config.Config, opts Options) (*Server, error) {
	if err := checkAdmin(opts); err != nil {
		return nil, err
	}
	sum, err := configSum(cfg)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p, err := plan.Compile(cfg)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		now:       opts.Now,
		events:    make(chan event, 1024),
		ready:     make(chan struct{}),
		stopped:   make(chan struct{}),
		outcomes:  make(chan proxy.Outcome, 4096),
		frontends: map[string]*frontend{},
		conns:     newConnLimiter(opts.MaxConnections),
		transport: opts.Transport,

		reqMetrics: newRequestMetrics(),
	}
	stdout := opts.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	s.alog = accesslog.New(stdout, s.log)
	if s.transport == nil {
		s.transport = h1.NewTransport(proxy.NewTransport())
	}
	s.inForce.Store(&sum)
	s.prober = probe.New(s.onProbe, probe.WithClock(s.now), probe.WithLogger(s.log))
	s.metrics = newMetrics(s)
	s.dash = newDashboard(s)
	s.state = control.New(p)
	s.outliers = newOutliers(p, s.now())
	if err := s.publish(p, true); err != nil {
		return nil, err
	}
	if s.firstDNS, err = s.newDNS(cfg, p); err != nil {
		return nil, err
	}
	if err := s.alog.Configure(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Snapshot returns the current snapshot (for tests and the admin API).
func (s *Server) Snapshot() *proxy.Snapshot { return s.snap.Load() }

// Health returns the current health report.
func (s *Server) Health() *HealthReport { return s.health.Load() }

// Ready is closed once every listener is bound.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// FrontendAddr returns the bound address of a frontend ("" if unknown).
func (s *Server) FrontendAddr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.frontends[name]; f != nil && f.ln != nil {
		return f.ln.Addr().String()
	}
	return ""
}

// AdminAddr returns the bound admin address ("" if none).
func (s *Server) AdminAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admin
}

func (s *Server) onProbe(r probe.Result) {
	s.metrics.ops.probed(&r)
	if sh := s.opts.ProbeShare; sh != nil {
		sh.Own(r)
		return
	}
	select {
	case s.events <- event{probe: &r}:
	case <-s.stopped:
	}
}

// Reload validates and compiles cfg and swaps it in. On error the running
// config keeps serving and the error says why.
func (s *Server) Reload(ctx context.Context, cfg *config.Config) (err error) {
	defer func() {
		if err != nil {
			s.metrics.reloadFailures.Add(1)
			s.dash.noteReload(s.now(), "rejected; the old config keeps serving")
		} else {
			s.metrics.reloads.Add(1)
			s.dash.noteReload(s.now(), "applied")
		}
	}()
	sum, err := configSum(cfg)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	p, err := plan.Compile(cfg)
	if err != nil {
		return err
	}
	if _, err := compileRoutes(p); err != nil {
		return err
	}
	g, err := s.newDNS(cfg, p)
	if err != nil {
		return err
	}
	if g != nil {
		// Members the running generation knows take its state (again,
		// fresher, when the loop swaps g in); the new ones are probed
		// now, so the reload does not answer a dead new member until its
		// first scheduled probe.
		s.mu.Lock()
		var old *gslb.Server
		if s.dns != nil {
			old = s.dns.srv
		}
		s.mu.Unlock()
		g.CarryState(old)
		g.Prime(ctx, gslb.PrimeWait)
	}
	// Certificates are read from disk on every reload, so files replaced
	// in place are picked up; any that fail reject the reload.
	tlsStates, err := tlsreload.LoadAll(p)
	if err != nil {
		return err
	}
	lns, err := s.prepareListeners(p)
	if err != nil {
		return err
	}
	req := &reloadReq{cfg: cfg, sum: sum, p: p, dns: g, listeners: lns, tls: tlsStates, errc: make(chan error, 1)}
	select {
	case s.events <- event{reload: req}:
	case <-s.stopped:
		closeListeners(lns)
		return errors.New("server stopped")
	case <-ctx.Done():
		closeListeners(lns)
		return ctx.Err()
	}
	select {
	case err := <-req.errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReloadFile loads, validates and swaps in the config at path.
func (s *Server) ReloadFile(ctx context.Context, path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		s.metrics.reloadFailures.Add(1)
		return err
	}
	return s.Reload(ctx, cfg)
}

// configSum identifies a config's content: the SHA-256 of its JSON
// encoding, so the same file content always gives the same sum, however
// the config reached the server.
func configSum(cfg *config.Config) ([32]byte, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return [32]byte{}, fmt.Errorf("config: encode for its checksum: %w", err)
	}
	return sha256.Sum256(b), nil
}

func compileRoutes(p *plan.Plan) (map[string]*route.Table, error) {
	routes := map[string]*route.Table{}
	for name, um := range p.URLMaps {
		t, err := route.Compile(um.Config)
		if err != nil {
			return nil, fmt.Errorf("urlMaps[%s]: %w", name, err)
		}
		routes[name] = t
	}
	return routes, nil
}

// publish builds a snapshot from s.state. newPlan also rebuilds the routes
// and demand counters and the probe targets.
func (s *Server) publish(p *plan.Plan, newPlan bool) error {
	old := s.snap.Load()
	var prev *engine.View
	if old != nil {
		prev = old.View
	}
	snap := &proxy.Snapshot{Plan: p, View: engine.NextView(s.state, prev)}
	if newPlan || old == nil {
		routes, err := compileRoutes(p)
		if err != nil {
			return err
		}
		snap.Routes = routes
		snap.Demand = proxy.NewDemand(len(p.Services), len(p.Regions))
		s.updateTargets(p)
	} else {
		snap.Routes, snap.Demand = old.Routes, old.Demand
	}
	s.snap.Store(snap)
	s.health.Store(buildHealth(s.state, snap.View, s.now()))
	return nil
}

// updateTargets gives the prober one target per unique (probe address,
// health check spec).
func (s *Server) updateTargets(p *plan.Plan) {
	s.targets = map[probe.Target][]int{}
	var list []probe.Target
	names, th := map[probe.Target]string{}, map[probe.Target][2]int{}
	for _, e := range p.Endpoints {
		hc := e.HealthCheck
		if hc == nil {
			continue
		}
		t := probe.Target{Addr: e.ProbeAddr, Spec: probe.Spec{
			Type: hc.Type, Interval: hc.Interval, Timeout: hc.Timeout, Path: hc.Path, Host: hc.Host,
			Response: hc.Response, Request: hc.Request, ProxyHeader: hc.ProxyHeader,
		}}
		if _, ok := s.targets[t]; !ok {
			list = append(list, t)
			names[t], th[t] = hc.Name, [2]int{hc.HealthyThreshold, hc.UnhealthyThreshold}
		}
		s.targets[t] = append(s.targets[t], e.ID)
	}
	// In a fleet the share decides what this instance probes.
	if sh := s.opts.ProbeShare; sh != nil {
		sh.SetTargets(sharedTargets(list, names, th))
		return
	}
	// Before Run, Update only records the set. While running, Update
	// waits for removed probe goroutines, which may be blocked handing a
	// result to this very loop: apply it from another goroutine, latest
	// set wins (results for targets no longer known are ignored).
	if s.targetUpdates == nil {
		s.prober.Update(list)
		return
	}
	select {
	case <-s.targetUpdates:
	default:
	}
	s.targetUpdates <- list
}

// applyTargets feeds target-set changes to the prober until ctx ends.
func (s *Server) applyTargets(ctx context.Context, updates <-chan []probe.Target) {
	for {
		select {
		case <-ctx.Done():
			return
		case list := <-updates:
			s.prober.Update(list)
		}
	}
}

// Run binds the listeners, starts probing and serves until ctx is done.
// Shutdown is graceful: listeners close, in-flight requests get up to 10 s.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.runCtx = ctx
	s.targetUpdates = make(chan []probe.Target, 1)
	tlsStates, err := tlsreload.LoadAll(s.snap.Load().Plan)
	if err != nil {
		return err
	}
	if err := s.syncFrontends(s.snap.Load().Plan, nil, tlsStates); err != nil {
		s.closeFrontends(context.Background())
		return err
	}
	if err := s.startDNS(ctx, s.firstDNS); err != nil {
		s.closeFrontends(context.Background())
		return err
	}
	var adminSrv *http.Server
	if s.opts.Admin != "" {
		ln, err := net.Listen("tcp", s.opts.Admin)
		if err != nil {
			s.closeFrontends(context.Background())
			return fmt.Errorf("admin listener %s: %w", s.opts.Admin, err)
		}
		remote := !loopbackAddr(ln.Addr().String())
		if remote && s.opts.AdminToken == "" {
			ln.Close()
			s.closeFrontends(context.Background())
			return fmt.Errorf("admin listener %s (bound to %s): %w", s.opts.Admin, ln.Addr(), errAdminNotLoopback)
		}
		s.mu.Lock()
		s.admin = ln.Addr().String()
		s.mu.Unlock()
		var aln net.Listener
		adminSrv, aln = s.newAdminServer(ln, remote)
		go adminSrv.Serve(aln)
	}
	var wg sync.WaitGroup
	if adminSrv != nil {
		wg.Go(func() { s.dash.run(ctx) })
	}
	close(s.ready)

	wg.Add(1)
	go func() { defer wg.Done(); s.prober.Run(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.applyTargets(ctx, s.targetUpdates) }()
	if s.opts.WatchInterval >= 0 {
		wg.Add(1)
		go func() { defer wg.Done(); s.watch(ctx) }()
	}
	s.loop(ctx)
	close(s.stopped)
	wg.Wait()
	s.startDNS(ctx, nil)

	shutdownCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if adminSrv != nil {
		adminSrv.Shutdown(shutdownCtx)
	}
	s.closeFrontends(shutdownCtx)
	s.alog.Stop()
	return nil
}

// loop owns s.state.
func (s *Server) loop(ctx context.Context) {
	p := s.snap.Load().Plan
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	window := time.NewTicker(p.DemandWindow)
	defer window.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-s.events:
			switch {
			case ev.probe != nil:
				s.applyProbe(ev.probe, ev.verdict)
			case ev.reload != nil:
				ev.reload.errc <- s.applyReload(ev.reload)
				p = s.snap.Load().Plan
				window.Reset(p.DemandWindow)
			case ev.do != nil:
				ev.do()
			}
		case out := <-s.outcomes:
			s.applyOutcome(out)
		case <-tick.C:
			if s.state.Tick(s.now()) {
				s.logDrainChanges()
				s.publish(p, false)
			}
			s.sweepOutliers()
			s.samplePassive()
		case <-window.C:
			s.measureDemand(p)
		}
	}
}

// applyProbe steps the health of r's endpoints with r: a probe result,
// or with verdict the fleet's verdict (thresholds already applied).
func (s *Server) applyProbe(r *probe.Result, verdict bool) {
	changed := false
	for _, id := range s.targets[r.Target] {
		before := s.state.Health(id)
		observe := s.state.ObserveProbe
		if verdict {
			observe = s.state.ObserveVerdict
		}
		if observe(id, r.OK, r.Detail, s.now()) {
			changed = true
			if after := s.state.Health(id); before.Healthy() != after.Healthy() || !before.Known() && !after.Healthy() {
				e := s.state.Plan().Endpoints[id]
				state := "UNHEALTHY"
				if after.Healthy() {
					state = "HEALTHY"
				}
				s.log.Info("endpoint health", "endpoint", e.Addr, "group", e.Group.Name, "zone", e.Group.Zone, "state", state, "detail", r.Detail)
			}
		}
	}
	if changed {
		s.logDrainChanges()
		s.publish(s.state.Plan(), false)
	}
}

// logDrainChanges logs backends whose drain state differs from the
// published view's.
func (s *Server) logDrainChanges() {
	snap := s.snap.Load()
	if snap == nil || snap.Plan != s.state.Plan() {
		return
	}
	for _, svc := range snap.Plan.Services {
		for _, b := range svc.Backends {
			was := snap.View.Backend(svc.ID, b.Index)
			now := s.state.Drain(svc.ID, b.Index)
			switch {
			case now.Drained && !was.Drained:
				s.log.Warn("auto-capacity drain: backend drained", "service", svc.Name, "group", b.Group.Name, "zone", b.Group.Zone)
			case !now.Drained && was.Drained:
				s.log.Info("auto-capacity drain: backend undrained", "service", svc.Name, "group", b.Group.Name, "zone", b.Group.Zone)
			case now.Blocked && !was.DrainBlocked:
				s.log.Warn("auto-capacity drain blocked by the 50% limit", "service", svc.Name, "group", b.Group.Name, "zone", b.Group.Zone)
			}
		}
	}
}

func (s *Server) applyReload(req *reloadReq) error {
	old, oldOutliers := s.state, s.outliers
	s.state = old.Rebase(req.p)
	// Outlier detection starts afresh (Rebase does not carry ejections).
	s.outliers = newOutliers(req.p, s.now())
	s.state.Evaluate(s.now())
	if err := s.publish(req.p, true); err != nil {
		s.state, s.outliers = old, oldOutliers
		return err
	}
	s.inForce.Store(&req.sum)
	if err := s.alog.Configure(req.cfg); err != nil {
		// The new routing applies; the access log keeps its old
		// destination.
		s.log.Error("reload: access log", "err", err)
	}
	if err := s.syncFrontends(req.p, req.listeners, req.tls); err != nil {
		// Listener changes failed (e.g. a port in use): the new plan
		// still serves on the listeners that exist; report the error.
		s.log.Error("reload: frontend listeners", "err", err)
		return err
	}
	// The new DNS generation takes over the sockets (when its frontends
	// are the same) with the member health, hysteresis and ramps of the
	// generation it replaces.
	s.mu.Lock()
	if s.dns != nil && req.dns != nil {
		req.dns.CarryState(s.dns.srv)
	}
	s.mu.Unlock()
	if err := s.startDNS(s.runCtx, req.dns); err != nil {
		s.log.Error("reload: DNS frontends", "err", err)
		return err
	}
	s.log.Info("config reloaded", "services", len(req.p.Services), "endpoints", len(req.p.Endpoints))
	return nil
}

// syncFrontends starts listeners for new frontends, stops removed ones and
// swaps the handler and TLS settings of every kept one, so open
// connections survive a reload. tlsStates has the loaded TLS of every
// HTTPS frontend of p.
func (s *Server) syncFrontends(p *plan.Plan, prebound map[string]net.Listener, tlsStates map[string]*tlsreload.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer closeListeners(prebound) // the ones not taken below
	want := map[string]*plan.Frontend{}
	for _, f := range p.Frontends {
		if f.Protocol == "HTTP" || f.Protocol == "HTTPS" {
			want[f.Name] = f
		}
	}
	for name, f := range s.frontends {
		nf, ok := want[name]
		if !ok || !sameListener(f.cfg, nf) {
			f.srv.Close()
			<-f.done
			delete(s.frontends, name)
		}
	}
	var errs []error
	counters := s.passive.update(p)
	for name, pf := range want {
		cfg := proxy.Config{Frontend: pf, Snapshot: s.snap.Load, Transport: s.transport, Logger: s.log}
		cfg.Observe = s.frontendObserver(counters[name])
		cfg.Record = s.recorder(p, pf)
		var h http.Handler = proxy.NewHandler(cfg)
		if f := s.frontends[name]; f != nil {
			f.cfg = pf
			f.handler.Store(&h)
			if f.tls != nil {
				f.tls.Set(tlsStates[name])
			}
			continue
		}
		ln := prebound[name]
		delete(prebound, name)
		f, err := s.startFrontend(pf, h, useH1Server(p), ln, tlsStates[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.frontends[name] = f
	}
	return errors.Join(errs...)
}

// prepareListeners binds a reload's frontends on new addresses before
// anything is swapped, so a port in use rejects the reload while the old
// config keeps serving. (A frontend that changes protocol on the same
// address is re-bound during the swap, after its old listener closes.)
func (s *Server) prepareListeners(p *plan.Plan) (map[string]net.Listener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inUse := map[string]bool{}
	for _, f := range s.frontends {
		inUse[f.cfg.Address] = true
	}
	lns := map[string]net.Listener{}
	for _, pf := range p.Frontends {
		if pf.Protocol != "HTTP" && pf.Protocol != "HTTPS" {
			continue
		}
		if old := s.frontends[pf.Name]; old != nil && sameListener(old.cfg, pf) {
			continue
		}
		if inUse[pf.Address] {
			continue
		}
		ln, err := listen(pf)
		if err != nil {
			closeListeners(lns)
			return nil, err
		}
		lns[pf.Name] = ln
	}
	return lns, nil
}

func listen(pf *plan.Frontend) (net.Listener, error) {
	ln, err := net.Listen("tcp", pf.Address)
	if err != nil {
		return nil, fmt.Errorf("frontend %s: listen on %s: %w (fix: free the port or change frontends[].address)", pf.Name, pf.Address, err)
	}
	return ln, nil
}

func closeListeners(lns map[string]net.Listener) {
	for name, ln := range lns {
		ln.Close()
		delete(lns, name)
	}
}

// sameListener reports whether a reload keeps a frontend's listener: the
// same address and protocol. Certificates and TLS policies change in
// place (tlsreload.Frontend).
func sameListener(a, b *plan.Frontend) bool {
	return a.Address == b.Address && a.Protocol == b.Protocol
}

// useH1Server reports whether cleartext frontends use h1.Server
// (spillway.http1Server SPILLWAY, the default) rather than net/http.
func useH1Server(p *plan.Plan) bool {
	t := p.Config.Spillway
	return t == nil || t.HTTP1Server != "NET_HTTP"
}

// startFrontend serves pf on ln, or on a new listener when ln is nil; st
// is its loaded TLS (HTTPS only).
func (s *Server) startFrontend(pf *plan.Frontend, h http.Handler, useH1 bool, ln net.Listener, st *tlsreload.State) (*frontend, error) {
	f := &frontend{cfg: pf, done: make(chan struct{})}
	f.handler.Store(&h)
	var tlsCfg *tls.Config
	if pf.Protocol == "HTTPS" {
		if st == nil {
			if ln != nil {
				ln.Close()
			}
			return nil, fmt.Errorf("frontend %s: TLS settings not loaded", pf.Name)
		}
		f.tls = tlsreload.NewFrontend(st)
		tlsCfg = f.tls.ServerConfig()
	}
	if ln == nil {
		var err error
		if ln, err = listen(pf); err != nil {
			return nil, err
		}
	}
	f.ln = ln
	fh := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*f.handler.Load()).ServeHTTP(w, r)
	})
	var serveFn func() error
	switch {
	case useH1:
		srv := proxy.NewH1Server(fh)
		srv.Logger = s.log
		srv.TLSConfig = tlsCfg
		f.srv, serveFn = srv, func() error { return srv.Serve(s.conns.wrap(ln)) }
	case tlsCfg != nil:
		srv := proxy.NewServer(fh, tlsCfg)
		f.srv, serveFn = srv, func() error { return srv.ServeTLS(s.conns.wrap(ln), "", "") }
	default:
		srv := proxy.NewServer(fh, nil)
		f.srv, serveFn = srv, func() error { return srv.Serve(h1.GuardListener(s.conns.wrap(ln))) }
	}
	go func() {
		defer close(f.done)
		err := serveFn()
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("frontend stopped", "frontend", pf.Name, "err", err)
		}
	}()
	s.log.Info("frontend listening", "frontend", pf.Name, "address", ln.Addr().String(), "protocol", pf.Protocol)
	return f, nil
}

func (s *Server) closeFrontends(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, f := range s.frontends {
		f.srv.Shutdown(ctx)
		<-f.done
		delete(s.frontends, name)
	}
}
