package fleet

import (
	"context"
	"log/slog"
	"time"

	"github.com/spillwaylb/spillway/internal/control"
)

// InstanceServer is the running server a fleet instance drives: the
// Agent's Target, the ProbeShare's ShareServer and the ControlLoop's
// DrainHost (*serve.Server is all three).
type InstanceServer interface {
	Target
	ShareServer
	DrainHost
	// SetFleetSources shows the control loop and the probe share in
	// /health and /metrics.
	SetFleetSources(control.FleetSources)
	OverlayHost
	CacheHost
	SummaryHost
}

// InstanceOptions configure the fleet side of one instance: what
// `spillway serve --fleet` runs next to its server.
type InstanceOptions struct {
	// Instance (required) and Region name this instance in the fleet;
	// Role is its --role: "" (every layer), config.LayerEdge (an edge:
	// it never probes endpoints behind a regional layer) or
	// config.LayerRegional (see ProbeOwners).
	Instance, Region, Role string
	// Probers is --fleet-probers: how many instances probe each target;
	// 0 runs no ProbeShare (every instance probes every endpoint, as in
	// standalone).
	Probers int
	// Rate turns on fleet-wide RATE (--fleet-rate): a DemandShare
	// publishes this instance's offered rate and adds the others' to it.
	Rate bool
	// RateLimits turns on fleet-wide rate limits (--fleet-rate-limits):
	// a RateLimitShare adds the other instances' counts and bans to the
	// security policies' throttle and rate_based_ban rules.
	RateLimits bool
	// LeaseTTL is the TTL of the instance's session lease, which its
	// registration, verdicts, offered rate and election key live under
	// (default 10 s).
	// CheckInterval is how often the agent and the probe share check etcd
	// (default 2 s); CheckTimeout bounds every etcd call (default 3 s);
	// MinBackoff and MaxBackoff bound the wait between reconnections
	// (defaults 200 ms and a third of LeaseTTL, at most 10 s).
	LeaseTTL, CheckInterval, CheckTimeout time.Duration
	MinBackoff, MaxBackoff                time.Duration
	// InvalidationHistory bounds the cache invalidation records kept in
	// etcd (default DefaultInvalidationHistory; see CacheShare).
	InvalidationHistory int
	// SummaryInterval is how often the instance's summary for the fleet
	// view is looked at and, when it changed, published (default
	// DefaultSummaryInterval).
	SummaryInterval time.Duration
	Logger          *slog.Logger
}

// Instance is the fleet side of one `spillway serve --fleet`: its Agent
// (config), ProbeShare (sharded probing; nil with Probers 0),
// DemandShare (fleet-wide RATE; nil without Rate), RateLimitShare
// (fleet-wide rate limits; nil without RateLimits), ControlLoop (the
// elected control loop), OverlayShare (the runtime overlay), CacheShare
// (Cloud CDN cache invalidations) and SummaryShare (the dashboard's
// fleet view), on one Store. Build it before the server (the
// server's options need the shares, see Share and Demand) and Run it once
// the server is ready.
type Instance struct {
	store  *Store
	opts   InstanceOptions
	share  *ProbeShare
	demand *DemandShare
	limits *RateLimitShare
	loop   *ControlLoop
	ov     *OverlayShare
	cache  *CacheShare
	sum    *SummaryShare
	certs  *CertStorage
}

