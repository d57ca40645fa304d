package dashboard

import (
	"math"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve/report"
)

func bounds() []time.Duration {
	return []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond}
}

func TestQuantile(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    []uint64
		q    float64
		want float64
	}{
		{"empty", []uint64{0, 0, 0, 0}, 0.5, -1},
		{"wrong length", []uint64{1, 1}, 0.5, -1},
		{"middle of the first bucket", []uint64{10, 0, 0, 0}, 0.5, 0.5},
		{"interpolated in the second", []uint64{50, 50, 0, 0}, 0.75, 5.5},
		{"p99 in the third", []uint64{90, 0, 10, 0}, 0.99, 91},
		{"unbounded bucket is the last bound", []uint64{0, 0, 0, 5}, 0.5, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantile(tc.h, bounds(), tc.q); math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("quantile(%v, %v) = %v, want %v", tc.h, tc.q, got, tc.want)
			}
		})
	}
}

// samplesOf returns two samples 10 s apart.
func samplesOf(a, b dashSample) []dashSample {
	a.at, b.at = time.Unix(0, 0), time.Unix(10, 0)
	return []dashSample{a, b}
}

func TestSplitView(t *testing.T) {
	split := func(south, east uint64) []FrontendCounts {
		return []FrontendCounts{{Name: "fe", Splits: []SplitCounts{{Source: "urlMaps[um]", Services: []WeightedCount{
			{Service: "bs-south", Weight: 70, Requests: south}, {Service: "bs-east", Weight: 30, Requests: east}}}}}}
	}
	for _, tc := range []struct {
		name     string
		a, b     []FrontendCounts
		measured bool
		want     [2]float64
	}{
		{"70/30 measured", split(100, 50), split(800, 350), true, [2]float64{0.7, 0.3}},
		{"no requests in the window", split(100, 50), split(100, 50), false, [2]float64{0, 0}},
		{"counters renumbered by a reload", split(900, 400), split(10, 5), false, [2]float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := frontendViews(samplesOf(dashSample{frontends: tc.a}, dashSample{frontends: tc.b}))
			if len(fs) != 1 || len(fs[0].Splits) != 1 {
				t.Fatalf("frontendViews = %+v, want one frontend with one split", fs)
			}
			sp := fs[0].Splits[0]
			if sp.Services[0].Configured != 0.7 || sp.Services[1].Configured != 0.3 {
				t.Errorf("configured %v/%v, want 0.7/0.3", sp.Services[0].Configured, sp.Services[1].Configured)
			}
			got := [2]float64{sp.Services[0].Measured, sp.Services[1].Measured}
			if sp.Measured != tc.measured || math.Abs(got[0]-tc.want[0]) > 1e-9 || math.Abs(got[1]-tc.want[1]) > 1e-9 {
				t.Errorf("measured %v %v, want %v %v", sp.Measured, got, tc.measured, tc.want)
			}
		})
	}
}

func TestEndpointAndBackendWindow(t *testing.T) {
	ep := func(n, errs uint64) map[endpointKey]EndpointCounts {
		return map[endpointKey]EndpointCounts{{"ig-a", "10.0.0.1:80"}: {Group: "ig-a", Address: "10.0.0.1:80", Requests: n, Errors: errs, InFlight: 2}}
	}
	counts := func(n, errs uint64, lat []uint64, timeouts uint64) map[string]BackendCounts {
		return map[string]BackendCounts{"web": {ByBackend: []uint64{n}, ErrByBackend: []uint64{errs}, Latency: [][]uint64{lat},
			Details:  []map[string]uint64{{"backend_timeout": timeouts}, {"failed_to_pick_backend": timeouts / 2}},
			InFlight: []int64{3}}}
	}
	s := samplesOf(dashSample{endpoints: ep(100, 0), counts: counts(100, 0, []uint64{10, 0, 0, 0}, 2)},
		dashSample{endpoints: ep(600, 50), counts: counts(600, 50, []uint64{510, 0, 0, 0}, 8)})
	eps := endpointViews(s)
	if len(eps) != 1 || eps[0].Rate != 50 || eps[0].ErrorRate != 0.1 || eps[0].InFlight != 2 {
		t.Fatalf("endpointViews = %+v, want rate 50, error rate 0.1, 2 in flight", eps)
	}
	ds := DashService{Name: "web", Backends: []DashBackend{{Group: "ig-a"}}}
	lb := backendWindow(&ds, s, bounds())
	b := ds.Backends[0]
	if b.Rate != 50 || b.Errors5xx != 50 || b.InFlight != 3 || b.Details["backend_timeout"] != 6 || math.Abs(b.P50-0.5) > 1e-9 {
		t.Errorf("backend window = %+v, want rate 50, 50 5xx, 3 in flight, 6 backend_timeout, p50 0.5 ms", b)
	}
	if lb["failed_to_pick_backend"] != 3 {
		t.Errorf("balancer's details = %v, want failed_to_pick_backend 3", lb)
	}
}

// TestSampleThinsHistory: samples older than the window keep the rate
// counts only; the window's keep everything.
func TestSampleThinsHistory(t *testing.T) {
	now := time.Unix(0, 0)
	d := New(Source{
		Health: func() *report.Health { return health(false, "HEALTHY") },
		Now:    func() time.Time { now = now.Add(time.Second); return now },
		Counts: func() map[string]BackendCounts {
			return map[string]BackendCounts{"web": {ByBackend: []uint64{1}, ErrByBackend: []uint64{0}, Latency: [][]uint64{{1, 0, 0, 0}}}}
		},
		Endpoints: func() []EndpointCounts { return []EndpointCounts{{Group: "ig-a", Address: "10.0.0.1:80"}} },
	})
	for range 30 {
		d.sample()
	}
	for i, s := range d.samples {
		inWindow := i >= len(d.samples)-dashShareWindow-1
		full := s.endpoints != nil && s.counts["web"].Latency != nil
		if full != inWindow || len(s.counts["web"].ByBackend) != 1 {
			t.Errorf("sample %d of %d: endpoints and latency kept %v, want %v (rate counts %v)", i, len(d.samples), full, inWindow, s.counts["web"].ByBackend)
		}
	}
}
