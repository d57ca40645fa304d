//go:build unix

package connlimit

import "syscall"

// fileLimit returns the process's file-descriptor limit (the soft
// RLIMIT_NOFILE, which Go raises to the hard limit at start), 0 where it
// cannot be read.
func fileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}
