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
// The Server keeps the event loop, the snapshot and a list of components,
// each with a lifecycle (Start, Stop) and reading only published state:
// the HTTP(S) frontends (frontend.go), the DNS server (dns.go), the
// prober and the file watcher (tasks), the admin listener (package
// admin) and its dashboard (package dashboard). Run starts them in
// order and stops them in reverse; a reload provisions the new parts
// (plan, listeners, TLS, DNS generation) before the loop swaps them in,
// so a rejected reload leaves the old ones serving. Other parts that
// stand on their own: tlsreload (certificates and TLS policies, reloaded
// in place), accesslog (the access log), connlimit (connection limits)
// and report (the get-health view). The fleet's value types
// (FleetStatus, DemandRates) are package control's.
package serve

import (
	"cmp"
	"context"
	"crypto/sha256"
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

	"github.com/caddyserver/certmagic"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/bgp"
	"github.com/spillwaylb/spillway/internal/cdn"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/geoip"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/probe"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/resolve"
	"github.com/spillwaylb/spillway/internal/route"
	"github.com/spillwaylb/spillway/internal/serve/accesslog"
	"github.com/spillwaylb/spillway/internal/serve/admin"
	"github.com/spillwaylb/spillway/internal/serve/connlimit"
	"github.com/spillwaylb/spillway/internal/serve/dashboard"
	"github.com/spillwaylb/spillway/internal/serve/handoff"
	"github.com/spillwaylb/spillway/internal/serve/managedcert"
	"github.com/spillwaylb/spillway/internal/serve/report"
	"github.com/spillwaylb/spillway/internal/serve/tracing"
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
	AdminLimits admin.Limits
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
	// WAF compiles the preconfigured WAF rule sets security policies
	// name (nil: a policy that calls the WAF is refused).
	WAF armor.WAF
	// DemandShare, in fleet mode, adds the other instances' offered
	// rates to the demand this instance measures, so that RATE capacity
	// is counted across the fleet (see DemandShare). Nil: this
	// instance's demand alone (standalone).
	DemandShare DemandShare
	// RateLimitShare, in fleet mode, adds the other instances' counts
	// and bans to the security policies' rate limits (see
	// RateLimitShare). Nil: this instance's counts alone (standalone).
	RateLimitShare RateLimitShare
	// OverlayStore, in fleet mode, shares the runtime overlay (spillway
	// ctl; overlay.go) through etcd. Nil: the overlay is this
	// instance's.
	OverlayStore OverlayStore
	// CacheInvalidations, in fleet mode, carries each cache invalidation
	// asked of this instance (POST /cache/invalidate) to every other
	// instance through etcd (fleet.CacheShare). Nil: it applies here
	// only.
	CacheInvalidations CacheInvalidations
	// AuditLog receives one JSON line per overlay change (nil: the
	// process log only). OverlayCheckInterval is how often expired
	// overlay entries are looked for (0 = 1 s).
	AuditLog             io.Writer
	OverlayCheckInterval time.Duration
	// Sockets are listening sockets inherited from the process this one
	// replaces (a binary upgrade, package handoff) or from systemd: a
	// frontend, DNS frontend or admin listener whose address one is
	// bound to takes it instead of binding. Nil: bind everything.
	Sockets *handoff.Sockets
	// CertStorage, in fleet mode, keeps the ACME accounts, keys,
	// certificates, challenge tokens and order locks of MANAGED
	// sslCertificates for the whole fleet (fleet.CertStorage, in etcd),
	// so the fleet orders each certificate once and every instance
	// serves it. Nil: spillway.acme.storageDir on this host.
	CertStorage certmagic.Storage
	// Instance names this instance on the dashboard (spillway serve
	// --instance: the host name by default).
	Instance string
	// Role is the proxy layer this instance runs (spillway serve
	// --role): "" every layer; config.LayerEdge serves every frontend
	// but the REGIONAL ones and probes no endpoint behind a regional
	// layer (in a fleet the regional instances do, and the edge believes
	// their verdicts; alone it relies on the regional layer's answers);
	// config.LayerRegional serves every frontend but the EDGE ones, and
	// of the REGIONAL ones those of Region (all when Region is "").
	// Region is the region the instance runs in (--region).
	Role, Region string
	// Resolver looks up the DNS names of INTERNET_FQDN_PORT endpoints
	// and serverless base URLs (default: resolve.DNS against
	// spillway.resolver.address, else /etc/resolv.conf's first server).
	Resolver resolve.Resolver
}

