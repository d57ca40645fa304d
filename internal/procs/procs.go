// Package procs sizes the Go scheduler (GOMAXPROCS) to the load.
//
// Go runs goroutines on GOMAXPROCS processors ("Ps"), by default one per
// CPU. A proxy's goroutines spend most of their time waiting on sockets,
// and when there are more Ps than work, every goroutine that becomes
// runnable wakes an idle P's thread, which looks for work, finds little and
// sleeps again: futex calls and context switches on every request. On the
// project's 2-vCPU bench box that costs about a fifth of the proxy's CPU
// per request at the load of docs/performance.md (see there).
//
// Auto mode (the default of `spillway serve --procs`) keeps GOMAXPROCS at
// what the load needs: it samples the process's CPU time and doubles the
// Ps when the ones it has are nearly saturated, and takes one away when
// the load has fitted in one fewer for a while. An idle or lightly loaded
// proxy runs on one P; a busy one grows to every CPU within a second or
// two. The ceiling is Go's default GOMAXPROCS when serve starts (the CPUs
// available, or the container's CPU limit); setting GOMAXPROCS turns off
// Go's own tracking of later limit changes, so those need a restart.
package procs

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Policy decides the number of Ps. The zero value is not usable; start
// from Default.
type Policy struct {
	// Max is the most Ps (Go's default GOMAXPROCS: the CPUs available).
	Max int
	// Interval is the sampling period.
	Interval time.Duration
	// Up: the Ps double when the CPU used over a period exceeds Up × Ps.
	Up float64
	// Down: one P goes when the CPU used stays under Down × (Ps − 1) for
	// DownAfter consecutive periods.
	Down      float64
	DownAfter int
}

// Default returns the auto-mode policy for max Ps.
func Default(max int) Policy {
	return Policy{Max: max, Interval: 250 * time.Millisecond, Up: 0.8, Down: 0.6, DownAfter: 8}
}

// Next returns the Ps for the next period, given the current p, the CPUs
// used over the last period (CPU time / wall time) and the number of
// consecutive low periods before it; it also returns the new count.
func (pol Policy) Next(p int, used float64, low int) (next, lowNext int) {
	switch {
	case used > pol.Up*float64(p) && p < pol.Max:
		return min(pol.Max, 2*p), 0
	case p > 1 && used < pol.Down*float64(p-1):
		if low+1 >= pol.DownAfter {
			return p - 1, 0
		}
		return p, low + 1
	}
	return p, 0
}

// Run applies the policy until ctx ends, starting at start Ps. cpu returns
// the process's CPU time so far (user + system), now the time, and set
// applies a number of Ps; changed, when not nil, hears of every change.
func (pol Policy) Run(ctx context.Context, start int, now func() time.Time, cpu func() time.Duration, set func(int), changed func(from, to int, used float64)) {
	p := max(1, min(start, pol.Max))
	set(p)
	t := time.NewTicker(pol.Interval)
	defer t.Stop()
	lastT, lastC := now(), cpu()
	low := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		nt, nc := now(), cpu()
		wall := nt.Sub(lastT)
		if wall <= 0 {
			continue
		}
		used := float64(nc-lastC) / float64(wall)
		lastT, lastC = nt, nc
		var next int
		next, low = pol.Next(p, used, low)
		if next != p {
			set(next)
			if changed != nil {
				changed(p, next, used)
			}
			p = next
		}
	}
}

// reserved counts the Ps held for threads that serve outside the
// scheduler's view (Reserve). It is the package's one piece of mutable
// state, on purpose: it adjusts GOMAXPROCS, which is the process's, and
// every setter of GOMAXPROCS in the process (Set, Reserve) must see the
// same count.
var (
	reservedMu sync.Mutex
	reserved   int
)

// Reserve adds n Ps on top of whatever GOMAXPROCS is (set by the policy,
// by --procs or by Go's default) until release is called. It is for OS
// threads locked to goroutines that spend most of their time blocked in
// system calls, such as the DNS server's UDP threads: while such a thread
// is blocked its P stays with it, and when no P is left idle the runtime
// takes it away and wakes another thread to look for work, over and over
// (sysmon's retake), which costs more than the answers. A P of their own
// each keeps one idle for the rest of the process.
func Reserve(n int) (release func()) {
	reservedMu.Lock()
	reserved += n
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + n)
	reservedMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			reservedMu.Lock()
			reserved -= n
			runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)-n))
			reservedMu.Unlock()
		})
	}
}

// Set makes GOMAXPROCS n plus the reserved Ps.
func Set(n int) {
	reservedMu.Lock()
	runtime.GOMAXPROCS(n + reserved)
	reservedMu.Unlock()
}
