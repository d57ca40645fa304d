package serve

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/serve/dashboard"
)

// Request metrics. Every request bumps the counters of one series (a
// frontend, backend service, backend group and zone) in one of the
// series' shards, picked by the request's Record (proxy.Record.Shard:
// records are pooled per P, so a CPU keeps using the same shards and
// their cache lines stay with it): a few uncontended atomic adds, no
// lock, no allocation, no label strings. Scrapes sum the shards.

// latencyBuckets returns the upper bounds of the latency histograms (a
// function, so the table is not package-level mutable state; the array
// is copied from read-only data).
func latencyBuckets() [14]time.Duration {
	return [14]time.Duration{
		500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
		10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
		250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
		5 * time.Second, 10 * time.Second,
	}
}

const nBuckets = 14 + 1 // the last is +Inf

// nClasses is the number of code classes: none, 1xx … 5xx (classIndex).
const nClasses = 6

// codeClass returns the code_class label of a class index.
func codeClass(i int) string {
	if i == 0 {
		return "0"
	}
	return string(rune('0'+i)) + "xx"
}

func classIndex(code int) int {
	if code < 100 || code > 599 {
		return 0
	}
	return code / 100
}

func bucketIndex(d time.Duration) int {
	for i, b := range latencyBuckets() {
		if d <= b {
			return i
		}
	}
	return nBuckets - 1
}

// histo is one shard of a latency histogram.
type histo struct {
	counts [nBuckets]atomic.Uint64
	sumNs  atomic.Uint64
}

func (h *histo) observe(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketIndex(d)].Add(1)
	h.sumNs.Add(uint64(d))
}

// shard is one shard of a series. The padding keeps neighbouring shards'
// hot words off each other's cache lines.
type shard struct {
	codes                            [nClasses]atomic.Uint64
	reqBytes, respBytes              atomic.Uint64
	retries, connectErrors, timeouts atomic.Uint64
	latency, backendLatency          histo
	// details counts the answers a backend did not send, by statusDetails
	// (detailIndex), for the dashboard.
	details [nDetails]atomic.Uint64
	_       [64]byte
}

// series is the request counters of one label set.
type series struct {
	frontend, service, group, zone string
	shards                         []shard
}

func (s *series) observe(rec *proxy.Record) {
	sh := &s.shards[rec.Shard&uint32(len(s.shards)-1)]
	sh.codes[classIndex(rec.Status)].Add(1)
	if rec.RequestSize > 0 {
		sh.reqBytes.Add(uint64(rec.RequestSize))
	}
	if rec.ResponseSize > 0 {
		sh.respBytes.Add(uint64(rec.ResponseSize))
	}
	if rec.Attempts > 1 {
		sh.retries.Add(uint64(rec.Attempts - 1))
	}
	if rec.ConnectErrors > 0 {
		sh.connectErrors.Add(uint64(rec.ConnectErrors))
	}
	if rec.Timeouts > 0 {
		sh.timeouts.Add(uint64(rec.Timeouts))
	}
	if rec.Details != sdSentByBackend {
		sh.details[detailIndex(rec.Details)].Add(1)
	}
	sh.latency.observe(rec.Latency)
	if rec.Attempts > 0 {
		sh.backendLatency.observe(rec.BackendLatency)
	}
}

// seriesTotals is a series summed over its shards.
type seriesTotals struct {
	codes                            [nClasses]uint64
	reqBytes, respBytes              uint64
	retries, connectErrors, timeouts uint64
	latency, backendLatency          [nBuckets]uint64
	latencySum, backendLatencySum    uint64
	details                          [nDetails]uint64
}