// Server is a running Spillway instance.
type Server struct {
	// cache is Cloud CDN's cache (cdn.go), kept across reloads.
	cache  cdnCache
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	snap   atomic.Pointer[proxy.Snapshot]
	health atomic.Pointer[report.Health]
	// inForce is configSum of the config in force, recorded whenever a
	// config is applied (New, Reload, ReloadFile, the watcher). The
	// watcher compares the file with it, not with the last file it read.
	inForce atomic.Pointer[[32]byte]
	// base is the config in force as loaded, before the overlay (ov) is
	// applied on top; reloadMu serialises reloads and overlay changes.
	base     atomic.Pointer[config.Config]
	ov       overlayState
	reloadMu sync.Mutex
	// names keeps the config's DNS names resolved (names.go).
	names *resolve.Cache

	events   chan event
	outcomes chan proxy.Outcome
	ready    chan struct{}
	stopped  chan struct{} // closed when the loop has returned

	// The components, in start order (Run).
	front *frontends
	dns   *dnsRunner
	admin *admin.Server
	dash  *dashboard.Dashboard
	probe *probing
	// anycast announces the frontends' anycast prefixes over BGP
	// (bgp.go); idle without spillway.bgp.
	anycast *anycastRunner

	transport http.RoundTripper
	// layers are the EDGE frontends' pools of HTTP/2 connections to
	// regional layers, kept across reloads.
	layers *proxy.Layers
	// loadSeen is when each UTILIZATION backend (service and group name)
	// last had a load report, for measureLoad (the loop's).
	loadSeen map[string]time.Time
	// Observability: the metrics registry, the per-request counters
	// (reqmetrics.go) and the access log (package accesslog).
	metrics    *metrics
	reqMetrics *requestMetrics
	// endpoints are the per-endpoint request counters (dashsource.go).
	endpoints endpointStore
	// started is when New ran, for the dashboard's uptime.
	started time.Time
	alog    *accesslog.Log
	dnstel  *dnsTelemetry // DNS counters, query log and dnstap (dnstelemetry.go)
	tracing *tracing.Exporter
	// passive counts the requests of frontends DNS names depend on.
	passive passiveCounters
	// fleet is the fleet status (fleet.go); empty when standalone.
	fleet fleetStatus

	// Owned by the loop goroutine.
	state    *control.State
	targets  map[probe.Target][]int
	outliers *outliers
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
	edge      *edgeConfig
	dns       *gslb.Server
	listeners map[string]net.Listener // pre-bound for new frontend addresses
	tls       *frontendTLS            // loaded TLS of every HTTPS frontend
	errc      chan error
}

