package gslb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/probe"
)

// Options are what a Server takes from its composer. Every field is
// optional.
type Options struct {
	// Logger receives listener and health transitions (default: discard).
	Logger *slog.Logger
	// Now is the clock (default time.Now). Health transitions, ramps and
	// transition TTLs are computed from it, so tests can use a virtual one.
	Now func() time.Time
	// KeyNow is the clock of managed DNSSEC keys (dnssec.keyDirectory):
	// the key state New brings the zones to (default Now). Signatures
	// are dated by Now, so a test can walk a rollover's months with
	// KeyNow while validators check the signatures against real time.
	KeyNow func() time.Time
	// Rand is the source of weighted draws; the Server serializes its use.
	// Default: the runtime's goroutine-safe generator (math/rand/v2).
	Rand rand.Source
	// View returns the engine's current decision snapshot; backendService
	// GSLB names answer a region while the View gives the service healthy
	// capacity there. Nil: every region of such names is healthy.
	View func() *engine.View
	// Observe, when set, is called once per answered query with what it
	// asked and how it was answered (metrics). It runs on the query's
	// goroutine and must be cheap and safe for concurrent use.
	Observe func(Query)
	// Stats, when set, counts queries by zone, QTYPE, RCODE and
	// transport, and signature cache hits (telemetry.go). Pass the same
	// Stats to every generation.
	Stats *Stats
	// Tap, when set, receives the queries it wants in full (query log,
	// dnstap; telemetry.go).
	Tap Tap
}

// Query is one answered query, for metrics. Name is a name of the zones
// (lower case, fully qualified) when the query hit one, else "" (names
// outside the zones, or that do not exist, are not told apart, so the
// label set stays bounded by the config).
type Query struct {
	Name  string
	Type  uint16
	Rcode int
	// Member is the GSLB member answered first ("" for static answers).
	Member string
	// zone is the origin of the zone that answered ("" if none), what
	// response rate limiting counts denials by.
	zone string
	// stats are that zone's counters (nil: none, or "other").
	stats *ZoneStats
}

// Server is Spillway's authoritative DNS server for dnsZones: it answers
// from the zones' static records and decides GSLB names per query from
// its own pool probes and the engine's View. Create it with New, serve
// with Run. All methods are safe for concurrent use.
type Server struct {
	log     *slog.Logger
	now     func() time.Time
	rnd     func() uint64
	view    func() *engine.View
	observe func(Query)
	stats   *Stats
	tap     Tap
	plan    *plan.Plan
	zones   zoneSet
	names   []*gname
	// frontends are the plan's protocol: DNS frontends.
	frontends []*plan.Frontend
	prober    *probe.Prober
	// targets maps a probe target to the members it decides; checks
	// lists the targets in configuration order.
	targets map[probe.Target][]memberRef
	checks  []probe.Target
	bufs    sync.Pool
	// idVersion and idID answer CH TXT version.bind and id.server
	// (identity.go); "" when off.
	idVersion, idID string
	// tsig are the zones' TSIG keys (transfer.go); prevSerials the SOA
	// serials of the generation CarryState took state from (notify.go).
	tsig        tsigKeys
	prevSerials map[string]uint32
	// rl are response rate limiting and the denial signature cap (rrl.go).
	rl rateLimits

	// mu guards the members' health.State, the publishing of name
	// states, and addrs.
	mu       sync.Mutex
	lastView atomic.Pointer[engine.View]
	addrs    map[string]string
	ready    chan struct{}
	running  bool // RunHealth started
	ran      bool // Run started
}

// memberRef names one health check of one member of one name.
type memberRef struct {
	name   *gname
	member int
	check  int
}

