package serve

import (
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/serve/accesslog"
)

// requestMetricsOn reports spillway.requestMetrics (default true).
func requestMetricsOn(c *config.Config) bool {
	return c.Spillway == nil || c.Spillway.RequestMetrics == nil || *c.Spillway.RequestMetrics
}

// recorder returns the proxy's Record hook for frontend pf of plan p: the
// request metrics, the access log and the trace export, the one
// observation point of a request. It returns nil when all are off, so
// the proxy skips records altogether.
func (s *Server) recorder(p *plan.Plan, pf *plan.Frontend) func(*proxy.Record) {
	metricsOn := requestMetricsOn(p.Config)
	rate, logOn := accesslog.Sampling(p.Config)
	tr := s.tracing.Current() // configured before the handlers are built
	if !metricsOn && !logOn && tr == nil {
		return nil
	}
	var fs *frontendSeries
	var eps *endpointCounters
	if metricsOn {
		fs = s.reqMetrics.forFrontend(p, pf.Name)
		eps = s.endpoints.forPlan(p)
	}
	rates := accesslog.SampleRates(p, rate)
	return func(rec *proxy.Record) {
		if fs != nil {
			fs.of(rec).observe(rec)
			eps.observe(rec)
		}
		if tr != nil {
			tr.Export(rec)
		}
		if !logOn {
			return
		}
		r := rate
		if svc := rec.Service; svc != nil && svc.ID < len(p.Services) && p.Services[svc.ID] == svc {
			r = rates[svc.ID]
		}
		s.alog.Record(rec, r)
	}
}
