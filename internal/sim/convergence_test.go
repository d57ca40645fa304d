package sim_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/sim"
)

// A region that dies takes requests with it until the health checks have
// seen it: interval × unhealthyThreshold (5 s × 2 in the seed). Requests
// the engine sends to a dead endpoint before that fail, are retried once
// (a connect failure is retriable under the default policy) and the retry,
// picked from the same undetected view, mostly meets another dead endpoint.
func TestConvergenceWindowErrors(t *testing.T) {
	p := load(t, filepath.Join("..", "..", "examples", "seed-70-30", "with-policy.yaml"))
	hc := p.HealthChecks[0]
	window := hc.Interval * time.Duration(hc.UnhealthyThreshold)
	const failAt = 30 * time.Second
	for _, tc := range []struct {
		mode      sim.FailMode
		status    string // the answer of a request whose retry failed too
		errors    bool
		retriedOK bool
	}{
		{sim.FailRefused, "503", true, true},
		// Each attempt waits out the 5 s dial timeout: a connect failure,
		// retried, answered 503 when the retry fails too.
		{sim.FailBlackhole, "503", true, true},
		{sim.FailHealthOnly, "", false, false},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			r, err := sim.Run(p, sim.Options{
				Rate: 100, Duration: 60 * time.Second, Step: time.Second, Seed: 5, FailAs: tc.mode,
				Events: []sim.Event{{At: failAt, Down: true, Targets: []string{"us-south1"}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			var inside, outside, retried int
			for _, b := range r.Timeline {
				n := b.Requests - b.Status["200"]
				start := time.Duration(b.Start)
				if start >= failAt && start < failAt+window+hc.Timeout {
					inside += n
				} else {
					outside += n
				}
				retried += b.Retried
			}
			if outside != 0 {
				t.Errorf("%d failed requests outside the detection window", outside)
			}
			if retried != r.Retries {
				t.Errorf("timeline retries %d, result %d", retried, r.Retries)
			}
			if !tc.errors {
				if inside != 0 || r.Retries != 0 {
					t.Errorf("health-only failure: %d errors, %d retries, want none (requests are still served)", inside, r.Retries)
				}
				return
			}
			// 70 rps go to us-south1; every endpoint is detected 5-10 s
			// after the failure (10-15 s when probes time out): several
			// hundred errors, not 0 as before, and at most 70 rps × the
			// longest detection time.
			if hi := 70 * (window + hc.Timeout).Seconds(); inside < 200 || float64(inside) > hi {
				t.Errorf("%d failed requests in the detection window, want 200-%.0f", inside, hi)
			}
			if got := r.Status[tc.status]; got != inside {
				t.Errorf("HTTP %s: %d, want all %d failures (%v)", tc.status, got, inside, r.Status)
			}
			if tc.retriedOK != (r.Retries > 0) {
				t.Errorf("%d retries (want retries: %v)", r.Retries, tc.retriedOK)
			}
		})
	}
}

// The simulator's dial timeout is the proxy's.
func TestDialTimeoutIsTheProxys(t *testing.T) {
	if sim.DialTimeout != h1.BackendDialTimeout {
		t.Errorf("sim waits %s for a blackholed connection, the proxy %s", sim.DialTimeout, h1.BackendDialTimeout)
	}
}
