package serve

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwaylb/spillway/internal/probe"
)

// Operational metrics beside the request metrics: the access log's
// counters, outlier ejections, health probes and the traffic split as
// each frontend's region sees it. None of them is on the request path.

// opsCounters are the loop-side counters (probes, ejections). Probes and
// ejections are rare next to requests: a mutex and maps will do.
type opsCounters struct {
	mu        sync.Mutex
	ejections map[string]uint64 // by service
	probes    map[probeKey]*probeSeries
}

type probeKey struct{ target, typ string }

type probeSeries struct {
	ok, failed uint64
	latency    [nBuckets]uint64
	sumNs      uint64
}

func (o *opsCounters) ejected(service string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ejections == nil {
		o.ejections = map[string]uint64{}
	}
	o.ejections[service]++
}

func (o *opsCounters) probed(r *probe.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.probes == nil {
		o.probes = map[probeKey]*probeSeries{}
	}
	k := probeKey{r.Target.Addr, r.Target.Spec.Type}
	ps := o.probes[k]
	if ps == nil {
		ps = &probeSeries{}
		o.probes[k] = ps
	}
	if r.OK {
		ps.ok++
	} else {
		ps.failed++
	}
	d := r.Latency
	if d < 0 {
		d = 0
	}
	ps.latency[bucketIndex(d)]++
	ps.sumNs += uint64(d)
}

// collectOps emits the operational metrics.
func (m *metrics) collectOps(ch chan<- prometheus.Metric) {
	d := m.d
	c := m.s.alog.Counts()
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(d.descLogLines, c.Written)
	counter(d.descLogDropped, c.Dropped)
	counter(d.descLogErrors, c.WriteErrors)

	o := &m.ops
	o.mu.Lock()
	for svc, n := range o.ejections {
		ch <- prometheus.MustNewConstMetric(d.descEjections, prometheus.CounterValue, float64(n), svc)
	}
	for k, ps := range o.probes {
		ch <- prometheus.MustNewConstMetric(d.descProbes, prometheus.CounterValue, float64(ps.ok), k.target, k.typ, "success")
		ch <- prometheus.MustNewConstMetric(d.descProbes, prometheus.CounterValue, float64(ps.failed), k.target, k.typ, "failure")
		ch <- histogram(d.descProbeTime, &ps.latency, ps.sumNs, []string{k.target, k.typ})
	}
	o.mu.Unlock()

	if r := m.s.Health(); r != nil {
		for _, svc := range r.Services {
			for _, f := range svc.Frontends {
				for _, b := range f.Backends {
					ch <- prometheus.MustNewConstMetric(d.descShareRegion, prometheus.GaugeValue, b.Share, f.Frontend, f.ClientRegion, svc.Name, b.Group, b.Zone)
				}
			}
		}
	}
}
