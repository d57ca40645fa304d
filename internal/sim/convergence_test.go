package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/plan"
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

// A blackholed endpoint's attempt ends at whichever of the dial timeout
// (5 s), the per-try timeout and the request timeout comes first, and the
// proxy's rules decide what follows: a connect failure is retried while
// time is left, a per-try timeout only under 5xx or gateway-error
// conditions (answered 504 otherwise), and a request out of time is not
// retried.
func TestBlackholeTimeouts(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "..", "examples", "seed-70-30", "with-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, old, new string
		codes          []string // the answers of failed requests
		retried        bool
	}{
		{"dial timeout, retried", "", "", []string{"503"}, true},
		{"request timeout 2 s", "  loadBalancingScheme: EXTERNAL_MANAGED\n", "  loadBalancingScheme: EXTERNAL_MANAGED\n  timeoutSec: 2\n", []string{"503"}, false},
		{"per-try 1 s, connect-failure only", "  defaultRouteAction:\n", "  defaultRouteAction:\n    retryPolicy: {numRetries: 1, perTryTimeout: {seconds: 1}, retryConditions: [connect-failure]}\n", []string{"504"}, false},
		{"per-try 1 s, gateway-error", "  defaultRouteAction:\n", "  defaultRouteAction:\n    retryPolicy: {numRetries: 1, perTryTimeout: {seconds: 1}, retryConditions: [gateway-error]}\n", []string{"504"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(strings.ReplaceAll(string(base), tc.old, tc.new)), "with-policy.yaml")
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Compile(c)
			if err != nil {
				t.Fatal(err)
			}
			r, err := sim.Run(p, sim.Options{
				Rate: 50, Duration: 40 * time.Second, Step: 5 * time.Second, Seed: 2, FailAs: sim.FailBlackhole,
				Events: []sim.Event{{At: 10 * time.Second, Down: true, Targets: []string{"us-south1"}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			failed := r.Requests - r.Status["200"]
			counted := 0
			for _, code := range tc.codes {
				counted += r.Status[code]
			}
			if failed == 0 || counted != failed {
				t.Errorf("%d failed requests, %v; want all of them %v", failed, r.Status, tc.codes)
			}
			if tc.retried != (r.Retries > 0) {
				t.Errorf("%d retries, want retries: %v", r.Retries, tc.retried)
			}
		})
	}
}
