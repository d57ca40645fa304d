package dashboard

import (
	"slices"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve/report"
)

func health(drained bool, states ...string) *report.Health {
	b := report.Backend{Group: "ig-a", Zone: "us-east1-b", Drained: drained}
	for i, s := range states {
		b.Endpoints = append(b.Endpoints, report.Endpoint{IPAddress: "10.0.0." + string(rune('1'+i)), HealthState: s})
	}
	return &report.Health{Services: []report.Service{{Name: "web", Backends: []report.Backend{b}}}}
}

func TestDiffHealth(t *testing.T) {
	now := time.Unix(100, 0)
	for _, tc := range []struct {
		name string
		a, b *report.Health
		want []string // kind what
	}{
		{"nothing changed", health(false, "HEALTHY"), health(false, "HEALTHY"), nil},
		{"first probe healthy says nothing", health(false, "UNKNOWN"), health(false, "HEALTHY"), nil},
		{"first probe unhealthy", health(false, "UNKNOWN"), health(false, "UNHEALTHY"), []string{"unhealthy 10.0.0.1 (us-east1-b)"}},
		{"endpoint down", health(false, "HEALTHY", "HEALTHY"), health(false, "HEALTHY", "UNHEALTHY"), []string{"unhealthy 10.0.0.2 (us-east1-b)"}},
		{"endpoint up", health(false, "UNHEALTHY"), health(false, "HEALTHY"), []string{"healthy 10.0.0.1 (us-east1-b)"}},
		{"drained", health(false, "UNHEALTHY"), health(true, "UNHEALTHY"), []string{"drained us-east1-b (web)"}},
		{"undrained", health(true, "UNHEALTHY"), health(false, "UNHEALTHY"), []string{"undrained us-east1-b (web)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, tr := range diffHealth(tc.a, tc.b, now) {
				if !tr.Time.Equal(now) {
					t.Errorf("transition at %v, want %v", tr.Time, now)
				}
				got = append(got, tr.Kind+" "+tr.What)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("diffHealth = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRatesAndShares(t *testing.T) {
	t0 := time.Unix(0, 0)
	samples := []dashSample{
		{at: t0, counts: map[string]BackendCounts{"web": {ByBackend: []uint64{0, 0}, ErrByBackend: []uint64{0, 0}}}},
		{at: t0.Add(time.Second), counts: map[string]BackendCounts{"web": {ByBackend: []uint64{70, 30}, ErrByBackend: []uint64{0, 10}, LBErrors: 0}}},
		{at: t0.Add(2 * time.Second), counts: map[string]BackendCounts{"web": {ByBackend: []uint64{140, 60}, ErrByBackend: []uint64{0, 10}, LBErrors: 100}}},
	}
	rate, errRate := rates(samples, "web")
	if !slices.Equal(rate, []float64{100, 200}) || !slices.Equal(errRate, []float64{0.1, 0.5}) {
		t.Fatalf("rates = %v, %v; want [100 200], [0.1 0.5]", rate, errRate)
	}
	shares, ok := measuredShares(samples, "web", 2)
	if !ok || !slices.Equal(shares, []float64{0.7, 0.3}) {
		t.Fatalf("measuredShares = %v, %v; want [0.7 0.3]", shares, ok)
	}
}
