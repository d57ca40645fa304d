package dashboard

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// Info is what the page's header says about the instance.
type Info struct {
	// Version is the build's version (the main module's).
	Version string `json:"version"`
	// Instance is the instance's name (--instance, the host name by
	// default).
	Instance string `json:"instance"`
	// ConfigHash is the checksum of the config in force as loaded
	// (before the runtime overlay), the one reload and the watcher
	// compare, shortened to 12 hex digits.
	ConfigHash string `json:"configHash"`
	// Started is when the server started.
	Started time.Time `json:"started"`
	// ActiveConnections are the client connections of the HTTP(S)
	// frontends open now; AcceptedConnections those accepted since the
	// start.
	ActiveConnections   int64  `json:"activeConnections"`
	AcceptedConnections uint64 `json:"acceptedConnections"`
}

// EndpointCounts are one endpoint's cumulative requests (answered with
// the endpoint as the last attempt's, every service together) and how
// many of them were errors (5xx or no response), and its requests in
// flight now.
type EndpointCounts struct {
	Group    string `json:"group"`
	Zone     string `json:"zone"`
	Address  string `json:"address"`
	Instance string `json:"instance,omitempty"`
	Requests uint64 `json:"-"`
	Errors   uint64 `json:"-"`
	InFlight int64  `json:"inFlight"`
}

type endpointKey struct{ group, addr string }

// FrontendCounts are a frontend and, for each weighted split of its URL
// map (a rule with two or more backend services), the cumulative
// requests of this frontend each of the split's services got.
type FrontendCounts struct {
	Name     string        `json:"name"`
	Address  string        `json:"address"`
	Protocol string        `json:"protocol"`
	URLMap   string        `json:"urlMap"`
	InFlight int64         `json:"inFlight"`
	Splits   []SplitCounts `json:"-"`
}

// SplitCounts is one weighted split: the rule and its services.
type SplitCounts struct {
	Source   string
	Services []WeightedCount
}

// WeightedCount is a split's service, its configured weight and the
// frontend's requests it got.
type WeightedCount struct {
	Service  string
	Weight   int
	Requests uint64
}

// DashFrontend is a frontend on the page with its URL map's weighted
// splits, configured and measured.
type DashFrontend struct {
	FrontendCounts
	Splits []DashSplit `json:"splits"`
}

// DashSplit is one weighted split: each service's configured share
// (weight over the weights' sum) and measured share of the requests the
// split's services got from this frontend over the last 10 s.
type DashSplit struct {
	Source   string         `json:"source"`
	Services []DashWeighted `json:"services"`
	Measured bool           `json:"measured"`
}

// DashWeighted is one service of a split.
type DashWeighted struct {
	Service    string  `json:"service"`
	Weight     int     `json:"weight"`
	Configured float64 `json:"configured"`
	Measured   float64 `json:"measured"`
}

// DashEndpoint is one endpoint's request rate and error rate over the
// last 10 s and its requests in flight.
type DashEndpoint struct {
	EndpointCounts
	Rate      float64 `json:"rate"`
	ErrorRate float64 `json:"errorRate"`
}

// endpointCounts reads the endpoints' counters, by group and address.
func (d *Dashboard) endpointCounts() map[endpointKey]EndpointCounts {
	if d.src.Endpoints == nil {
		return nil
	}
	out := map[endpointKey]EndpointCounts{}
	for _, e := range d.src.Endpoints() {
		out[endpointKey{e.Group, e.Address}] = e
	}
	return out
}

// window returns the first and last samples of the last dashShareWindow
// steps and the seconds between them (ok false with fewer than two).
func window(samples []dashSample) (first, last *dashSample, secs float64, ok bool) {
	if len(samples) < 2 {
		return nil, nil, 0, false
	}
	last = &samples[len(samples)-1]
	first = &samples[max(0, len(samples)-1-dashShareWindow)]
	secs = last.at.Sub(first.at).Seconds()
	return first, last, secs, secs > 0
}

// endpointViews returns every endpoint of the last sample with its rates
// over the window, by group then address.
func endpointViews(samples []dashSample) []DashEndpoint {
	first, last, secs, ok := window(samples)
	if !ok {
		return nil
	}
	var out []DashEndpoint
	for k, b := range last.endpoints {
		de := DashEndpoint{EndpointCounts: b}
		if a, ok := first.endpoints[k]; ok {
			n := delta(a.Requests, b.Requests)
			de.Rate = float64(n) / secs
			if n > 0 {
				de.ErrorRate = float64(delta(a.Errors, b.Errors)) / float64(n)
			}
		}
		out = append(out, de)
	}
	slices.SortFunc(out, func(x, y DashEndpoint) int {
		if x.Group != y.Group {
			return cmp.Compare(x.Group, y.Group)
		}
		return cmp.Compare(x.Address, y.Address)
	})
	return out
}

