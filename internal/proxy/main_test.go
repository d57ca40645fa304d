package proxy_test

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/paralleltest"
)

// TestMain runs 8 parallel tests at once (unless -parallel says
// otherwise): most of this package's time is spent waiting for timeouts
// (header, idle, exchange), not computing.
//
// Not parallel: the tests that count the process's goroutines
// (TestSlowReadersDoNotOutliveTheTimeout, TestH2HeaderTimeoutNoLeak) and
// the differential harnesses (FuzzDiff*, TestDiff*), which tell a
// frontend's silence from its answer by quiet periods.
func TestMain(m *testing.M) { paralleltest.Main(m, 8) }
