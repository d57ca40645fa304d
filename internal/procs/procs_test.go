package procs

import (
	"context"
	"runtime"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	pol := Default(8)
	for _, tc := range []struct {
		name          string
		p, low        int
		used          float64
		next, lowNext int
	}{
		{"idle stays at one", 1, 0, 0.01, 1, 0},
		{"one P busy but not saturated", 1, 0, 0.75, 1, 0},
		{"one P saturated doubles", 1, 0, 0.85, 2, 0},
		{"two saturated double", 2, 0, 1.7, 4, 0},
		{"capped at Max", 8, 0, 7.9, 8, 0},
		{"doubling capped at Max", 6, 0, 5.5, 8, 0},
		{"in the band: keep", 2, 3, 0.7, 2, 0},
		{"low period counted", 2, 0, 0.5, 2, 1},
		{"low long enough: one fewer", 2, 7, 0.5, 1, 0},
		{"low streak broken", 4, 5, 2.0, 4, 0},
		{"never below one", 1, 100, 0, 1, 0},
	} {
		next, low := pol.Next(tc.p, tc.used, tc.low)
		if next != tc.next || low != tc.lowNext {
			t.Errorf("%s: Next(%d, %.2f, %d) = %d, %d; want %d, %d", tc.name, tc.p, tc.used, tc.low, next, low, tc.next, tc.lowNext)
		}
	}
}

// Run on a virtual clock: a burst of load grows the Ps by doubling, and
// they come back down one at a time once it is over.
func TestRunFollowsLoad(t *testing.T) {
	pol := Default(4)
	pol.Interval = time.Millisecond
	var (
		clock time.Time
		cpu   time.Duration
		load  = []float64{0.1, 0.1, 0.9, 1.9, 3.9, 3.9, 0.2} // CPUs used per period, then 0.2 forever
		step  int
		got   []int
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := func() time.Time { return clock }
	usage := func() time.Duration {
		// Each call after the first advances one period at the period's load.
		if step > 0 {
			l := load[min(step-1, len(load)-1)]
			clock = clock.Add(100 * time.Millisecond)
			cpu += time.Duration(l * float64(100*time.Millisecond))
		}
		step++
		if step > 40 {
			cancel()
		}
		return cpu
	}
	set := func(p int) { got = append(got, p) }
	pol.Run(ctx, 1, now, usage, set, nil)
	want := []int{1, 2, 4, 3, 2, 1}
	if len(got) != len(want) {
		t.Fatalf("Ps over time %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Ps over time %v, want %v", got, want)
		}
	}
}

func TestProcessCPU(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no rusage")
	}
	before, ok := ProcessCPU()
	if !ok {
		t.Fatal("ProcessCPU not available")
	}
	x := 0
	for i := range 50_000_000 { // burn some CPU
		x ^= i
	}
	after, _ := ProcessCPU()
	if after <= before {
		t.Fatalf("CPU time did not advance: %v then %v (x=%d)", before, after, x)
	}
}

func TestReserveAddsToSet(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	Set(2)
	release := Reserve(3)
	if got := runtime.GOMAXPROCS(0); got != 5 {
		t.Fatalf("after Reserve(3): GOMAXPROCS %d, want 5", got)
	}
	Set(1)
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("Set(1) with 3 reserved: GOMAXPROCS %d, want 4", got)
	}
	release()
	release() // once only
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after release: GOMAXPROCS %d, want 1", got)
	}
	Set(2)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("Set(2) with none reserved: GOMAXPROCS %d, want 2", got)
	}
}