// frontendViews returns the frontends of the last sample with their
// splits' configured and measured shares over the window.
func frontendViews(samples []dashSample) []DashFrontend {
	if len(samples) == 0 {
		return nil
	}
	last := &samples[len(samples)-1]
	first, _, _, ok := window(samples)
	var out []DashFrontend
	for _, f := range last.frontends {
		df := DashFrontend{FrontendCounts: f}
		var before *FrontendCounts
		if ok {
			before = findFrontend(first.frontends, f.Name)
		}
		for i, sp := range f.Splits {
			df.Splits = append(df.Splits, splitView(sp, before, i))
		}
		out = append(out, df)
	}
	return out
}

func findFrontend(fs []FrontendCounts, name string) *FrontendCounts {
	for i := range fs {
		if fs[i].Name == name {
			return &fs[i]
		}
	}
	return nil
}

// splitView computes a split's shares; before is the frontend's sample
// at the window's start (nil: none), whose split i is this one's when its
// rule and services match.
func splitView(sp SplitCounts, before *FrontendCounts, i int) DashSplit {
	ds := DashSplit{Source: sp.Source}
	var weights int
	for _, w := range sp.Services {
		weights += w.Weight
	}
	var old *SplitCounts
	if before != nil && i < len(before.Splits) && before.Splits[i].Source == sp.Source && len(before.Splits[i].Services) == len(sp.Services) {
		old = &before.Splits[i]
	}
	counts := make([]float64, len(sp.Services))
	total := 0.0
	for j, w := range sp.Services {
		if old != nil {
			counts[j] = float64(delta(old.Services[j].Requests, w.Requests))
			total += counts[j]
		}
	}
	ds.Measured = total > 0
	for j, w := range sp.Services {
		dw := DashWeighted{Service: w.Service, Weight: w.Weight}
		if weights > 0 {
			dw.Configured = float64(w.Weight) / float64(weights)
		}
		if ds.Measured {
			dw.Measured = counts[j] / total
		}
		ds.Services = append(ds.Services, dw)
	}
	return ds
}

// backendWindow fills a service's backends' window statistics: request
// rate, 5xx, answers no backend sent by statusDetails, latency
// percentiles and requests in flight. It returns the details of the
// requests that reached no backend.
func backendWindow(ds *DashService, samples []dashSample, bounds []time.Duration) map[string]uint64 {
	first, last, secs, ok := window(samples)
	if !ok {
		return nil
	}
	a, b := first.counts[ds.Name], last.counts[ds.Name]
	n := len(ds.Backends)
	if len(a.ByBackend) != n || len(b.ByBackend) != n {
		return nil
	}
	for i := range ds.Backends {
		db := &ds.Backends[i]
		db.Rate = float64(delta(a.ByBackend[i], b.ByBackend[i])) / secs
		db.Errors5xx = delta(a.ErrByBackend[i], b.ErrByBackend[i])
		if i < len(b.InFlight) {
			db.InFlight = b.InFlight[i]
		}
		db.Details = detailDelta(a.Details, b.Details, i)
		if i < len(a.Latency) && i < len(b.Latency) {
			h := histDelta(a.Latency[i], b.Latency[i])
			db.P50, db.P95, db.P99 = quantile(h, bounds, 0.50), quantile(h, bounds, 0.95), quantile(h, bounds, 0.99)
		}
	}
	return detailDelta(a.Details, b.Details, n)
}

// detailDelta is b[i] − a[i] for each token, without the zeros (nil:
// none).
func detailDelta(a, b []map[string]uint64, i int) map[string]uint64 {
	if i >= len(b) {
		return nil
	}
	var out map[string]uint64
	for _, k := range slices.Sorted(maps.Keys(b[i])) {
		var old uint64
		if i < len(a) {
			old = a[i][k]
		}
		if v := delta(old, b[i][k]); v > 0 {
			if out == nil {
				out = map[string]uint64{}
			}
			out[k] = v
		}
	}
	return out
}

func histDelta(a, b []uint64) []uint64 {
	if len(a) != len(b) {
		return nil
	}
	out := make([]uint64, len(b))
	for i := range b {
		out[i] = delta(a[i], b[i])
	}
	return out
}

// quantile returns the q-quantile in milliseconds of the latencies
// counted in h (buckets bounded by bounds; the last bucket is unbounded),
// interpolated linearly inside its bucket: -1 when h is empty. A
// quantile in the unbounded bucket is reported as the last bound.
func quantile(h []uint64, bounds []time.Duration, q float64) float64 {
	var total uint64
	for _, c := range h {
		total += c
	}
	if total == 0 || len(h) != len(bounds)+1 {
		return -1
	}
	rank := q * float64(total)
	cum := 0.0
	for i, c := range h {
		if c == 0 || cum+float64(c) < rank {
			cum += float64(c)
			continue
		}
		if i == len(bounds) {
			break
		}
		lo := 0.0
		if i > 0 {
			lo = ms(bounds[i-1])
		}
		return lo + (ms(bounds[i])-lo)*(rank-cum)/float64(c)
	}
	return ms(bounds[len(bounds)-1])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
