package probe

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

func TestNextSlot(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const iv = 10 * time.Second
	tests := []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{name: "probe finished early", now: t0.Add(time.Second), want: t0.Add(iv)},
		{name: "just before next slot", now: t0.Add(iv - 1), want: t0.Add(iv)},
		{name: "exactly on next slot skips it", now: t0.Add(iv), want: t0.Add(2 * iv)},
		{name: "overran one slot", now: t0.Add(iv + time.Second), want: t0.Add(2 * iv)},
		{name: "overran several slots", now: t0.Add(3*iv + time.Second), want: t0.Add(4 * iv)},
	}
	for _, tc := range tests {
		if got := nextSlot(t0, iv, tc.now); !got.Equal(tc.want) {
			t.Errorf("nextSlot(t0, %v, t0+%v) = t0+%v, want t0+%v (%s)",
				iv, tc.now.Sub(t0), got.Sub(t0), tc.want.Sub(t0), tc.name)
		}
	}
}

func TestJitter(t *testing.T) {
	const iv = 50 * time.Millisecond
	a, b := rand.New(rand.NewPCG(7, 8)), rand.New(rand.NewPCG(7, 8))
	distinct := map[time.Duration]bool{}
	for range 1000 {
		d := jitter(a, iv)
		if d < 0 || d >= iv {
			t.Fatalf("jitter(%v) = %v, want in [0, %v)", iv, d, iv)
		}
		if d2 := jitter(b, iv); d2 != d {
			t.Fatalf("jitter with equal seeds = %v and %v, want equal", d, d2)
		}
		distinct[d] = true
	}
	if len(distinct) < 900 {
		t.Errorf("jitter produced %d distinct delays in 1000 draws, want spread", len(distinct))
	}
}

// TestUpdateKeepsSchedule checks that a target present before and after
// Update keeps its goroutine (and so its phase), by identity.
func TestUpdateKeepsSchedule(t *testing.T) {
	// A one-hour interval: the jittered first probe is (almost surely)
	// never reached, so no network I/O happens.
	spec := Spec{Type: TypeTCP, Interval: time.Hour}
	a := Target{Addr: "127.0.0.1:9", Spec: spec}
	b := Target{Addr: "127.0.0.2:9", Spec: spec}
	c := Target{Addr: "127.0.0.3:9", Spec: spec}
	p := New(func(Result) {}, WithRand(rand.NewPCG(1, 1)))
	p.Update([]Target{a, b})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	workers := func() map[Target]*worker {
		p.mu.Lock()
		defer p.mu.Unlock()
		out := make(map[Target]*worker, len(p.workers))
		for k, v := range p.workers {
			out[k] = v
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(workers()) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not start the workers")
		}
		time.Sleep(time.Millisecond)
	}
	before := workers()

	p.Update([]Target{c, a, a})
	after := workers()
	if len(after) != 2 || after[a] != before[a] || after[c] == nil || after[b] != nil {
		t.Errorf("after Update([c a a]): workers a kept=%v, b present=%v, c present=%v, count=%d; want a kept, b gone, c new, 2",
			after[a] == before[a], after[b] != nil, after[c] != nil, len(after))
	}
	select {
	case <-before[b].done:
	default:
		t.Errorf("worker for removed target b still running after Update returned")
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	for tg, w := range after {
		select {
		case <-w.done:
		default:
			t.Errorf("worker for %s still running after Run returned", tg.Addr)
		}
	}
}
