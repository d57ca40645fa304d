package serve

import (
	"context"
	"net/http"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/probe"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/serve/admin"
	"github.com/spillwaylb/spillway/internal/serve/dashboard"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// task is a component that is one goroutine, run until Stop.
type task struct {
	run    func(ctx context.Context)
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs the task's goroutine.
func (t *task) Start(ctx context.Context) error {
	ctx, t.cancel = context.WithCancel(ctx)
	t.done = make(chan struct{})
	go func() { defer close(t.done); t.run(ctx) }()
	return nil
}

// Stop ends the goroutine and waits for it (or for ctx).
func (t *task) Stop(ctx context.Context) error {
	t.cancel()
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probing is the prober component: the probes and the target-set
// updates the loop sends it.
type probing struct {
	prober *probe.Prober
	// updates carries probe target sets from the loop to the prober once
	// Start has run (1 slot, latest wins).
	updates chan []probe.Target
	tasks   [2]task
}

// Start runs the probes and the goroutine applying target updates.
func (pr *probing) Start(ctx context.Context) error {
	pr.updates = make(chan []probe.Target, 1)
	pr.tasks[0].run = func(ctx context.Context) { pr.prober.Run(ctx) }
	pr.tasks[1].run = pr.applyTargets
	for i := range pr.tasks {
		pr.tasks[i].Start(ctx)
	}
	return nil
}

// Stop ends the probes.
func (pr *probing) Stop(ctx context.Context) error {
	for i := range pr.tasks {
		if err := pr.tasks[i].Stop(ctx); err != nil {
			return err
		}
	}
	return nil
}

// update gives the prober a new target set. Before Start, Update only
// records the set. While running, Update waits for removed probe
// goroutines, which may be blocked handing a result to the loop, the
// caller: the set goes to another goroutine, latest set wins (results
// for targets no longer known are ignored).
func (pr *probing) update(list []probe.Target) {
	if pr.updates == nil {
		pr.prober.Update(list)
		return
	}
	select {
	case <-pr.updates:
	default:
	}
	pr.updates <- list
}

// applyTargets feeds target-set changes to the prober until ctx ends.
func (pr *probing) applyTargets(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case list := <-pr.updates:
			pr.prober.Update(list)
		}
	}
}

// handlers returns the frontends' handler factory for plan p: the proxy
// with its observer (passive counters, outlier detection) and recorder
// (request metrics, access log).
func (s *Server) handlers(p *plan.Plan) func(*plan.Frontend) http.Handler {
	counters := s.passive.update(p)
	s.layers.RetainPlan(p)
	return func(pf *plan.Frontend) http.Handler {
		cfg := proxy.Config{Frontend: pf, Snapshot: s.snap.Load, Transport: s.transport, Logger: s.log, Layers: s.layers, Cache: s.cache.cache}
		cfg.Observe = s.frontendObserver(counters[pf.Name])
		cfg.Record = s.recorder(p, pf)
		return proxy.NewHandler(cfg)
	}
}

// adminOptions are the admin listener's options.
func (o Options) adminOptions() admin.Options {
	return admin.Options{Addr: o.Admin, Token: o.AdminToken, Limits: o.AdminLimits, Pprof: o.Pprof, Listen: o.Sockets.ListenTCP}
}

// adminRoutes are what the admin listener serves.
func (s *Server) adminRoutes() admin.Routes {
	r := admin.Routes{
		Health:  func() any { return s.withMeasured(s.Health()) },
		Metrics: s.metrics.handler(),
		UI:      s.dash.Handler(),
		Overlay: s.overlayHandler(),
	}
	if s.cache.cache != nil {
		r.CacheInvalidate = s.cache.invalidateHandler(s.log, s.opts.CacheInvalidations)
	}
	if s.opts.ConfigPath != "" {
		r.Reload = func(ctx context.Context) error { return s.ReloadFile(ctx, s.opts.ConfigPath) }
	}
	return r
}

// newDashboard returns the dashboard, reading the published state.
func (s *Server) newDashboard() *dashboard.Dashboard {
	version := dashVersion()
	return dashboard.New(dashboard.Source{
		Health: func() *report.Health { return s.withOverlay(s.Health()) },
		Plan: func() *plan.Plan {
			if snap := s.snap.Load(); snap != nil {
				return snap.Plan
			}
			return nil
		},
		Fleet: func() *control.FleetStatus { return s.FleetStatus() },
		DNS: func() dashboard.DNS {
			if g := s.dnsServer(); g != nil {
				return g
			}
			return nil
		},
		Counts: s.requestCounts,
		Security: func() []armor.RuleCount {
			if snap := s.snap.Load(); snap != nil {
				return snap.Armor.Counts()
			}
			return nil
		},
		Endpoints:     s.dashEndpoints,
		Frontends:     s.dashFrontends,
		CDN:           s.dashCDN,
		Info:          func() dashboard.Info { return s.dashInfo(version) },
		LatencyBounds: dashLatencyBounds(),
		Now:           s.now,
	})
}
