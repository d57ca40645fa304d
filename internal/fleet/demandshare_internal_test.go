package fleet

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/spillwaylb/spillway/internal/serve"
)

func TestMoved(t *testing.T) {
	r := func(rps float64) serve.DemandRates { return serve.DemandRates{"bs": {"eu": rps}} }
	for _, c := range []struct {
		name string
		a, b serve.DemandRates
		want bool
	}{
		{"same", r(100), r(100), false},
		{"up 5%", r(100), r(105), false},
		{"up 5.1%", r(100), r(105.1), true},
		{"down 5%", r(100), r(95), false},
		{"down 5.1%", r(100), r(94.9), true},
		{"to zero", r(100), r(0), true},
		{"absent", r(100), serve.DemandRates{}, true},
		{"from absent", serve.DemandRates{}, r(0.1), true},
		{"another region appears", r(100), serve.DemandRates{"bs": {"eu": 100, "": 1}}, true},
		{"both empty", nil, serve.DemandRates{}, false},
	} {
		if got := moved(c.a, c.b, DefaultDemandChange); got != c.want {
			t.Errorf("%s: moved(%v, %v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
	}
}

// TestDemandWritesUnderNoise measures how often an instance writes its
// record when its offered rate is steady but its arrivals are random
// (Poisson): a window's count n has a standard deviation of √n, so a
// steady rate moves past 5% of the published one by chance unless n is
// large. The numbers are in docs/fleet.md.
func TestDemandWritesUnderNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const windows = 10000
	for _, c := range []struct {
		perWindow float64 // mean requests per window
		max       float64 // writes per window at most
	}{{50, 0.9}, {500, 0.5}, {1500, 0.25}, {5000, 0.03}, {50000, 0.001}} {
		var written serve.DemandRates
		writes := 0
		for range windows {
			// Poisson(λ) by its normal approximation (λ ≥ 50).
			n := math.Max(0, math.Round(c.perWindow+math.Sqrt(c.perWindow)*rng.NormFloat64()))
			now := serve.DemandRates{"bs": {"eu": n}}
			if written == nil || moved(written, now, DefaultDemandChange) {
				written = now
				writes++
			}
		}
		frac := float64(writes) / windows
		t.Logf("%6.0f requests per window (σ %.1f%%): a write in %.1f%% of windows", c.perWindow, 100/math.Sqrt(c.perWindow), 100*frac)
		if frac > c.max {
			t.Errorf("%v requests per window: writes in %.3f of windows, want at most %v", c.perWindow, frac, c.max)
		}
	}
}
