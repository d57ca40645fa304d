package serve

import (
	"sync/atomic"

	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
)

// passiveCounters are the request counters of the HTTP/HTTPS frontends
// whose outcomes DNS GSLB names depend on (gslb.PassiveFrontends), by
// frontend name. The map is replaced whole when the frontends are
// synced; the counters of kept frontends carry over, so a reload does
// not reset them.
type passiveCounters struct {
	m atomic.Pointer[map[string]*gslb.PassiveCounters]
}

// update returns the counters for plan p's passive frontends, reusing
// existing ones, and publishes them.
func (pc *passiveCounters) update(p *plan.Plan) map[string]*gslb.PassiveCounters {
	old := pc.m.Load()
	m := map[string]*gslb.PassiveCounters{}
	for _, name := range gslb.PassiveFrontends(p) {
		if old != nil && (*old)[name] != nil {
			m[name] = (*old)[name]
		} else {
			m[name] = new(gslb.PassiveCounters)
		}
	}
	pc.m.Store(&m)
	return m
}

// frontendObserver returns the proxy's Observe hook for a frontend: it
// bumps the frontend's passive counters c (nil when no DNS name depends
// on the frontend) and hands the outcome to outlier detection when that
// is on. It returns nil when neither consumer wants outcomes, so the
// proxy skips the hook. The passive part is two atomic adds: no lock,
// no channel send, no allocation.
func (s *Server) frontendObserver(c *gslb.PassiveCounters) func(proxy.Outcome) {
	outliers := s.outliers.enabled()
	switch {
	case c == nil && !outliers:
		return nil
	case c == nil:
		return s.observe
	}
	return func(out proxy.Outcome) {
		// A mirrored request, one its client abandoned and one that
		// failed because of the client say nothing about the frontend's
		// service.
		if !out.BackendSignal() {
			return
		}
		// No response (connect failure, timeout, other errors) or a 5xx
		// is an error.
		c.Record(out.Latency, out.Status == 0 || out.Status >= 500)
		if outliers {
			s.observe(out)
		}
	}
}

// samplePassive hands the passive counters to the running DNS server
// (called by the loop every second; the DNS server judges its windows).
func (s *Server) samplePassive() {
	m := s.passive.m.Load()
	if m == nil || len(*m) == 0 {
		return
	}
	srv := s.dnsServer()
	if srv == nil {
		return
	}
	samples := make(map[string]gslb.PassiveSample, len(*m))
	for name, c := range *m {
		samples[name] = c.Sample()
	}
	srv.ObservePassive(samples)
}
