package probe_test

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/paralleltest"
)

// TestMain runs 8 parallel tests at once (unless -parallel says
// otherwise): TestCheckTimeout's subtests each wait out a 2 s timeout.
// Not parallel: TestRunStopsCleanly counts the process's goroutines.
func TestMain(m *testing.M) { paralleltest.Main(m, 8) }
