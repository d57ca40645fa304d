package serve

import (
	"encoding/hex"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/cdn"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/route"
	"github.com/spillwaylb/spillway/internal/serve/dashboard"
)

// What the dashboard reads beyond the request metrics: answers by
// statusDetails, per-endpoint request counts, the frontends' weighted
// splits and the header's facts. The per-request part is one string
// comparison and, for an answer no backend sent, one atomic add in the
// series' shard (shard.details), plus one or two atomic adds on the
// endpoint's own counter (endpointCounter): no lock, no map, no
// allocation.

// sdSentByBackend is the statusDetails of a response a backend sent
// (proxy's token, not counted by detail).
const sdSentByBackend = "response_sent_by_backend"

// detailTokens returns the statusDetails tokens counted one by one; any
// other counts as "other" (the last index).
func detailTokens() [nDetails]string {
	return [nDetails]string{
		"failed_to_pick_backend", "failed_to_connect_to_backend", "backend_timeout",
		"backend_connection_closed_before_data_sent_to_client", "backend_connection_closed_after_partial_response_sent",
		"backend_timeout_after_partial_response_sent", "client_disconnected_before_any_response",
		"client_disconnected_after_partial_response", "denied_by_security_policy", "handled_by_url_map_redirect",
		"response_from_cache", "response_from_cache_validated",
		"other",
	}
}

const nDetails = 13

// detailIndex returns the index of a statusDetails token in
// detailTokens.
func detailIndex(d string) int {
	for i, t := range detailTokens() {
		if t == d {
			return i
		}
	}
	return nDetails - 1
}

// endpointCounter is one endpoint's request counters, on a cache line of
// its own.
type endpointCounter struct {
	requests, errors atomic.Uint64
	_                [48]byte
}

// endpointCounters are the counters of one plan's endpoints, by
// endpoint ID. The counters are kept across plans by group and address,
// so a reload does not reset them.
type endpointCounters struct {
	plan *plan.Plan
	c    []*endpointCounter
}

// observe counts a request whose last attempt went to rec.Endpoint.
func (ec *endpointCounters) observe(rec *proxy.Record) {
	e := rec.Endpoint
	if e == nil || e.ID >= len(ec.c) || ec.plan.Endpoints[e.ID] != e {
		return
	}
	c := ec.c[e.ID]
	c.requests.Add(1)
	if rec.Status == 0 || rec.Status >= 500 {
		c.errors.Add(1)
	}
}

// endpointStore keeps every endpoint counter ever made (their number is
// bounded by the endpoints the configs name) and the current plan's.
type endpointStore struct {
	mu      sync.Mutex
	byKey   map[[2]string]*endpointCounter
	current atomic.Pointer[endpointCounters]
}

