package serve

import (
	"math/rand/v2"
	"time"

	"github.com/spillwaylb/spillway/internal/outlier"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/serve/dashboard"
)

// outliers holds one detector per backend service that sets
// outlierDetection. Owned by the loop goroutine.
type outliers struct {
	det   []*outlier.Detector // by service ID; nil when not configured
	index []map[int]int       // by service ID: endpoint ID → detector index
	eps   [][]*plan.Endpoint  // by service ID: detector index → endpoint
	next  []time.Time         // next sweep per service
	rng   *rand.Rand
}

func newOutliers(p *plan.Plan, now time.Time) *outliers {
	o := &outliers{
		det:   make([]*outlier.Detector, len(p.Services)),
		index: make([]map[int]int, len(p.Services)),
		eps:   make([][]*plan.Endpoint, len(p.Services)),
		next:  make([]time.Time, len(p.Services)),
		rng:   rand.New(rand.NewPCG(uint64(now.UnixNano()), 0x5eed)),
	}
	for _, svc := range p.Services {
		if svc.Config.OutlierDetection == nil {
			continue
		}
		idx := map[int]int{}
		var eps []*plan.Endpoint
		for _, b := range svc.Backends {
			for _, e := range b.Endpoints {
				if _, ok := idx[e.ID]; !ok {
					idx[e.ID] = len(eps)
					eps = append(eps, e)
				}
			}
		}
		cfg := outlier.FromConfig(svc.Config.OutlierDetection)
		o.det[svc.ID] = outlier.New(cfg, len(eps))
		o.index[svc.ID], o.eps[svc.ID] = idx, eps
		o.next[svc.ID] = now.Add(cfg.Interval)
	}
	return o
}

// enabled reports whether any service does outlier detection.
func (o *outliers) enabled() bool {
	for _, d := range o.det {
		if d != nil {
			return true
		}
	}
	return false
}

// observe is the proxy's Observe hook: it hands the outcome to the loop
// without blocking the request (outcomes are dropped when the loop is
// behind; detection then sees a sample, which is what it needs).
func (s *Server) observe(out proxy.Outcome) {
	// A mirrored request, one its client abandoned and one that failed
	// because of the client say nothing about the backend.
	if !out.BackendSignal() {
		return
	}
	select {
	case s.outcomes <- out:
	default:
	}
}

func (s *Server) applyOutcome(out proxy.Outcome) {
	o := s.outliers
	if out.Service == nil || out.Endpoint == nil || out.Service.ID >= len(o.det) || o.det[out.Service.ID] == nil {
		return
	}
	if s.state.Plan().Services[out.Service.ID] != out.Service {
		return // an outcome from before a reload
	}
	i, ok := o.index[out.Service.ID][out.Endpoint.ID]
	if !ok {
		return
	}
	s.applyChanges(out.Service.ID, o.det[out.Service.ID].Result(i, out.Status, s.now(), o.rng.Uint64()))
}

func (s *Server) sweepOutliers() {
	o := s.outliers
	now := s.now()
	for id, d := range o.det {
		if d == nil || now.Before(o.next[id]) {
			continue
		}
		o.next[id] = now.Add(d.Config().Interval)
		s.applyChanges(id, d.Sweep(now, o.rng.Uint64))
	}
}

func (s *Server) applyChanges(service int, changes []outlier.Change) {
	if len(changes) == 0 {
		return
	}
	changed := false
	for _, c := range changes {
		e := s.outliers.eps[service][c.Endpoint]
		if s.state.SetEjected(e.ID, c.Ejected, s.now()) {
			changed = true
			s.log.Info("outlier detection", "service", s.state.Plan().Services[service].Name, "endpoint", e.Addr, "ejected", c.Ejected, "reason", c.Reason)
			name := s.state.Plan().Services[service].Name
			kind := "returned"
			if c.Ejected {
				s.metrics.ops.ejected(name)
				kind = "ejected"
			}
			s.dash.Note(dashboard.Transition{Time: s.now(), What: e.Addr + " (" + e.Group.Zone + ")", Kind: kind, Detail: c.Reason, Service: name})
		}
	}
	if changed {
		s.publish(s.state.Plan(), nil)
	}
}
