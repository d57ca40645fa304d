package outlier

import (
	"testing"
	"time"
)

// BenchmarkResult is the hot path: a successful response.
func BenchmarkResult(b *testing.B) {
	d := New(apiDefaults, 64)
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if d.Result(i&63, 200, now, uint64(i)) != nil {
			b.Fatal("change")
		}
		i++
	}
}

// BenchmarkSweep is one interval of 64 endpoints: one request each (the
// request volume is lowered to 1 so that success-rate analysis runs),
// then the Sweep.
func BenchmarkSweep(b *testing.B) {
	cfg := apiDefaults
	cfg.SuccessRateRequestVolume = 1
	d := New(cfg, 64)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		for i := range 64 {
			d.Result(i, 200, now, 0)
		}
		now = now.Add(time.Second)
		if d.Sweep(now, nil) != nil {
			b.Fatal("change")
		}
	}
}
