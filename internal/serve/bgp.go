package serve

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/anycast"
	"github.com/spillwaylb/spillway/internal/bgp"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// anycastRunner is the BGP component (spillway.bgp): it keeps a GoBGP
// speaker (package bgp) configured from the config in force, and, on
// every health publication and every second, asks package anycast what
// each prefix of the frontends should be and announces, degrades or
// withdraws it. On shutdown it withdraws everything first and lets the
// instance serve on for drainSec (lameDuck) before the listeners close.
// Without spillway.bgp it does nothing.
type anycastRunner struct {
	s   *Server
	log *slog.Logger

	// mu guards the speaker and the config in force.
	mu      sync.Mutex
	speaker *bgp.Speaker // nil until spillway.bgp is first configured
	conf    *config.BGP  // in force (nil: none)
	pw      map[string]string
	started bool

	// measured is what the loop measured at its last publication.
	measured atomic.Pointer[[]anycast.Frontend]
	// decided is the last decision, lastErr the last error applying one.
	decided atomic.Pointer[[]anycast.Prefix]
	lastErr atomic.Pointer[string]
	kick    chan struct{} // 1 slot: decide now

	// shutdown asks the run goroutine to withdraw everything; it closes
	// withdrawn when done, and says in announced whether anything was.
	shutdown, withdrawn chan struct{}
	announced           atomic.Bool
	cancel              context.CancelFunc
	done                chan struct{}

	// Owned by the loop goroutine (measure): each frontend's reachable
	// services, per plan.
	svcPlan *plan.Plan
	svcs    map[string][]*plan.Service
}

// newAnycast returns the component for c (nil: no BGP), reading the
// neighbors' password files now so that one missing fails the start.
func newAnycast(s *Server, c *config.BGP) (*anycastRunner, error) {
	pw, err := bgp.Passwords(c)
	if err != nil {
		return nil, err
	}
	return &anycastRunner{s: s, log: s.log, conf: c, pw: pw, kick: make(chan struct{}, 1),
		shutdown: make(chan struct{}), withdrawn: make(chan struct{})}, nil
}

// bgpOf returns cfg's spillway.bgp (nil when absent).
func bgpOf(cfg *config.Config) *config.BGP {
	if cfg.Spillway == nil {
		return nil
	}
	return cfg.Spillway.BGP
}

// Start configures the speaker and starts deciding.
func (r *anycastRunner) Start(context.Context) error {
	r.mu.Lock()
	r.started = true
	c, pw := r.conf, r.pw
	r.mu.Unlock()
	if err := r.configure(context.Background(), c, pw); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() { defer close(r.done); r.run(ctx) }()
	return nil
}

// Stop ends the decisions and every session.
func (r *anycastRunner) Stop(ctx context.Context) error {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.speaker == nil {
		return nil
	}
	return r.speaker.Close(ctx)
}

// configure applies c (a reload's, or the first) with its neighbors'
// passwords; on error the speaker keeps the previous one.
func (r *anycastRunner) configure(ctx context.Context, c *config.BGP, pw map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		r.conf, r.pw = c, pw
		return nil
	}
	if c != nil && r.speaker == nil {
		r.speaker = bgp.New(r.log)
	}
	if r.speaker != nil {
		if err := r.speaker.Configure(ctx, c, pw); err != nil {
			return err
		}
	}
	r.conf, r.pw = c, pw
	r.poke()
	return nil
}

// poke asks for a decision now.
func (r *anycastRunner) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// measure records, on the loop, what each frontend with anycast
// prefixes can serve with under snap's plan, and asks for a decision.
func (r *anycastRunner) measure(st *control.State, snap *proxy.Snapshot) {
	p := snap.Plan
	if bgpOf(p.Config) == nil {
		r.measured.Store(nil)
		return
	}
	if r.svcPlan != p {
		r.svcPlan, r.svcs = p, map[string][]*plan.Service{}
		for _, f := range p.Frontends {
			if t := snap.Routes[urlMapName(f)]; t != nil {
				r.svcs[f.Name] = anycast.Services(p, t.Services())
			}
		}
	}
	var fs []anycast.Frontend
	for _, f := range p.Frontends {
		prefixes := f.Config.Prefixes()
		if len(prefixes) == 0 {
			continue
		}
		af := anycast.Frontend{Name: f.Name, Prefixes: prefixes}
		if f.Protocol == "DNS" {
			af.Capacity.Static = true
		} else {
			af.Capacity = anycast.Measure(st, r.svcs[f.Name])
		}
		fs = append(fs, af)
	}
	r.measured.Store(&fs)
	r.poke()
}

func urlMapName(f *plan.Frontend) string {
	if f.URLMap == nil {
		return ""
	}
	return f.URLMap.Name
}

// run decides on every poke and every second until ctx ends; asked to
// shut down, it withdraws everything and waits for ctx.
func (r *anycastRunner) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.shutdown:
			r.decide(ctx, true)
			close(r.withdrawn)
			<-ctx.Done()
			return
		case <-r.kick:
		case <-tick.C:
		}
		r.decide(ctx, false)
	}
}

