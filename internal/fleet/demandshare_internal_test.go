package fleet

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/spillwaylb/spillway/internal/control"
)

func TestMoved(t *testing.T) {
	r := func(rps float64) control.DemandRates { return control.DemandRates{"bs": {"eu": rps}} }
	for _, c := range []struct {
		name string
		a, b control.DemandRates
		want bool
	}{
		{"same", r(1000), r(1000), false},
		{"up 9% (90 rps, noise floor 97)", r(1000), r(1090), false},
		{"up 10% (100 rps, floor 99)", r(1000), r(1100), true},
		{"down 10%", r(1000), r(900), true},
		{"up 5.1% at 10k rps (floor 307)", r(10000), r(10510), true},
		{"up 5% at 10k rps", r(10000), r(10500), false},
		{"up 40% at 50 rps (floor 25)", r(50), r(70), false},
		{"up 60% at 50 rps", r(50), r(80), true},
		{"to zero", r(100), r(0), true},
		{"absent", r(100), control.DemandRates{}, true},
		{"a trickle to zero (4 rps, floor 6)", r(4), r(0), false},
		{"from absent, a trickle", control.DemandRates{}, r(4), false},
		{"from absent, 10 rps (floor 9.5)", control.DemandRates{}, r(10), true},
		{"another region appears with 1 rps", r(100), control.DemandRates{"bs": {"eu": 100, "": 1}}, false},
		{"another region appears with 20 rps", r(100), control.DemandRates{"bs": {"eu": 100, "": 20}}, true},
		{"both empty", nil, control.DemandRates{}, false},
	} {
		if got := moved(c.a, c.b, DefaultDemandChange, 1); got != c.want {
			t.Errorf("%s: moved(%v, %v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
	}
}

// TestDemandWritesUnderNoise measures how often an instance writes its
// record when its offered rate is steady but its arrivals are random
// (Poisson): a window's count n has a standard deviation of √n, which
// the publishing rule allows for, so a steady load is written rarely at
// any rate, sparse pairs included. The numbers are in docs/fleet.md.
func TestDemandWritesUnderNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const windows = 10000
	for _, c := range []struct {
		perWindow float64 // mean requests per window
		max       float64 // writes per window at most
	}{{1, 0.08}, {5, 0.08}, {50, 0.08}, {500, 0.08}, {1500, 0.08}, {5000, 0.03}, {50000, 0.001}} {
		var written control.DemandRates
		writes := 0
		for range windows {
			now := control.DemandRates{"bs": {"eu": poisson(rng, c.perWindow)}}
			if written == nil || moved(written, now, DefaultDemandChange, 1) {
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

// poisson draws from Poisson(λ): Knuth's method for small λ, the normal
// approximation above 30.
func poisson(rng *rand.Rand, λ float64) float64 {
	if λ > 30 {
		return math.Max(0, math.Round(λ+math.Sqrt(λ)*rng.NormFloat64()))
	}
	l, k, p := math.Exp(-λ), 0.0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