// New compiles cfg's dnsZones against plan p (compiled from the same,
// validated cfg). It opens no sockets; Run does.
func New(cfg *config.Config, p *plan.Plan, opts Options) (*Server, error) {
	if cfg == nil || p == nil {
		return nil, errors.New("gslb: New needs a config and a plan")
	}
	s := &Server{
		log:     opts.Logger,
		now:     opts.Now,
		view:    opts.View,
		observe: opts.Observe,
		tap:     opts.Tap,
		plan:    p,
		zones:   zoneSet{},
		targets: map[probe.Target][]memberRef{},
		addrs:   map[string]string{},
		ready:   make(chan struct{}),
		tsig:    tsigKeys{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.rnd = rand.Uint64
	if src := opts.Rand; src != nil {
		var mu sync.Mutex
		s.rnd = func() uint64 {
			mu.Lock()
			defer mu.Unlock()
			return src.Uint64()
		}
	}
	s.bufs.New = func() any { b := make([]byte, 0, 1024); return &b }
	if cfg.Spillway != nil && cfg.Spillway.DNSIdentity != nil {
		s.idVersion, s.idID = cfg.Spillway.DNSIdentity.Version, cfg.Spillway.DNSIdentity.ID
	}
	keyNow := s.now
	if opts.KeyNow != nil {
		keyNow = opts.KeyNow
	}
	for i := range cfg.DNSZones {
		z, names, err := newZone(&cfg.DNSZones[i], cfg, p)
		if err != nil {
			return nil, err
		}
		if err := z.enableDNSSEC(&cfg.DNSZones[i], i, keyNow()); err != nil {
			return nil, err
		}
		if err := compileTransfer(z, &cfg.DNSZones[i], i, s.tsig); err != nil {
			return nil, err
		}
		if _, dup := s.zones[z.origin]; dup {
			return nil, fmt.Errorf("gslb: zone %s is defined twice", z.origin)
		}
		s.zones[z.origin] = z
		s.names = append(s.names, names...)
	}
	var targets []probe.Target
	for _, n := range s.names {
		for i := range n.members {
			for c, t := range n.members[i].targets {
				if _, seen := s.targets[t]; !seen {
					targets = append(targets, t)
				}
				s.targets[t] = append(s.targets[t], memberRef{n, i, c})
			}
		}
	}
	for _, f := range p.Frontends {
		if f.Protocol == "DNS" {
			s.frontends = append(s.frontends, f)
		}
	}
	s.checks = targets
	s.initRateLimits(cfg)
	s.initStats(opts.Stats)
	s.prober = probe.New(s.report, probe.WithClock(s.now), probe.WithLogger(s.log))
	s.prober.Update(targets)
	return s, nil
}

// Handler returns the DNS handler of the TCP listeners (for tests and for
// composing with a dns.Server); UDP queries get the same answers from
// serveUDP.
func (s *Server) Handler() dns.Handler { return dns.HandlerFunc(s.serveDNS) }

// Addr returns the address frontend listens on (UDP and TCP share it), or
// "" before Run has bound it or when no such DNS frontend exists.
func (s *Server) Addr(frontend string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[frontend]
}

// Ready is closed once Run has bound every DNS frontend.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// viewPoll is how often Run re-reads the View when no query does.
const viewPoll = time.Second

// Run listens on every protocol: DNS frontend (UDP and TCP on the same
// address), probes the pools' health checks and answers queries until ctx
// is done; it then shuts the listeners down and returns nil. It returns
// an error when a frontend cannot be bound or a listener fails. Run may
// be called once. (A composer that reloads configs uses Listen, Serve,
// Swap and RunHealth instead, to keep the sockets across generations.)
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	ran := s.ran
	s.ran = true
	s.mu.Unlock()
	if ran {
		return errors.New("gslb: Run called twice")
	}
	f, err := Listen(s)
	if err != nil {
		return err
	}
	// Bound but not yet answering: queries wait in the sockets while the
	// first probes run.
	s.Prime(ctx, PrimeWait)
	s.mu.Lock()
	maps.Copy(s.addrs, f.Addrs())
	s.mu.Unlock()
	close(s.ready)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	health := make(chan error, 1)
	go func() { health <- s.RunHealth(ctx) }()
	err = f.Serve(ctx)
	cancel()
	if herr := <-health; err == nil {
		err = herr
	}
	return err
}

// RunHealth probes the pools' health checks and follows the engine's
// View until ctx is done; it then returns nil. It may be called once.
// Queries are answered by whatever serves the Server (Run, or a Front).
func (s *Server) RunHealth(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("gslb: Run or RunHealth called twice")
	}
	s.running = true
	s.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.prober.Run(ctx) })
	wg.Go(func() { s.notifyAll(ctx) })
	if s.view != nil {
		wg.Go(func() {
			t := time.NewTicker(viewPoll)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					s.syncView(s.now())
				}
			}
		})
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

// listenBoth binds UDP and TCP on the same address. With port 0 the TCP
// socket takes the port the UDP one got, retrying a few times in case
// another process holds that TCP port.
func listenBoth(addr string) (*net.UDPConn, net.Listener, error) {
	var lastErr error
	for range 10 {
		ua, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("listen udp: %w", err)
		}
		pc, err := net.ListenUDP("udp", ua)
		if err != nil {
			return nil, nil, fmt.Errorf("listen udp: %w", err)
		}
		tcpAddr := addr
		if ap, err := netip.ParseAddrPort(pc.LocalAddr().String()); err == nil {
			host, _, _ := net.SplitHostPort(addr)
			tcpAddr = net.JoinHostPort(host, strconv.Itoa(int(ap.Port())))
		}
		ln, err := net.Listen("tcp", tcpAddr)
		if err == nil {
			return pc, ln, nil
		}
		_ = pc.Close()
		lastErr = fmt.Errorf("listen tcp: %w", err)
		if !errors.Is(err, syscall.EADDRINUSE) || !isPortZero(addr) {
			break
		}
	}
	return nil, nil, lastErr
}

// isPortZero reports whether addr asks for any free port.
func isPortZero(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && (port == "0" || port == "")
}
