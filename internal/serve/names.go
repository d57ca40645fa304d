package serve

import (
	"context"
	"reflect"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/resolve"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// resolveWait bounds the lookups New and Reload wait for.
const resolveWait = 5 * time.Second

// newNames builds the cache of the config's DNS names (spillway.resolver;
// read once, at New) and resolves them.
func newNames(cfg *config.Config, r resolve.Resolver, now func() time.Time) *resolve.Cache {
	lo, hi := config.DefaultResolverMinTTLSec, config.DefaultResolverMaxTTLSec
	server := ""
	if t := cfg.Spillway; t != nil && t.Resolver != nil {
		server = t.Resolver.Address
		if t.Resolver.MinTTLSec != nil {
			lo = *t.Resolver.MinTTLSec
		}
		if t.Resolver.MaxTTLSec != nil {
			hi = *t.Resolver.MaxTTLSec
		}
	}
	if r == nil {
		if server == "" {
			server = resolve.DefaultServer()
		}
		r = resolve.DNS{Server: server}
	}
	return resolve.NewCache(r, time.Duration(lo)*time.Second, time.Duration(hi)*time.Second, now)
}

// compile resolves cfg's names (new ones now, bounded by resolveWait),
// reads the signed URL keys, checks the backend buckets' directories and
// compiles the plan with their addresses.
func (s *Server) compile(ctx context.Context, cfg *config.Config) (*plan.Plan, error) {
	if names := plan.Names(cfg); len(names) > 0 || len(s.names.Status()) > 0 {
		s.names.SetNames(names)
		ctx, cancel := context.WithTimeout(ctx, resolveWait)
		s.names.Refresh(ctx)
		cancel()
	}
	keys, err := readSignedKeys(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkBuckets(cfg); err != nil {
		return nil, err
	}
	return plan.CompileWith(cfg, plan.Options{Resolved: s.names.Resolved(), SignedKeys: keys, Role: s.opts.Role, Region: s.opts.Region})
}

// refreshNames resolves the names whose TTL ran out, once a second: new
// addresses recompile the config in force (through Reload, so endpoint
// health carries over as on any reload), and a changed state (an error,
// a retry) is republished for get-health.
func (s *Server) refreshNames(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		before := s.names.Status()
		if s.names.Refresh(ctx) {
			if err := s.Reload(ctx, s.base.Load()); err != nil {
				s.log.Error("DNS names changed; recompiling failed", "err", err)
			}
			continue
		}
		if !reflect.DeepEqual(before, s.names.Status()) {
			select {
			case s.events <- event{do: func() { s.publish(s.state.Plan(), nil) }}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// resolutions converts the cache's states for the health report.
func resolutions(st []resolve.Status) []report.Resolution {
	var out []report.Resolution
	for _, x := range st {
		out = append(out, report.Resolution{Name: x.Name, Addresses: x.Addrs, TTLSec: x.TTL.Seconds(), Next: x.Next,
			Resolved: x.Resolved, Error: x.Error, Failures: x.Failures})
	}
	return out
}