// NewInstance returns the fleet side of an instance; Run starts it.
func NewInstance(store *Store, opts InstanceOptions) (*Instance, error) {
	in := &Instance{store: store, opts: opts, ov: newOverlayShare(store, opts.Logger, opts.CheckInterval, opts.CheckTimeout),
		cache: newCacheShare(store, opts.Instance, opts.InvalidationHistory, opts.Logger, opts.CheckInterval, opts.CheckTimeout),
		sum:   newSummaryShare(store, opts.Instance, opts.Logger, opts.SummaryInterval, opts.CheckTimeout), certs: NewCertStorage(store, opts.LeaseTTL)}
	var err error
	if opts.Probers != 0 {
		if in.share, err = NewProbeShare(store, ProbeShareOptions{
			Instance: opts.Instance, Region: opts.Region, Role: opts.Role, Probers: opts.Probers, Logger: opts.Logger,
			LeaseTTL: opts.LeaseTTL, CheckInterval: opts.CheckInterval, CheckTimeout: opts.CheckTimeout,
			MinBackoff: opts.MinBackoff, MaxBackoff: opts.MaxBackoff,
		}); err != nil {
			return nil, err
		}
	}
	if opts.Rate {
		if in.demand, err = NewDemandShare(store, DemandShareOptions{
			Instance: opts.Instance, Logger: opts.Logger,
			LeaseTTL: opts.LeaseTTL, CheckInterval: opts.CheckInterval, CheckTimeout: opts.CheckTimeout,
			MinBackoff: opts.MinBackoff, MaxBackoff: opts.MaxBackoff,
		}); err != nil {
			return nil, err
		}
	}
	if opts.RateLimits {
		if in.limits, err = NewRateLimitShare(store, RateLimitShareOptions{
			Instance: opts.Instance, Logger: opts.Logger, LeaseTTL: opts.LeaseTTL, CheckTimeout: opts.CheckTimeout,
			MinBackoff: opts.MinBackoff, MaxBackoff: opts.MaxBackoff,
		}); err != nil {
			return nil, err
		}
	}
	if in.loop, err = NewControlLoop(store, ControlLoopOptions{
		Instance: opts.Instance, Logger: opts.Logger, LeaseTTL: opts.LeaseTTL,
		CheckTimeout: opts.CheckTimeout, MinBackoff: opts.MinBackoff, MaxBackoff: opts.MaxBackoff,
	}); err != nil {
		return nil, err
	}
	return in, nil
}

// Share returns the instance's probe share (nil with Probers 0): the
// server's Options.ProbeShare when not nil.
func (in *Instance) Share() *ProbeShare { return in.share }

// Demand returns the instance's demand share (nil without Rate): the
// server's Options.DemandShare when not nil.
func (in *Instance) Demand() *DemandShare { return in.demand }

// RateLimits returns the instance's rate limit share (nil without
// RateLimits): the server's Options.RateLimitShare when not nil.
func (in *Instance) RateLimits() *RateLimitShare { return in.limits }

// Overlay returns the instance's share of the fleet's runtime overlay:
// the server's Options.OverlayStore.
func (in *Instance) Overlay() *OverlayShare { return in.ov }

// Cache returns the instance's share of the fleet's cache
// invalidations: the server's Options.CacheInvalidations.
func (in *Instance) Cache() *CacheShare { return in.cache }

// CertStorage returns the fleet's storage of MANAGED certificates: the
// server's Options.CertStorage, so the fleet orders each certificate
// once.
func (in *Instance) CertStorage() *CertStorage { return in.certs }

// Summaries returns the instance's share of the fleet view.
func (in *Instance) Summaries() *SummaryShare { return in.sum }

// Loop returns the instance's control loop.
func (in *Instance) Loop() *ControlLoop { return in.loop }

// Run runs the agent, the shares and the control loop on srv until ctx
// is done (initial is the status at start, as Start returns it), and
// returns once all have stopped. They share one session with etcd: one
// lease, kept alive by one keepalive stream, that every key of the
// instance lives under, and one reconnect loop. The lease is revoked as
// they stop (when etcd still answers), so a clean stop leaves the fleet
// at once.
func (in *Instance) Run(ctx context.Context, srv InstanceServer, initial control.FleetStatus) error {
	ag, err := NewAgent(in.store, srv, AgentOptions{
		Instance: in.opts.Instance, Region: in.opts.Region, Role: in.opts.Role, Initial: initial, Logger: in.opts.Logger,
		LeaseTTL: in.opts.LeaseTTL, CheckInterval: in.opts.CheckInterval, CheckTimeout: in.opts.CheckTimeout,
		MinBackoff: in.opts.MinBackoff, MaxBackoff: in.opts.MaxBackoff,
	})
	if err != nil {
		return err
	}
	src := Sources(in.loop, in.share, in.demand)
	if in.limits != nil {
		src.RateLimits = in.limits.status
	}
	srv.SetFleetSources(src)
	members := []member{ag}
	if in.share != nil {
		in.share.srv = srv
		members = append(members, in.share)
	}
	if in.demand != nil {
		members = append(members, in.demand)
	}
	if in.limits != nil {
		members = append(members, in.limits)
	}
	in.loop.host = srv
	in.ov.host = srv
	in.cache.host = srv
	in.sum.host = srv
	srv.SetFleetPeers(in.sum.Peers)
	members = append(members, in.loop, in.ov, in.cache, in.sum)
	in.store.runSession(ctx, ag.sessionOptions(), members...)
	return nil
}
