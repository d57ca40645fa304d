package proxy

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// An edge checks each regional-layer endpoint actively
// (regionalLayer.healthCheck): every interval it sends an HTTP/2 PING on
// one of the endpoint's pooled connections, opening one when none is
// open (so an edge keeps a warm connection to every regional endpoint),
// and waits timeout for the answer. unhealthy failures in a row set the
// endpoint aside; healthy successes in a row bring it back. A request
// that cannot connect sets the endpoint aside at once, until healthy
// checks in a row succeed (or, when no checks run, for healthy
// intervals). A region whose endpoints are all set aside is avoided by
// the edge's picks (View.PickAvoiding) until one comes back.

// layerCheck is a pool's health check settings.
type layerCheck struct {
	interval, timeout  time.Duration
	healthy, unhealthy int
}

// layerHealth is one endpoint's check state.
type layerHealth struct {
	mu         sync.Mutex
	oks, fails int       // successes and failures in a row
	checked    time.Time // of the last check
	detail     string    // its result
	// checking: a check is in flight; next: when the next is due (both
	// owned by Run's goroutine).
	checking bool
	next     time.Time
}

// last returns the time and result of the last check.
func (h *layerHealth) last() (time.Time, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.checked, h.detail
}

// failed sets e aside after a request could not connect to it: until
// the check has succeeded p.check.healthy times in a row, and at least
// for that many intervals when no checks run.
func (p *layerPool) failed(e *layerEndpoint, now time.Time) {
	e.health.mu.Lock()
	e.health.oks = 0
	e.health.mu.Unlock()
	until := now.Add(time.Duration(p.check.healthy) * p.check.interval).UnixNano()
	for {
		old := e.aside.Load()
		if old >= until || e.aside.CompareAndSwap(old, until) {
			return
		}
	}
}

// observe applies one check's result to e.
func (p *layerPool) observe(e *layerEndpoint, err error, now time.Time) {
	h := &e.health
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checked = now
	if err == nil {
		h.fails, h.detail = 0, "ok"
		h.oks++
		if h.oks >= p.check.healthy {
			e.aside.Store(0)
		}
		return
	}
	h.oks, h.detail = 0, err.Error()
	h.fails++
	if h.fails >= p.check.unhealthy {
		e.aside.Store(math.MaxInt64) // until checks succeed again
	}
}

// ping checks e once: a PING on its least busy connection, or on a new
// one. A connection whose PING fails is closed.
func (p *layerPool) ping(ctx context.Context, e *layerEndpoint) error {
	cc, _, _ := e.least()
	if cc == nil {
		e.dial.Lock()
		var err error
		if cc, _, _ = e.least(); cc == nil {
			cc, err = p.open(ctx, e)
		}
		e.dial.Unlock()
		if err != nil {
			return err
		}
	}
	if err := cc.Ping(ctx); err != nil {
		cc.Close()
		return err
	}
	return nil
}

// Run checks every pool's endpoints, each at its pool's interval, until
// ctx ends; then it waits for the checks in flight and closes every
// pool. serve runs it as a component.
func (ls *Layers) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			ls.checks.Wait()
			ls.Close()
			return
		case <-t.C:
		case <-ls.wake:
		}
		t.Reset(ls.checkDue(ctx, time.Now()))
	}
}

// checkDue starts the checks that are due and returns the wait until the
// next one.
func (ls *Layers) checkDue(ctx context.Context, now time.Time) time.Duration {
	ls.mu.Lock()
	pools := make([]*layerPool, 0, len(ls.pools))
	for _, p := range ls.pools {
		pools = append(pools, p)
	}
	ls.mu.Unlock()
	wait := time.Minute
	for _, p := range pools {
		for _, e := range p.eps {
			h := &e.health
			h.mu.Lock()
			if !h.checking && !now.Before(h.next) {
				h.checking, h.next = true, now.Add(p.check.interval)
				ls.checks.Add(1)
				go ls.check(ctx, p, e)
			}
			wait = min(wait, max(h.next.Sub(now), 10*time.Millisecond))
			h.mu.Unlock()
		}
	}
	return wait
}

// check runs one check of e.
func (ls *Layers) check(ctx context.Context, p *layerPool, e *layerEndpoint) {
	defer ls.checks.Done()
	cctx, cancel := context.WithTimeout(ctx, p.check.timeout)
	err := p.ping(cctx, e)
	cancel()
	if ctx.Err() == nil {
		p.observe(e, err, time.Now())
	}
	e.health.mu.Lock()
	e.health.checking = false
	e.health.mu.Unlock()
}

// RetainPlan makes the pools of p's regional layers when p has an EDGE
// frontend (so that their endpoints are checked before the first
// request), and closes, gracefully, those p no longer has: what serve
// calls once a reload is in force. An instance without EDGE frontends
// keeps no pool.
func (ls *Layers) RetainPlan(p *plan.Plan) {
	edge := false
	for _, f := range p.Frontends {
		edge = edge || f.Layer == config.LayerEdge
	}
	want := map[string]bool{}
	for rid, l := range p.RegionalLayers {
		if l != nil && edge {
			want[layerKey(p.Regions[rid], l)] = true
			_, _ = ls.pool(p.Regions[rid], l) // an unusable one is logged on use
		}
	}
	ls.retain(want)
}
