//go:build linux

package gslb_test

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// onThreadCPU runs f locked to its OS thread and returns the CPU time
// (user and system) the thread spent in it: on a machine shared with
// other work, a benchmark's wall time per op counts the time other
// processes held the CPU, its thread's CPU time does not.
func onThreadCPU(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadCPU()
	f()
	return threadCPU() - before
}

// threadCPU returns the calling thread's CPU time so far (0 if unknown).
func threadCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
