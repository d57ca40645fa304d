package h1_test

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/paralleltest"
)

// TestMain runs 8 parallel tests at once (unless -parallel says
// otherwise): they wait on the servers' timeouts rather than compute.
// Not parallel: TestH1GracefulShutdown counts the process's goroutines
// and TestWatchH2FollowAllocs its allocations.
func TestMain(m *testing.M) { paralleltest.Main(m, 8) }
