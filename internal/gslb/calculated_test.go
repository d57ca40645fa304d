package gslb

import (
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/health"
)

// A calculated check is up while at least MinHealthy of its children
// are, each child with its own hysteresis; as a SHALLOW check it decides
// up or down, as a DEEP check it halves the weight.
func TestLayeredCalculated(t *testing.T) {
	th := health.Thresholds{Healthy: 1, Unhealthy: 1}
	group := func(layer Layer, g, minHealthy, children int) []LayerCheck {
		var out []LayerCheck
		for range children {
			out = append(out, LayerCheck{Layer: layer, Thresholds: th, Group: g, MinHealthy: minHealthy})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		checks  []LayerCheck
		failing []int // checks failing (every other passes)
		healthy bool
		factor  float64
	}{
		{"2 of 3, all pass", group(Shallow, 1, 2, 3), nil, true, 1},
		{"2 of 3, one fails", group(Shallow, 1, 2, 3), []int{1}, true, 1},
		{"2 of 3, two fail", group(Shallow, 1, 2, 3), []int{0, 2}, false, 1},
		{"3 of 3, one fails", group(Shallow, 1, 3, 3), []int{2}, false, 1},
		{"1 of 3, two fail", group(Shallow, 1, 1, 3), []int{0, 1}, true, 1},
		{"1 of 3, all fail", group(Shallow, 1, 1, 3), []int{0, 1, 2}, false, 1},
		{"deep 2 of 2, one fails", group(Deep, 1, 2, 2), []int{0}, true, 0.5},
		{"synthetic 1 of 2, one fails", group(Synthetic, 1, 1, 2), []int{1}, true, 1},
		{"two groups, second down", append(group(Shallow, 1, 1, 2), group(Shallow, 2, 2, 2)...), []int{0, 3}, false, 1},
		{"two groups, both up", append(group(Shallow, 1, 1, 2), group(Shallow, 2, 2, 2)...), []int{0}, true, 1},
		{"with a plain check failing", append(group(Shallow, 1, 1, 2), LayerCheck{Layer: Shallow, Thresholds: th}), []int{2}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1e6, 0)
			l := NewLayered(tc.checks)
			for i := range tc.checks {
				l.Observe(i, true, "", now)
			}
			if !l.Healthy() || l.Factor() != 1 {
				t.Fatalf("every child passing: healthy %v factor %v", l.Healthy(), l.Factor())
			}
			now = now.Add(5 * time.Second)
			for _, i := range tc.failing {
				l.Observe(i, false, "", now)
			}
			if l.Healthy() != tc.healthy || l.Factor() != tc.factor {
				t.Fatalf("failing %v: healthy %v factor %v, want %v %v", tc.failing, l.Healthy(), l.Factor(), tc.healthy, tc.factor)
			}
			// Recovery: every child passes again.
			for _, i := range tc.failing {
				l.Observe(i, true, "", now.Add(time.Second))
			}
			if !l.Healthy() || l.Factor() != 1 {
				t.Fatalf("recovered: healthy %v factor %v", l.Healthy(), l.Factor())
			}
		})
	}
}

// Each child keeps its hysteresis: a 2-of-3 check with 3-failure
// children goes down on the third failure in a row of the second child.
func TestLayeredCalculatedHysteresis(t *testing.T) {
	th := health.Thresholds{Healthy: 2, Unhealthy: 3}
	var checks []LayerCheck
	for range 3 {
		checks = append(checks, LayerCheck{Layer: Shallow, Thresholds: th, Group: 1, MinHealthy: 2})
	}
	l := NewLayered(checks)
	now := time.Unix(1e6, 0)
	for i := range 3 {
		l.Observe(i, true, "", now)
	}
	for k := range 3 {
		now = now.Add(time.Second)
		l.Observe(0, false, "", now)
		l.Observe(1, false, "", now)
		if want := k < 2; l.Healthy() != want {
			t.Fatalf("after %d failures of two children: healthy %v, want %v", k+1, l.Healthy(), want)
		}
	}
	l.Observe(0, true, "", now)
	if l.Healthy() {
		t.Fatal("one success brought a child back under a healthy threshold of 2")
	}
	l.Observe(0, true, "", now)
	if !l.Healthy() {
		t.Fatal("two successes did not bring the calculated check back")
	}
}
