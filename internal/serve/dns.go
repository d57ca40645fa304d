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

// startDNS runs g under ctx, replacing (stopping first) any running
// generation. A nil g only stops the old one.
func (s *Server) startDNS(ctx context.Context, g *gslb.Server) error {
	s.mu.Lock()
	old := s.dns
	s.dns = nil
	s.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
	if g == nil {
		return nil
	}
	dctx, cancel := context.WithCancel(ctx)
	d := &dnsServer{srv: g, cancel: cancel, done: make(chan error, 1)}
	go func() { d.done <- g.Run(dctx) }()
	select {
	case <-g.Ready():
	case err := <-d.done:
		cancel()
		return fmt.Errorf("DNS frontend: %w", err)
	}
	s.mu.Lock()
	s.dns = d
	s.mu.Unlock()
	return nil
}

// DNSAddr returns the bound address of a DNS frontend ("" if none).
func (s *Server) DNSAddr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dns == nil {
		return ""
	}
	return s.dns.srv.Addr(name)
}
