package lab

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/sim"
)

// TestTimelineSimAndLabAgree: us-south1 dies under load (its listeners
// close: connections refused), and the requests the engine still sends
// there until the health checks see it fail, each retried once by the
// proxy. simulate --fail-as refused predicts how many; the lab, with
// real probes and the real proxy, counts them.
//
// The count is a draw: it depends on where each endpoint's probes fall
// in their interval when the zone dies (random in both). So the simulator
// gives a range over 200 seeds, and the lab's one run must fall inside
// its p1-p99, widened by the tolerance: 20% of the range's ends plus 10
// requests, for the lab's wall-clock slack (probe timers and the health
// view's publication a few milliseconds late, the client's pacing).
func TestTimelineSimAndLabAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	const (
		rate     = 200.0
		duration = 3 * time.Second
		step     = 250 * time.Millisecond
		failAt   = time.Second
		interval = 500 * time.Millisecond
	)
	c := seedConfig(t, "with-policy")
	lo, med, hi := simErrorRange(t, c, rate, duration, step, failAt, interval)

	tl, err := RunTimeline(context.Background(), TimelineOptions{
		Config: &c, Rate: rate, Duration: duration, Step: step, Interval: interval,
		Events: []TimelineEvent{{At: failAt, Down: true, Targets: []string{"us-south1"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := tl.Failed(0, duration)
	before := tl.Failed(0, failAt)
	t.Logf("lab: %d requests, %v; failed in the detection window: %d; simulate over 200 seeds: p1 %d, median %d, p99 %d", tl.Requests, tl.Status, got, lo, med, hi)
	if before != 0 {
		t.Errorf("%d requests failed before the failure", before)
	}
	if n := tl.Status["error"]; n != 0 {
		t.Errorf("%d requests got no HTTP answer", n)
	}
	min, max := int(float64(lo)*0.8)-10, int(float64(hi)*1.2)+10
	if got < min || got > max {
		t.Errorf("lab: %d failed requests; simulate predicts %d-%d (tolerance: %d-%d)", got, lo, hi, min, max)
	}
}

// simErrorRange runs simulate's side of the timeline on the lab's own
// rewrite of c (probe interval and timeout) over 200 seeds and returns
// the p1, median and p99 of the failed requests.
func simErrorRange(t *testing.T, c Config, rate float64, duration, step, failAt, interval time.Duration) (lo, med, hi int) {
	t.Helper()
	set, cleanup, err := newSettings(interval)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	p, _, err := compile(c, set)
	if err != nil {
		t.Fatal(err)
	}
	var counts []int
	for seed := uint64(1); seed <= 200; seed++ {
		r, err := sim.Run(p, sim.Options{
			Rate: rate, Duration: duration, Step: step, Seed: seed, ClientIP: "127.0.0.1", FailAs: sim.FailRefused,
			Events: []sim.Event{{At: failAt, Down: true, Targets: []string{"us-south1"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, r.Requests-r.Status["200"])
	}
	slices.Sort(counts)
	return counts[1], counts[100], counts[197]
}
