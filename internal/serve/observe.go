package serve

import (
	"math/rand/v2"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
)

// requestMetricsOn reports spillway.requestMetrics (default true).
func requestMetricsOn(c *config.Config) bool {
	return c.Spillway == nil || c.Spillway.RequestMetrics == nil || *c.Spillway.RequestMetrics
}

// sampleRates returns, by service ID, the fraction of a service's
// requests the access log keeps: its logConfig (enable false: none;
// sampleRate, default 1), else the access log's own rate.
func sampleRates(p *plan.Plan, def float64) []float64 {
	rates := make([]float64, len(p.Services))
	for i, svc := range p.Services {
		rates[i] = def
		if svc.Config == nil || svc.Config.LogConfig == nil {
			continue
		}
		lc := svc.Config.LogConfig
		switch {
		case !lc.Enable:
			rates[i] = 0
		case lc.SampleRate != nil:
			rates[i] = *lc.SampleRate
		default:
			rates[i] = 1
		}
	}
	return rates
}

// sampled draws whether a request kept at rate is logged.
func sampled(rate float64) bool {
	return rate >= 1 || rate > 0 && rand.Float64() < rate
}

// recorder returns the proxy's Record hook for frontend pf of plan p: the
// request metrics and the access log, the one observation point of a
// request. It returns nil when both are off, so the proxy skips records
// altogether.
func (s *Server) recorder(p *plan.Plan, pf *plan.Frontend) func(*proxy.Record) {
	metricsOn := requestMetricsOn(p.Config)
	_, rate, logOn := accessLogConfig(p.Config)
	if !metricsOn && !logOn {
		return nil
	}
	var fs *frontendSeries
	if metricsOn {
		fs = s.reqMetrics.forFrontend(p, pf.Name)
	}
	rates := sampleRates(p, rate)
	return func(rec *proxy.Record) {
		if fs != nil {
			fs.of(rec).observe(rec)
		}
		if !logOn {
			return
		}
		a := s.alog.Load()
		if a == nil {
			return
		}
		r := rate
		if svc := rec.Service; svc != nil && svc.ID < len(p.Services) && p.Services[svc.ID] == svc {
			r = rates[svc.ID]
		}
		if !sampled(r) {
			return
		}
		a.record(rec)
	}
}

// configureAccessLog starts, replaces or stops the access log writer for
// config c. A writer whose settings are unchanged keeps running.
func (s *Server) configureAccessLog(c *config.Config) error {
	s.alogMu.Lock()
	defer s.alogMu.Unlock()
	st, _, on := accessLogConfig(c)
	old := s.alog.Load()
	// An old writer is stopped without waiting for it: it may be blocked
	// on a destination that does not drain (a stalled stdout pipe), and
	// this runs on the control loop.
	if !on {
		if old != nil {
			s.alog.Store(nil)
			go old.close()
		}
		return nil
	}
	if old != nil && old.settings == st {
		return nil
	}
	a, err := openAccessLog(st, s.stdout, &s.alogCounts)
	if err != nil {
		return err
	}
	s.alog.Store(a)
	if old != nil {
		go old.close()
	}
	return nil
}

// closeAccessLog stops the writer after it wrote what is queued, waiting
// at most 5 s for a destination that does not drain.
func (s *Server) closeAccessLog() {
	s.alogMu.Lock()
	defer s.alogMu.Unlock()
	if a := s.alog.Swap(nil); a != nil {
		done := make(chan struct{})
		go func() { a.close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			s.log.Warn("access log: the destination did not take the last lines within 5 s", "path", a.settings.path)
		}
	}
}
