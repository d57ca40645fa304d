package health

import (
	"testing"
	"time"
)

func TestThresholds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := Thresholds{Healthy: 2, Unhealthy: 3}
	for _, tc := range []struct {
		name    string
		results string // probe results in order: + ok, - fail
		healthy bool
	}{
		{"unknown is healthy", "", true},
		{"first failure decides at once", "-", false},
		{"first success decides at once", "+", true},
		{"two failures are not enough", "+--", true},
		{"three failures turn it unhealthy", "+---", false},
		{"a success resets the failure run", "+--+--", true},
		{"one success is not enough to recover", "---+", false},
		{"two successes recover", "-++", true},
		{"a failure resets the success run", "-+-+", false},
	} {
		var s State
		for i, r := range tc.results {
			s.Observe(r == '+', "", t0.Add(time.Duration(i)*time.Second), th)
		}
		if s.Healthy() != tc.healthy {
			t.Errorf("%s (%q): healthy=%v, want %v", tc.name, tc.results, s.Healthy(), tc.healthy)
		}
	}
}

func TestObserveReportsChanges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := Thresholds{Healthy: 2, Unhealthy: 2}
	var s State
	steps := []struct {
		ok      bool
		changed bool
	}{{true, true}, {true, false}, {false, false}, {false, true}, {true, false}, {true, true}}
	for i, st := range steps {
		at := t0.Add(time.Duration(i) * time.Second)
		if got := s.Observe(st.ok, "d", at, th); got != st.changed {
			t.Fatalf("step %d: changed=%v, want %v", i, got, st.changed)
		}
		if st.changed && !s.Since.Equal(at) {
			t.Fatalf("step %d: Since=%v, want %v", i, s.Since, at)
		}
	}
}
