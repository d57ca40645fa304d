//go:build !linux

package gslb_test

import "time"

// onThreadCPU runs f; the thread's CPU time is Linux only (0 elsewhere).
func onThreadCPU(f func()) time.Duration {
	f()
	return 0
}
