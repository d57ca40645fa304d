package probe

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Prober runs the probe goroutines for a set of Targets. Create it with New,
// give it targets with Update (before or during Run) and drive it with Run.
// All methods are safe for concurrent use.
type Prober struct {
	report    func(Result)
	now       func() time.Time
	tlsConfig *tls.Config
	log       *slog.Logger

	mu sync.Mutex
	// rng draws start jitter; *rand.Rand is not goroutine-safe, so it is
	// only used with mu held.
	rng *rand.Rand
	// targets is the desired set: valid, deduplicated, in first-seen order
	// (so a seeded source yields reproducible jitter).
	targets []Target
	// runCtx is non-nil while Run is active; workers derive from it.
	runCtx context.Context
	// workers holds one running probe goroutine per target while Run is
	// active.
	workers map[Target]*worker
}

// worker is one target's probe goroutine.
type worker struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned
}

// Option configures a Prober.
type Option func(*Prober)

// WithClock sets the clock that stamps Result.At (default time.Now), so
// results line up with the time base of whoever consumes them. Scheduling
// and Result.Latency always use real monotonic time: the probes are real
// network I/O.
func WithClock(now func() time.Time) Option {
	return func(p *Prober) {
		if now != nil {
			p.now = now
		}
	}
}

// WithTLSConfig sets the TLS configuration for HTTPS and HTTP2 probes; it
// must not be modified after New. It is cloned per probe; NextProtos is overwritten and ServerName is filled in
// from Spec.Host (or the target IP) when empty. The default skips
// certificate verification, like Google's probers, which accept any
// backend certificate.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(p *Prober) {
		if cfg != nil {
			p.tlsConfig = cfg
		}
	}
}

// WithLogger sets the logger (default: discard). Each probe result is
// logged at Debug; ignored invalid targets at Warn.
func WithLogger(l *slog.Logger) Option {
	return func(p *Prober) {
		if l != nil {
			p.log = l
		}
	}
}

// WithRand sets the source of start jitter; tests pass a seeded source such
// as rand.NewPCG(1, 2). The default is a ChaCha8 source seeded from
// crypto/rand, so separate Spillway instances do not probe in lockstep.
// The Prober serializes its use of src.
func WithRand(src rand.Source) Option {
	return func(p *Prober) {
		if src != nil {
			p.rng = rand.New(src)
		}
	}
}

// New returns a Prober that passes every probe result to report. See the
// package documentation for the contract report must honour (fast,
// goroutine-safe, must not call back into the Prober). New panics if report
// is nil.
func New(report func(Result), opts ...Option) *Prober {
	if report == nil {
		panic("probe: New called with nil report")
	}
	p := &Prober{
		report: report,
		now:    time.Now,
		// Google's probers do not verify backend certificates.
		tlsConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // intended, see above
		log:       slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(p)
	}
	if p.rng == nil {
		var seed [32]byte
		_, _ = crand.Read(seed[:]) // never fails (crypto/rand, Go 1.24+)
		p.rng = rand.New(rand.NewChaCha8(seed))
	}
	return p
}

// Update replaces the target set. Duplicates (equal Addr and Spec) collapse
// into one probe stream. While Run is active, targets that stay keep their
// goroutine and phase, removed targets are stopped (Update waits for their
// in-flight probe to be abandoned, so no Result for them is reported after
// Update returns), and new targets start after a random delay within their
// first interval. Before Run, Update only records the set. Invalid targets
// (see Target.Validate) are logged and skipped; callers should validate
// first.
func (p *Prober) Update(targets []Target) {
	seen := make(map[Target]bool, len(targets))
	valid := make([]Target, 0, len(targets))
	for _, t := range targets {
		if seen[t] {
			continue
		}
		seen[t] = true
		if err := t.Validate(); err != nil {
			p.log.Warn("probe: ignoring invalid target", "addr", t.Addr, "type", t.Spec.Type, "err", err)
			continue
		}
		valid = append(valid, t)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets = valid
	if p.runCtx != nil {
		p.reconcileLocked()
	}
}

// reconcileLocked makes p.workers match p.targets: it stops workers whose
// target is gone, waits for them, and starts workers for new targets.
// Workers never take p.mu, so waiting with it held cannot deadlock (unless
// report calls back into the Prober, which the contract forbids).
func (p *Prober) reconcileLocked() {
	want := make(map[Target]bool, len(p.targets))
	for _, t := range p.targets {
		want[t] = true
	}
	var stopped []*worker
	for t, w := range p.workers {
		if !want[t] {
			w.cancel()
			stopped = append(stopped, w)
			delete(p.workers, t)
		}
	}
	for _, w := range stopped {
		<-w.done
	}
	for _, t := range p.targets {
		if _, ok := p.workers[t]; !ok {
			p.workers[t] = p.startLocked(t)
		}
	}
}

// startLocked starts the probe goroutine for t.
func (p *Prober) startLocked(t Target) *worker {
	spec := t.Spec.withDefaults()
	delay := jitter(p.rng, spec.Interval)
	ctx, cancel := context.WithCancel(p.runCtx)
	w := &worker{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		p.loop(ctx, t, spec, delay)
	}()
	return w
}

// Run starts probing the current targets and keeps the probe goroutines in
// line with Update until ctx is done. It then stops every probe goroutine,
// waits for all of them to return, and returns nil. Run may be called again
// after it returns; calling it while it is already running returns an
// error.
func (p *Prober) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	p.mu.Lock()
	if p.runCtx != nil {
		p.mu.Unlock()
		return errors.New("probe: Run called while already running")
	}
	p.runCtx = ctx
	p.workers = make(map[Target]*worker, len(p.targets))
	p.reconcileLocked()
	p.mu.Unlock()

	<-ctx.Done()

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		w.cancel()
	}
	for _, w := range p.workers {
		<-w.done
	}
	p.workers = nil
	p.runCtx = nil
	return nil
}

// loop probes t every spec.Interval, start to start, after an initial
// delay, until ctx is done.
func (p *Prober) loop(ctx context.Context, t Target, spec Spec, delay time.Duration) {
	next := time.Now().Add(delay)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		res := p.check(ctx, t, spec)
		if ctx.Err() != nil {
			// Stopped mid-probe: the result says nothing about the target.
			return
		}
		p.log.Debug("probe", "addr", t.Addr, "type", spec.Type, "ok", res.OK,
			"detail", res.Detail, "latency", res.Latency)
		p.report(res)
		next = nextSlot(next, spec.Interval, time.Now())
		timer.Reset(time.Until(next))
	}
}

// jitter returns a uniformly random start delay in [0, interval).
func jitter(r *rand.Rand, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	return time.Duration(r.Int64N(int64(interval)))
}

// nextSlot returns the first time strictly after now on the grid
// prev + k*interval, k >= 1: probes keep their phase, and slots missed
// because a probe or report overran are skipped rather than bunched.
func nextSlot(prev time.Time, interval time.Duration, now time.Time) time.Time {
	next := prev.Add(interval)
	if !next.After(now) {
		missed := now.Sub(next)/interval + 1
		next = next.Add(missed * interval)
	}
	return next
}