// forPlan returns p's endpoint counters, making them when new.
func (es *endpointStore) forPlan(p *plan.Plan) *endpointCounters {
	if cur := es.current.Load(); cur != nil && cur.plan == p {
		return cur
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if cur := es.current.Load(); cur != nil && cur.plan == p {
		return cur
	}
	if es.byKey == nil {
		es.byKey = map[[2]string]*endpointCounter{}
	}
	ec := &endpointCounters{plan: p, c: make([]*endpointCounter, len(p.Endpoints))}
	for i, e := range p.Endpoints {
		k := [2]string{e.Group.Name, e.Addr}
		if es.byKey[k] == nil {
			es.byKey[k] = new(endpointCounter)
		}
		ec.c[i] = es.byKey[k]
	}
	es.current.Store(ec)
	return ec
}

// dashEndpoints returns the current plan's endpoints' counts and
// requests in flight.
func (s *Server) dashEndpoints() []dashboard.EndpointCounts {
	snap := s.snap.Load()
	if snap == nil || snap.Plan == nil {
		return nil
	}
	ec := s.endpoints.forPlan(snap.Plan)
	in := snap.View.Inflight()
	out := make([]dashboard.EndpointCounts, 0, len(snap.Plan.Endpoints))
	for i, e := range snap.Plan.Endpoints {
		out = append(out, dashboard.EndpointCounts{Group: e.Group.Name, Zone: e.Group.Zone, Address: e.Addr, Instance: e.Instance,
			Requests: ec.c[i].requests.Load(), Errors: ec.c[i].errors.Load(), InFlight: in.Load(e)})
	}
	return out
}

// dashFrontends returns the frontends with the weighted splits of their
// URL maps and, per split service, the requests this frontend sent it
// (over every rule: a service two rules send to counts in both).
func (s *Server) dashFrontends() []dashboard.FrontendCounts {
	snap := s.snap.Load()
	if snap == nil || snap.Plan == nil {
		return nil
	}
	perService := s.reqMetrics.frontendServiceCounts()
	var out []dashboard.FrontendCounts
	for _, pf := range snap.Plan.Frontends {
		fc := dashboard.FrontendCounts{Name: pf.Name, Address: pf.Address, Protocol: pf.Protocol}
		if f := s.front.get(pf.Name); f != nil {
			fc.InFlight = f.inflight.Load()
			if f.ln != nil {
				fc.Address = f.ln.Addr().String()
			}
		}
		if pf.URLMap != nil {
			fc.URLMap = pf.URLMap.Name
			fc.Splits = splits(snap.Routes[pf.URLMap.Name], pf.Name, perService)
		}
		out = append(out, fc)
	}
	return out
}

// dashInfo returns the header's facts.
func (s *Server) dashInfo(version string) dashboard.Info {
	info := dashboard.Info{Version: version, Instance: s.opts.Instance, Started: s.started,
		ActiveConnections: s.front.conns.Active(), AcceptedConnections: s.front.conns.Accepted()}
	if sum := s.inForce.Load(); sum != nil {
		info.ConfigHash = hex.EncodeToString(sum[:6])
	}
	return info
}

// dashVersion returns the build's version, as spillway_build_info's
// version label says it.
func dashVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return buildLabels(bi)[0]
}

// dashLatencyBounds are the latency buckets' bounds as a slice.
func dashLatencyBounds() []time.Duration {
	b := latencyBuckets()
	return b[:]
}

// get returns the running frontend of that name (nil: none).
func (fs *frontends) get(name string) *frontend {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.m[name]
}

// splits returns the weighted splits (actions with two or more services)
// of a URL map's table, with the requests frontend sent each service.
func splits(t *route.Table, frontend string, perService map[[2]string]uint64) []dashboard.SplitCounts {
	if t == nil {
		return nil
	}
	var out []dashboard.SplitCounts
	for _, a := range t.Actions() {
		if len(a.Services) < 2 {
			continue
		}
		sc := dashboard.SplitCounts{Source: a.Source}
		for _, ws := range a.Services {
			sc.Services = append(sc.Services, dashboard.WeightedCount{Service: ws.Name, Weight: ws.Weight, Requests: perService[[2]string{frontend, ws.Name}]})
		}
		out = append(out, sc)
	}
	return out
}

// frontendServiceCounts returns the requests of every (frontend,
// backend service), every status class and backend together.
func (m *requestMetrics) frontendServiceCounts() map[[2]string]uint64 {
	out := map[[2]string]uint64{}
	for _, s := range m.all() {
		if s.service == "" {
			continue
		}
		var n uint64
		for i := range s.shards {
			for c := range s.shards[i].codes {
				n += s.shards[i].codes[c].Load()
			}
		}
		out[[2]string{s.frontend, s.service}] += n
	}
	return out
}

// dashCDN returns the cache's lookups per backend for the dashboard.
func (s *Server) dashCDN() map[string]dashboard.CDNCounts {
	out := map[string]dashboard.CDNCounts{}
	if s.cache.cache == nil {
		return out
	}
	s.cache.cache.EachCounters(func(backend string, k *cdn.Counters) {
		out[backend] = dashboard.CDNCounts{Hits: k.Hits.Load(), Misses: k.Misses.Load()}
	})
	return out
}
