package fleet_test

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/paralleltest"
)

// TestMain runs 4 parallel tests at once (unless -parallel says
// otherwise): each has an etcd of its own and spends its time waiting
// for leases, checks and probe intervals (9 s of CPU in 131 s when they
// ran one at a time).
//
// Six tests are not parallel, so go test runs them first, alone:
// TestFleetSizing, TestFleetRateServers, TestFleetRateLimits,
// TestShardedProbing and TestDemandShareSeed001 count etcd writes,
// requests or probes over time,
// and TestControlLoopServers drains a zone on probe results. Their health
// checks time out after 150 ms; under CPU load, with 8 fleet tests at
// once, such probes failed, flipped verdicts and added writes to counts.
func TestMain(m *testing.M) { paralleltest.Main(m, 4) }