func (s *series) sum() seriesTotals {
	var t seriesTotals
	for i := range s.shards {
		sh := &s.shards[i]
		for c := range sh.codes {
			t.codes[c] += sh.codes[c].Load()
		}
		t.reqBytes += sh.reqBytes.Load()
		t.respBytes += sh.respBytes.Load()
		t.retries += sh.retries.Load()
		t.connectErrors += sh.connectErrors.Load()
		t.timeouts += sh.timeouts.Load()
		for b := range nBuckets {
			t.latency[b] += sh.latency.counts[b].Load()
			t.backendLatency[b] += sh.backendLatency.counts[b].Load()
		}
		for d := range sh.details {
			t.details[d] += sh.details[d].Load()
		}
		t.latencySum += sh.latency.sumNs.Load()
		t.backendLatencySum += sh.backendLatency.sumNs.Load()
	}
	return t
}

// seriesKey identifies a series.
type seriesKey struct{ frontend, service, group, zone string }

// requestMetrics holds every series ever used (series outlive the
// configs that made them, so counters never go back on reload; their
// number is bounded by the label sets the configs name).
type requestMetrics struct {
	shards int

	mu     sync.Mutex // guards series
	series map[seriesKey]*series
	order  []*series // in creation order, for stable scrapes
}

func newRequestMetrics() *requestMetrics {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < 16 {
		n <<= 1
	}
	return &requestMetrics{shards: n, series: map[seriesKey]*series{}}
}

// get returns the series of a label set, making it when new.
func (m *requestMetrics) get(k seriesKey) *series {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.series[k]
	if s == nil {
		s = &series{frontend: k.frontend, service: k.service, group: k.group, zone: k.zone, shards: make([]shard, m.shards)}
		m.series[k] = s
		m.order = append(m.order, s)
	}
	return s
}

// all returns the series (a copy of the list).
func (m *requestMetrics) all() []*series {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*series(nil), m.order...)
}

// backendCounts returns the requests each series with a backend counted
// (every status class).
func (m *requestMetrics) backendCounts() map[seriesKey]uint64 {
	out := map[seriesKey]uint64{}
	for _, s := range m.all() {
		if s.group == "" {
			continue
		}
		var n uint64
		for i := range s.shards {
			for c := range s.shards[i].codes {
				n += s.shards[i].codes[c].Load()
			}
		}
		out[seriesKey{s.frontend, s.service, s.group, s.zone}] = n
	}
	return out
}

// frontendSeries resolves a frontend's records to series through
// compiled IDs: by service ID and backend index, with the service
// pointer to check that a record is from this table's plan.
type frontendSeries struct {
	m        *requestMetrics
	frontend string
	none     *series // requests that reached no backend service
	services []serviceSeries
}

type serviceSeries struct {
	svc      *plan.Service
	picked   *series   // requests to the service that reached no backend
	backends []*series // by backend index
}

func (m *requestMetrics) forFrontend(p *plan.Plan, frontend string) *frontendSeries {
	fs := &frontendSeries{m: m, frontend: frontend, none: m.get(seriesKey{frontend: frontend})}
	fs.services = make([]serviceSeries, len(p.Services))
	for i, svc := range p.Services {
		ss := serviceSeries{svc: svc, picked: m.get(seriesKey{frontend: frontend, service: svc.Name})}
		for _, b := range svc.Backends {
			ss.backends = append(ss.backends, m.get(seriesKey{frontend, svc.Name, b.Group.Name, b.Group.Zone}))
		}
		fs.services[i] = ss
	}
	return fs
}

// of returns the series of a record.
func (fs *frontendSeries) of(rec *proxy.Record) *series {
	svc := rec.Service
	if svc == nil {
		return fs.none
	}
	if svc.ID >= len(fs.services) || fs.services[svc.ID].svc != svc {
		// A record of another plan (a reload between the snapshot and
		// this handler's replacement): look it up by name.
		k := seriesKey{frontend: fs.frontend, service: svc.Name}
		if rec.Backend != nil {
			k.group, k.zone = rec.Backend.Group.Name, rec.Backend.Group.Zone
		}
		return fs.m.get(k)
	}
	ss := &fs.services[svc.ID]
	if b := rec.Backend; b != nil && b.Index < len(ss.backends) {
		return ss.backends[b.Index]
	}
	return ss.picked
}