// decide makes and applies one decision.
func (r *anycastRunner) decide(ctx context.Context, shuttingDown bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.speaker == nil {
		return
	}
	var frontends []anycast.Frontend
	if m := r.measured.Load(); m != nil && r.conf != nil {
		for _, f := range *m {
			f.Listening = r.s.front.addr(f.Name) != "" || r.s.dns.addr(f.Name) != ""
			frontends = append(frontends, f)
		}
	}
	in := anycast.Input{Now: r.s.now(), BGP: r.conf, Frontends: frontends, ShuttingDown: shuttingDown}
	if prev := r.decided.Load(); prev != nil {
		in.Prev = *prev
	}
	if f := r.s.FleetStatus(); f != nil && f.Stale {
		in.Stale, in.StaleSince = true, f.StaleSince
	}
	var out []anycast.Prefix
	if r.conf != nil {
		out = anycast.Decide(in)
	}
	r.apply(ctx, in.Prev, out)
	r.decided.Store(&out)
}

// apply announces, changes and withdraws routes to match out (prev was
// the decision before, for the log).
func (r *anycastRunner) apply(ctx context.Context, prev, out []anycast.Prefix) {
	was := map[netip.Prefix]anycast.State{}
	for _, p := range prev {
		was[p.Prefix] = p.State
	}
	have := r.speaker.Announced()
	keep := map[netip.Prefix]bool{}
	var errs []string
	for _, d := range out {
		if st, ok := was[d.Prefix]; ok && st != d.State || !ok && d.State != anycast.Withdrawn {
			r.logChange(d)
		}
		if d.State == anycast.Withdrawn {
			continue
		}
		keep[d.Prefix] = true
		want := bgp.Route{Prefix: d.Prefix, ASPathPrepend: d.ASPathPrepend, MED: d.MED}
		if cur, ok := have[d.Prefix]; !ok || !sameRoute(cur, want) {
			if err := r.speaker.Announce(ctx, want); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	for p := range have {
		if !keep[p] {
			if err := r.speaker.Withdraw(ctx, p); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	r.announced.Store(len(keep) > 0)
	msg := ""
	if len(errs) > 0 {
		msg = errs[0]
		if old := r.lastErr.Load(); old == nil || *old != msg {
			r.log.Error("bgp: applying the anycast decision", "err", msg)
		}
	}
	r.lastErr.Store(&msg)
}

// logChange logs a prefix's new state.
func (r *anycastRunner) logChange(d anycast.Prefix) {
	args := []any{"prefix", d.Prefix.String(), "state", d.State.String(), "reason", string(d.Reason), "detail", d.Detail}
	if d.State == anycast.Announced {
		r.log.Info("bgp: prefix announced", args...)
	} else {
		r.log.Warn("bgp: prefix "+map[anycast.State]string{anycast.Degraded: "degraded", anycast.Withdrawn: "withdrawn"}[d.State], args...)
	}
}

func sameRoute(a, b bgp.Route) bool {
	return a.Prefix == b.Prefix && a.ASPathPrepend == b.ASPathPrepend && (a.MED == nil) == (b.MED == nil) && (a.MED == nil || *a.MED == *b.MED)
}

// lameDuck withdraws every prefix, then, if any was announced, waits
// drainSec while the instance still serves: routers move the traffic
// elsewhere before the listeners close.
func (r *anycastRunner) lameDuck() {
	r.mu.Lock()
	c, running := r.conf, r.cancel != nil && r.speaker != nil
	r.mu.Unlock()
	if c == nil || !running {
		return
	}
	wasAnnounced := r.announced.Load()
	close(r.shutdown)
	select {
	case <-r.withdrawn:
	case <-time.After(5 * time.Second):
		r.log.Error("bgp: withdrawing at shutdown took more than 5 s; closing anyway")
	}
	if !wasAnnounced || c.Drain() == 0 {
		return
	}
	r.log.Info("bgp: anycast prefixes withdrawn; serving on until the routers have moved the traffic", "drain", c.Drain().String())
	time.Sleep(c.Drain())
}

// report returns the anycast view for get-health (nil without
// spillway.bgp).
func (r *anycastRunner) report(ctx context.Context) *report.BGP {
	r.mu.Lock()
	c, sp := r.conf, r.speaker
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	b := &report.BGP{LocalASN: c.LocalASN, RouterID: c.RouterID, Prefixes: []anycast.Prefix{}}
	if sp != nil {
		b.Sessions = sp.Sessions(ctx)
	}
	if d := r.decided.Load(); d != nil {
		b.Prefixes = *d
	}
	if e := r.lastErr.Load(); e != nil {
		b.Error = *e
	}
	return b
}

// withBGP returns h with the anycast view (a copy; h is shared).
func (s *Server) withBGP(h *report.Health) *report.Health {
	if h == nil || s.anycast == nil {
		return h
	}
	b := s.anycast.report(context.Background())
	if b == nil {
		return h
	}
	c := *h
	c.BGP = b
	return &c
}
