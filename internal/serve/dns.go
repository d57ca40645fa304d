package serve

import (
	"context"
	"fmt"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/plan"
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
	})
	if err != nil {
		return nil, fmt.Errorf("dnsZones: %w", err)
	}
	return g, nil
}

// startDNS makes g the DNS server, replacing the running one. When g's
// DNS frontends are the ones already bound, g takes over their sockets:
// queued UDP queries and open TCP connections carry on, answered by g
// from then on; the old generation's health checks stop. Otherwise the
// old sockets close and g's are bound anew. A nil g stops everything.
func (s *Server) startDNS(ctx context.Context, g *gslb.Server) error {
	s.mu.Lock()
	old := s.dns
	s.mu.Unlock()
	if g != nil && old != nil && old.front.Swap(g) {
		hctx, hcancel := context.WithCancel(ctx)
		health := make(chan error, 1)
		go func() { health <- g.RunHealth(hctx) }()
		s.mu.Lock()
		oldHealth, oldDone := old.healthCancel, old.healthDone
		old.srv, old.healthCancel, old.healthDone = g, hcancel, health
		s.mu.Unlock()
		oldHealth()
		<-oldDone
		return nil
	}
	if old != nil {
		s.mu.Lock()
		s.dns = nil
		s.mu.Unlock()
		old.stop()
	}
	if g == nil {
		return nil
	}
	f, err := gslb.Listen(g)
	if err != nil {
		return fmt.Errorf("DNS frontend: %w", err)
	}
	// Bound but not yet answering: queries wait in the sockets while the
	// members nobody has probed get their first probe.
	g.Prime(ctx, gslb.PrimeWait)
	fctx, fcancel := context.WithCancel(ctx)
	hctx, hcancel := context.WithCancel(ctx)
	done, health := make(chan error, 1), make(chan error, 1)
	d := &dnsServer{srv: g, front: f, cancel: fcancel, done: done, healthCancel: hcancel, healthDone: health}
	// The goroutines hold the channels, not d: a swap replaces
	// d.healthDone while this generation's health checks still run.
	go func() { done <- f.Serve(fctx) }()
	go func() { health <- g.RunHealth(hctx) }()
	s.mu.Lock()
	s.dns = d
	s.mu.Unlock()
	return nil
}

// stop ends a DNS generation: its sockets and its health checks.
func (d *dnsServer) stop() {
	d.cancel()
	<-d.done
	d.healthCancel()
	<-d.healthDone
}

// dnsServer returns the DNS server answering now (nil without dnsZones).
// A reload swaps it under s.mu, so it is read under s.mu too.
func (s *Server) dnsServer() *gslb.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dns == nil {
		return nil
	}
	return s.dns.srv
}

// DNSAddr returns the bound address of a DNS frontend ("" if none).
func (s *Server) DNSAddr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dns == nil {
		return ""
	}
	return s.dns.front.Addr(name)
}
