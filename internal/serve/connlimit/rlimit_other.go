//go:build !unix

package connlimit

// fileLimit returns 0: the platform has no file-descriptor limit to read.
func fileLimit() int { return 0 }