// New compiles cfg and prepares a Server; Run starts it.
func New(cfg *config.Config, opts Options) (*Server, error) {
	if err := admin.Check(opts.adminOptions()); err != nil {
		return nil, err
	}
	sum, err := configSum(cfg)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		opts:       opts,
		log:        opts.Logger,
		now:        opts.Now,
		events:     make(chan event, 1024),
		ready:      make(chan struct{}),
		stopped:    make(chan struct{}),
		outcomes:   make(chan proxy.Outcome, 4096),
		transport:  opts.Transport,
		reqMetrics: newRequestMetrics(),
		started:    opts.Now(),
		layers:     proxy.NewLayers(),
	}
	if sh := opts.RateLimitShare; sh != nil {
		sh.Follow(s.exportRateLimits)
	}
	if s.transport == nil {
		s.transport = h1.NewTransport(proxy.NewTransport())
	}
	stdout := cmp.Or[io.Writer](opts.Stdout, os.Stdout)
	s.names = newNames(cfg, opts.Resolver, s.now)
	if s.anycast, err = newAnycast(s, bgpOf(cfg)); err != nil {
		return nil, err
	}
	p, err := s.compile(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	if s.cache, err = newCache(cfg, s.log, opts.CacheInvalidations != nil); err != nil {
		return nil, err
	}
	s.alog = accesslog.New(stdout, s.log)
	s.dnstel = newDNSTelemetry(s.alog, s.log)
	s.tracing = tracing.New(s.log)
	s.inForce.Store(&sum)
	s.base.Store(cfg)
	s.ov.audit = opts.AuditLog
	s.probe = &probing{prober: probe.New(s.onProbe, probe.WithClock(s.now), probe.WithLogger(s.log))}
	s.metrics = newMetrics(s)
	s.front = &frontends{log: s.log, sockets: opts.Sockets, conns: connlimit.Counted(opts.MaxConnections), handlers: s.handlers,
		plan: func() *plan.Plan { return s.snap.Load().Plan }, m: map[string]*frontend{}, acme: managedcert.New(s.log, opts.CertStorage)}
	s.dash = s.newDashboard()
	s.admin = admin.New(opts.adminOptions(), s.adminRoutes())
	s.state = control.New(p)
	s.outliers = newOutliers(p, s.now())
	ec, err := s.compileEdge(p)
	if err != nil {
		return nil, err
	}
	s.publish(p, ec)
	first, err := s.newDNS(cfg, p)
	if err != nil {
		return nil, err
	}
	s.dns = &dnsRunner{first: first, sockets: opts.Sockets}
	if err := s.configureTelemetry(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// configureTelemetry applies cfg's access log, DNS telemetry and
// tracing (at start; a reload logs each failure and carries on).
func (s *Server) configureTelemetry(cfg *config.Config) error {
	if err := s.alog.Configure(cfg); err != nil {
		return err
	}
	if err := s.dnstel.configure(cfg); err != nil {
		return err
	}
	return s.tracing.Configure(cfg)
}

// ListenerFiles returns duplicates of every listening socket (HTTP(S)
// and DNS frontends, the admin listener), for a binary upgrade to hand
// to the new process (package handoff). The caller closes them.
func (s *Server) ListenerFiles() ([]*os.File, error) {
	fs, err := s.front.files()
	closeAll := func() {
		for _, f := range fs {
			f.Close()
		}
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	dfs, err := s.dns.files()
	fs = append(fs, dfs...)
	if err != nil {
		closeAll()
		return nil, err
	}
	if ln := s.admin.Listener(); ln != nil {
		f, err := handoff.File(ln)
		if err != nil {
			closeAll()
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// DetachQUIC is the old process's side of a binary upgrade for HTTP/3
// (package handoff): it takes every HTTP/3 listener out of service and
// shuts them down gracefully until ctx ends (GOAWAY, requests in flight
// finish, then the connections close), and returns a channel closed once
// this process no longer holds their UDP sockets, which the new process
// then reads. Run's shutdown waits for them.
func (s *Server) DetachQUIC(ctx context.Context) <-chan struct{} { return s.front.detachQUIC(ctx) }

// Snapshot returns the current snapshot (for tests and the admin API).
func (s *Server) Snapshot() *proxy.Snapshot { return s.snap.Load() }

// Health returns the current health report.
func (s *Server) Health() *report.Health { return s.withBGP(s.withKeys(s.health.Load())) }

// Ready is closed once every listener is bound.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// FrontendAddr returns the bound address of a frontend ("" if unknown).
func (s *Server) FrontendAddr(name string) string { return s.front.addr(name) }

// FrontendQUICAddr returns the bound UDP address of a frontend's HTTP/3
// listener (quicOverride ENABLE), "" when it has none.
func (s *Server) FrontendQUICAddr(name string) string { return s.front.quicAddr(name) }

// AdminAddr returns the bound admin address ("" if none).
func (s *Server) AdminAddr() string { return s.admin.Addr() }

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

// Reload validates and compiles cfg and swaps it in, with the runtime
// overlay applied on top (overlay.go). On error the running config keeps
// serving and the error says why.
func (s *Server) Reload(ctx context.Context, cfg *config.Config) (err error) {
	defer func() {
		if err != nil {
			s.metrics.reloadFailures.Add(1)
			s.dash.NoteReload(s.now(), "rejected; the old config keeps serving")
		} else {
			s.metrics.reloads.Add(1)
			s.dash.NoteReload(s.now(), "applied")
		}
	}()
	sum, err := configSum(cfg)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	set, _ := s.ov.get()
	eff, problems := s.overlaid(cfg, set)
	if err := s.swapIn(ctx, eff, sum); err != nil {
		return err
	}
	s.base.Store(cfg)
	s.ov.put(set, problems)
	if s.cache.storeChanged(cfg) {
		s.log.Warn("reload: spillway.cdn changed; the cache store keeps its size and tiers until the next restart")
	}
	for _, p := range problems {
		s.log.Warn("reload: overlay", "problem", p)
	}
	return nil
}

// swapIn provisions cfg (the config with the overlay applied; sum is the
// loaded config's) and has the loop swap it in.
func (s *Server) swapIn(ctx context.Context, cfg *config.Config, sum [32]byte) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	p, err := s.compile(ctx, cfg)
	if err != nil {
		return err
	}
	ec, err := s.compileEdge(p)
	if err != nil {
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
		g.CarryState(s.dnsServer())
		g.Prime(ctx, gslb.PrimeWait)
	}
	// Certificates are read from disk on every reload, so files replaced
	// in place are picked up; any that fail reject the reload.
	tlsStates, err := s.front.loadTLS(p)
	if err != nil {
		return err
	}
	pw, err := bgp.Passwords(bgpOf(cfg))
	if err != nil {
		return err
	}
	lns, err := s.front.prepare(p)
	if err != nil {
		return err
	}
	// The BGP sessions take the new neighbors now; a change they refuse
	// rejects the reload, the speaker keeping the old ones.
	if err := s.anycast.configure(ctx, bgpOf(cfg), pw); err != nil {
		closeListeners(lns)
		return err
	}
	req := &reloadReq{cfg: cfg, sum: sum, p: p, edge: ec, dns: g, listeners: lns, tls: tlsStates, errc: make(chan error, 1)}
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
// encoding and of the zone files it loaded, so the same content always
// gives the same sum, however the config reached the server.
func configSum(cfg *config.Config) ([32]byte, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return [32]byte{}, fmt.Errorf("config: encode for its checksum: %w", err)
	}
	h := sha256.New()
	h.Write(b)
	for i := range cfg.DNSZones {
		if _, sum := cfg.DNSZones[i].ZoneFiles(); sum != ([32]byte{}) {
			h.Write(sum[:])
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, nil
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

// edgeConfig is what a plan compiles to for the request path: the URL
// maps' route tables and the security policies.
type edgeConfig struct {
	routes  map[string]*route.Table
	armor   *armor.Set
	geo     *geoip.DB
	buckets map[string]*cdn.S3Bucket
}

// compileEdge compiles p's route tables and security policies.
func (s *Server) compileEdge(p *plan.Plan) (*edgeConfig, error) {
	routes, err := compileRoutes(p)
	if err != nil {
		return nil, err
	}
	policies, err := armor.Compile(p.Config, s.opts.WAF)
	if err != nil {
		return nil, err
	}
	if sh := s.opts.RateLimitShare; sh != nil && policies != nil {
		policies.UseRemote(sh.Source())
	}
	ec := &edgeConfig{routes: routes, armor: policies}
	if ec.buckets, err = s.s3Buckets(p); err != nil {
		return nil, err
	}
	if t := p.Config.Spillway; t != nil && t.GeoDatabase != "" {
		if ec.geo, err = geoip.Open(t.GeoDatabase); err != nil {
			return nil, fmt.Errorf("spillway.geoDatabase: %w (fix: point it at a MaxMind GeoLite2/GeoIP2 Country or City .mmdb file)", err)
		}
	}
	return ec, nil
}

// publish builds a snapshot from s.state. With a new plan's compiled
// edge (ec), it also renews the demand counters and the probe targets,
// and the security policies take over the rate-limit counts of the ones
// they replace.
func (s *Server) publish(p *plan.Plan, ec *edgeConfig) {
	old := s.snap.Load()
	var prev *engine.View
	if old != nil {
		prev = old.View
	}
	snap := &proxy.Snapshot{Plan: p, View: engine.NextView(s.state, prev)}
	if ec != nil {
		snap.Routes, snap.Armor, snap.Geo, snap.Buckets = ec.routes, ec.armor, ec.geo, ec.buckets
		if old != nil {
			snap.Armor.Carry(old.Armor)
			closeReplaced(old.Buckets, snap.Buckets)
		}
		snap.Demand = proxy.NewDemand(len(p.Services), len(p.Regions))
		snap.Loads = proxy.NewLoadReports(p)
		s.updateTargets(p)
	} else {
		snap.Routes, snap.Armor, snap.Geo, snap.Demand, snap.Loads, snap.Buckets = old.Routes, old.Armor, old.Geo, old.Demand, old.Loads, old.Buckets
	}
	s.snap.Store(snap)
	s.anycast.measure(s.state, snap)
	h := report.Build(s.state, snap.View, s.now())
	h.Resolutions = resolutions(s.names.Status())
	s.health.Store(h)
}

// updateTargets gives the prober one target per unique (probe address,
// health check spec).
func (s *Server) updateTargets(p *plan.Plan) {
	s.targets = map[probe.Target][]int{}
	var shared []probe.SharedTarget
	for _, e := range p.Endpoints {
		hc := e.HealthCheck
		if hc == nil {
			continue
		}
		t := probe.Target{Addr: e.ProbeAddr, Spec: probe.Spec{
			Type: hc.Type, Interval: hc.Interval, Timeout: hc.Timeout, Path: hc.Path, Host: hc.Host,
			Response: hc.Response, Request: hc.Request, ProxyHeader: hc.ProxyHeader, GRPCService: hc.GRPCService,
		}}
		if _, ok := s.targets[t]; !ok {
			shared = append(shared, sharedTarget(p, t, e, hc))
		}
		s.targets[t] = append(s.targets[t], e.ID)
	}
	// In a fleet the share decides what this instance probes.
	if sh := s.opts.ProbeShare; sh != nil {
		sh.SetTargets(shared)
		return
	}
	var list []probe.Target
	for _, st := range shared {
		// An edge alone does not probe what only the regional layer
		// reaches: those endpoints keep the health they have (healthy
		// until a verdict), and the regional layer answers for them.
		if !st.Layered || s.opts.Role != config.LayerEdge {
			list = append(list, st.Target)
		}
	}
	// Before Run, Update only records the set. While running, Update
	// waits for removed probe goroutines, which may be blocked handing a
	// result to this very loop: apply it from another goroutine, latest
	// set wins (results for targets no longer known are ignored).
	s.probe.update(list)
}

// component is a part of the Server with a lifecycle of its own. Start
// returns once the component serves (listeners bound); Stop returns once
// it has stopped, giving work in flight until ctx ends.
type component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// components returns the Server's components in start order: the access
// log (stopped last, after the frontends' last requests), the frontends
// and the DNS server, so that every listener is bound before Ready and
// before the anycast prefixes are first announced (BGP); the
// admin listener and its dashboard; then the prober and the file
// watcher, which feed the loop.
func (s *Server) components() []component {
	// The regional layers' checks stop, and their pools close, after
	// the frontends' last requests.
	cs := []component{s.alog, s.dnstel.tap, s.tracing, &task{run: s.layers.Run}, s.front, s.dns, s.anycast}
	if s.admin != nil {
		cs = append(cs, s.admin, s.dash)
	}
	cs = append(cs, s.probe, &task{run: s.expireOverlay}, &task{run: s.refreshNames})
	if s.opts.WatchInterval >= 0 {
		cs = append(cs, &task{run: s.watch})
	}
	cs = append(cs, &task{run: s.keyTicker})
	return cs
}

// Run starts the components, runs the loop until ctx is done, then stops
// the components in reverse order. Shutdown is graceful: with
// spillway.bgp the anycast prefixes are withdrawn first and the instance
// serves on for drainSec (lame duck); then listeners close, in-flight
// requests get up to 10 s.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var started []component
	stopAll := func(ctx context.Context) {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].Stop(ctx)
		}
	}
	for _, c := range s.components() {
		if err := c.Start(ctx); err != nil {
			stopAll(context.Background())
			return err
		}
		started = append(started, c)
	}
	close(s.ready)
	s.loop(ctx)
	close(s.stopped)
	s.anycast.lameDuck()
	shutdownCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	stopAll(shutdownCtx)
	return s.cache.Close()
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
				s.publish(p, nil)
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
		s.publish(s.state.Plan(), nil)
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
	s.state = s.state.Rebase(req.p)
	// Outlier detection starts afresh (Rebase does not carry ejections).
	s.outliers = newOutliers(req.p, s.now())
	s.state.Evaluate(s.now())
	s.publish(req.p, req.edge)
	s.inForce.Store(&req.sum)
	if err := s.alog.Configure(req.cfg); err != nil {
		// The new routing applies; the access log keeps its old
		// destination.
		s.log.Error("reload: access log", "err", err)
	}
	if err := s.dnstel.configure(req.cfg); err != nil {
		s.log.Error("reload: dnstap", "err", err)
	}
	if err := s.tracing.Configure(req.cfg); err != nil {
		s.log.Error("reload: tracing", "err", err)
	}
	if err := s.front.sync(req.p, req.listeners, req.tls); err != nil {
		// Listener changes failed (e.g. a port in use): the new plan
		// still serves on the listeners that exist; report the error.
		s.log.Error("reload: frontend listeners", "err", err)
		return err
	}
	if err := s.dns.Swap(req.dns); err != nil {
		s.log.Error("reload: DNS frontends", "err", err)
		return err
	}
	s.log.Info("config reloaded", "services", len(req.p.Services), "endpoints", len(req.p.Endpoints))
	return nil
}
