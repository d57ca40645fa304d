package serve

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve/handoff"
)

// newDNS builds the DNS GSLB server for cfg (nil when it has no zones). It
// answers from the same engine View the proxy uses, so a region the proxy
// drains is steered away from in DNS too.
func (s *Server) newDNS(cfg *config.Config, p *plan.Plan) (*gslb.Server, error) {
	if len(cfg.DNSZones) == 0 {
		return nil, nil
	}
	g, err := gslb.New(cfg, p, gslb.Options{
		Logger: s.log,
		Now:    s.now,
		View: func() *engine.View {
			if snap := s.snap.Load(); snap != nil {
				return snap.View
			}
			return nil
		},
		Observe: s.metrics.dns.observe,
		Stats:   s.dnstel.stats,
		Tap:     s.dnstel,
	})
	if err != nil {
		return nil, fmt.Errorf("dnsZones: %w", err)
	}
	return g, nil
}

// dnsRunner is the DNS server component: Start serves the first
// generation (the one New built), Swap replaces it on reload, Stop ends
// it. A generation is a gslb.Server answering on sockets (a gslb.Front)
// with its health checks running.
type dnsRunner struct {
	first *gslb.Server
	ctx   context.Context // Start's, for generations started on reload
	// sockets are inherited sockets (Options.Sockets).
	sockets *handoff.Sockets

	mu  sync.Mutex // guards cur
	cur *dnsGeneration
}

// dnsGeneration is the running DNS GSLB server: the sockets (front,
// served until cancel; done reports) and the Server answering on them
// (srv, whose health checks run until healthCancel; healthDone reports).
// A reload replaces srv and keeps front when the DNS frontends are the
// same.
type dnsGeneration struct {
	srv          *gslb.Server
	front        *gslb.Front
	cancel       context.CancelFunc
	done         chan error
	healthCancel context.CancelFunc
	healthDone   chan error
}

// Start serves the first generation (none without DNS zones).
func (d *dnsRunner) Start(ctx context.Context) error {
	d.ctx = ctx
	return d.Swap(d.first)
}

// Stop ends the running generation.
func (d *dnsRunner) Stop(context.Context) error { return d.Swap(nil) }

// Swap makes g the DNS server, replacing the running one. When g's
// DNS frontends are the ones already bound, g takes over their sockets:
// queued UDP queries and open TCP connections carry on, answered by g
// from then on, with the member health, hysteresis and ramps of the
// generation it replaces; the old generation's health checks stop.
// Otherwise the old sockets close and g's are bound anew. A nil g stops
// everything.
func (d *dnsRunner) Swap(g *gslb.Server) error {
	d.mu.Lock()
	old := d.cur
	d.mu.Unlock()
	if g != nil && old != nil {
		g.CarryState(old.srv)
		if old.front.Swap(g) {
			d.swapHealth(old, g)
			return nil
		}
	}
	if old != nil {
		d.mu.Lock()
		d.cur = nil
		d.mu.Unlock()
		old.stop()
	}
	if g == nil {
		return nil
	}
	f, err := gslb.ListenWith(g, func(addr string) (*net.UDPConn, net.Listener, error) {
		return d.sockets.ListenBoth(addr, gslb.ListenBoth)
	})
	if err != nil {
		return fmt.Errorf("DNS frontend: %w", err)
	}
	// Bound but not yet answering: queries wait in the sockets while the
	// members nobody has probed get their first probe.
	g.Prime(d.ctx, gslb.PrimeWait)
	fctx, fcancel := context.WithCancel(d.ctx)
	hctx, hcancel := context.WithCancel(d.ctx)
	done, health := make(chan error, 1), make(chan error, 1)
	gen := &dnsGeneration{srv: g, front: f, cancel: fcancel, done: done, healthCancel: hcancel, healthDone: health}
	// The goroutines hold the channels, not gen: a swap replaces
	// gen.healthDone while this generation's health checks still run.
	go func() { done <- f.Serve(fctx) }()
	go func() { health <- g.RunHealth(hctx) }()
	d.mu.Lock()
	d.cur = gen
	d.mu.Unlock()
	return nil
}

// swapHealth runs g's health checks in place of old's, whose sockets g
// has taken over.
func (d *dnsRunner) swapHealth(old *dnsGeneration, g *gslb.Server) {
	hctx, hcancel := context.WithCancel(d.ctx)
	health := make(chan error, 1)
	go func() { health <- g.RunHealth(hctx) }()
	d.mu.Lock()
	oldHealth, oldDone := old.healthCancel, old.healthDone
	old.srv, old.healthCancel, old.healthDone = g, hcancel, health
	d.mu.Unlock()
	oldHealth()
	<-oldDone
}

// stop ends a DNS generation: its sockets and its health checks.
func (g *dnsGeneration) stop() {
	g.cancel()
	<-g.done
	g.healthCancel()
	<-g.healthDone
}

// server returns the DNS server answering now (nil without dnsZones).
func (d *dnsRunner) server() *gslb.Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return nil
	}
	return d.cur.srv
}

// addr returns the bound address of a DNS frontend ("" if none).
func (d *dnsRunner) addr(name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return ""
	}
	return d.cur.front.Addr(name)
}

// files returns duplicates of the running generation's sockets.
func (d *dnsRunner) files() ([]*os.File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return nil, nil
	}
	return d.cur.front.Files()
}

// dnsServer returns the DNS server answering now (nil without dnsZones).
func (s *Server) dnsServer() *gslb.Server { return s.dns.server() }

// DNSAddr returns the bound address of a DNS frontend ("" if none).
func (s *Server) DNSAddr(name string) string { return s.dns.addr(name) }
