//go:build !unix

package procs

import "time"

// ProcessCPU cannot tell the process's CPU time on this platform.
func ProcessCPU() (time.Duration, bool) { return 0, false }