// collect emits the request metrics.
func (m *requestMetrics) collect(ch chan<- prometheus.Metric, d *obsDescs) {
	for _, s := range m.all() {
		t := s.sum()
		l := []string{s.frontend, s.service, s.group, s.zone}
		total := uint64(0)
		for c, n := range t.codes {
			total += n
			if n == 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(d.descRequests, prometheus.CounterValue, float64(n), append(l[:4:4], codeClass(c))...)
		}
		if total == 0 {
			continue
		}
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
		}
		counter(d.descReqBytes, t.reqBytes)
		counter(d.descRespBytes, t.respBytes)
		counter(d.descRetries, t.retries)
		counter(d.descConnErrors, t.connectErrors)
		counter(d.descTimeouts, t.timeouts)
		ch <- histogram(d.descLatency, &t.latency, t.latencySum, l)
		ch <- histogram(d.descBackendLat, &t.backendLatency, t.backendLatencySum, l)
	}
}

func histogram(d *prometheus.Desc, counts *[nBuckets]uint64, sumNs uint64, labels []string) prometheus.Metric {
	bounds := latencyBuckets()
	buckets := make(map[float64]uint64, len(bounds))
	cum := uint64(0)
	for i, ub := range bounds {
		cum += counts[i]
		buckets[ub.Seconds()] = cum
	}
	cum += counts[nBuckets-1]
	return prometheus.MustNewConstHistogram(d, cum, float64(sumNs)/1e9, buckets, labels...)
}

// requestCounts sums the request metrics per backend service of the
// current plan: by backend index, the requests each backend answered,
// their 5xx, their latency histogram and the answers it did not send by
// statusDetails; the 5xx the balancer answered itself for the service
// (no backend picked or reached) and their statusDetails; and the
// requests in flight to each backend now. Series are summed over
// frontends; they only grow, so differences of samples are rates.
func (s *Server) requestCounts() map[string]dashboard.BackendCounts {
	snap := s.Snapshot()
	if snap == nil || snap.Plan == nil {
		return nil
	}
	type key struct{ service, group string }
	index := map[key]int{}
	out := map[string]dashboard.BackendCounts{}
	for _, svc := range snap.Plan.Services {
		out[svc.Name] = newBackendCounts(svc, snap.View.Inflight())
		for _, b := range svc.Backends {
			index[key{svc.Name, b.Group.Name}] = b.Index
		}
	}
	for _, se := range s.reqMetrics.all() {
		c, ok := out[se.service]
		if !ok {
			continue
		}
		t := se.sum()
		i := len(c.ByBackend) // no backend
		if se.group != "" {
			if i, ok = index[key{se.service, se.group}]; !ok {
				continue
			}
		}
		addDetails(c.Details[i], &t.details)
		if se.group == "" {
			c.LBErrors += t.codes[5]
			out[se.service] = c
			continue
		}
		for class := range t.codes {
			c.ByBackend[i] += t.codes[class]
		}
		c.ErrByBackend[i] += t.codes[5]
		for b := range t.latency {
			c.Latency[i][b] += t.latency[b]
		}
	}
	return out
}

// newBackendCounts returns zero counts for svc's backends, with their
// requests in flight now.
func newBackendCounts(svc *plan.Service, in *engine.Inflight) dashboard.BackendCounts {
	n := len(svc.Backends)
	c := dashboard.BackendCounts{ByBackend: make([]uint64, n), ErrByBackend: make([]uint64, n),
		Latency: make([][]uint64, n), Details: make([]map[string]uint64, n+1), InFlight: make([]int64, n)}
	for i, b := range svc.Backends {
		c.Latency[i] = make([]uint64, nBuckets)
		for _, e := range b.Endpoints {
			c.InFlight[i] += in.Load(e)
		}
	}
	for i := range c.Details {
		c.Details[i] = map[string]uint64{}
	}
	return c
}

// addDetails adds the non-zero detail counts to m by token.
func addDetails(m map[string]uint64, counts *[nDetails]uint64) {
	tokens := detailTokens()
	for i, n := range counts {
		if n > 0 {
			m[tokens[i]] += n
		}
	}
}
