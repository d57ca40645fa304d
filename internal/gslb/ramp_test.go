package gslb

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestRampSteps: 10/25/50/100 % at 0, 80, 160 and 240 s of a 4-minute
// ramp, on a virtual clock.
func TestRampSteps(t *testing.T) {
	r := NewRamp(240*time.Second, []int{10, 25, 50, 100})
	if w := r.Weight(t0); w != 1 || r.Ramping(t0) {
		t.Fatalf("idle ramp: weight %v ramping %v, want 1 false", w, r.Ramping(t0))
	}
	r.Start(t0)
	for _, tc := range []struct {
		at      time.Duration
		weight  float64
		ramping bool
	}{
		{0, 0.10, true}, {79 * time.Second, 0.10, true},
		{80 * time.Second, 0.25, true}, {159 * time.Second, 0.25, true},
		{160 * time.Second, 0.50, true}, {239 * time.Second, 0.50, true},
		{240 * time.Second, 1, false}, {time.Hour, 1, false},
	} {
		now := t0.Add(tc.at)
		if w := r.Weight(now); w != tc.weight || r.Ramping(now) != tc.ramping {
			t.Errorf("at %v: weight %v ramping %v, want %v %v", tc.at, w, r.Ramping(now), tc.weight, tc.ramping)
		}
	}
	if got := r.NextChange(t0.Add(100 * time.Second)); !got.Equal(t0.Add(160 * time.Second)) {
		t.Errorf("next change %v, want +160s", got.Sub(t0))
	}
	if got := r.End(); !got.Equal(t0.Add(240 * time.Second)) {
		t.Errorf("end %v, want +240s", got.Sub(t0))
	}
}

// TestRampRollback: an error spike during the ramp drops the member to 0;
// a low error rate or one after the ramp does nothing.
func TestRampRollback(t *testing.T) {
	r := NewRamp(240*time.Second, []int{10, 25, 50, 100})
	r.Start(t0)
	if r.Observe(0.1, t0.Add(90*time.Second)) {
		t.Fatal("10% errors rolled back (limit 25%)")
	}
	if !r.Observe(0.6, t0.Add(100*time.Second)) {
		t.Fatal("60% errors did not roll back")
	}
	if w := r.Weight(t0.Add(200 * time.Second)); w != 0 || !r.RolledBack() {
		t.Fatalf("after rollback: weight %v, want 0", w)
	}
	r.Start(t0.Add(300 * time.Second))
	if w := r.Weight(t0.Add(300 * time.Second)); w != 0.10 {
		t.Fatalf("restarted ramp weight %v, want 0.10", w)
	}
	done := NewRamp(240*time.Second, []int{10, 25, 50, 100})
	done.Start(t0)
	if done.Observe(1, t0.Add(300*time.Second)) {
		t.Fatal("an error after the ramp rolled it back; that is the health check's job")
	}
	instant := NewRamp(0, []int{10, 25, 50, 100})
	instant.Start(t0)
	if w := instant.Weight(t0); w != 1 {
		t.Fatalf("rampSec 0: weight %v, want 1", w)
	}
}
