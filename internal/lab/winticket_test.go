package lab

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestWinticket runs seed 003's scenario with real backends and a real
// server, from the config imported from seed 003's gcloud exports
// (serverless NEGs mapped to HTTPS loopback backends, no health checks):
// Osaka fails requests, is ejected after about consecutiveGatewayFailure
// failures, Tokyo takes everything, Osaka returns after the ejection time,
// and a manual switch under load fails no request.
func TestWinticket(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time lab scenario")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const base = 3 * time.Second
	var progress strings.Builder
	rep, err := RunWinticket(ctx, WinticketOptions{Requests: 100, Rate: 200, BaseEjectionTime: base, Progress: &progress})
	if err != nil {
		t.Fatalf("RunWinticket: %v\n%s", err, progress.String())
	}
	t.Logf("\n%s", progress.String())
	const osaka, tokyo = "asia-northeast2", "asia-northeast1"
	if rep.Settings.Primary != osaka || rep.Settings.Fallback != tokyo {
		t.Fatalf("regions: primary %s, fallback %s; want %s, %s", rep.Settings.Primary, rep.Settings.Fallback, osaka, tokyo)
	}
	if len(rep.Phases) != 7 {
		t.Fatalf("%d phases, want 7", len(rep.Phases))
	}
	all := func(p Phase, region string) {
		t.Helper()
		if p.Errors() != 0 || p.Regions[region] != p.Requests || p.Requests == 0 {
			t.Errorf("phase %d %s: %d requests, regions %v, status %v; want all 200 from %s", p.Step, p.Name, p.Requests, p.Regions, p.Status, region)
		}
	}
	all(rep.Phases[0], osaka)
	// 5 failures trigger the ejection; requests already on their way to
	// Osaka when it lands (up to the client's concurrency, more on a busy
	// machine) fail too, so the upper bound is generous.
	if n := rep.FailuresUntilEjection; n < 5 || n > 25 {
		t.Errorf("Osaka answered %d 503s before its ejection; want 5 (consecutiveGatewayFailure) plus those in flight", n)
	}
	// Osaka's serverless group is one HTTPS endpoint (its base URL), never
	// health-checked: ejected, not unhealthy.
	if h := strings.Join(rep.Phases[1].Health, "\n"); !strings.Contains(h, "bs-default neg-osaka 127.6.1.1:18443 (asia-northeast2) ") || !strings.Contains(h, "EJECTED") || strings.Contains(h, "UNHEALTHY") {
		t.Errorf("health after phase 2 does not show Osaka's serverless group ejected (and not unhealthy):\n%s", h)
	}
	all(rep.Phases[2], tokyo)
	if p := rep.Phases[3]; p.Regions[osaka] != 0 || p.Errors() != 0 {
		t.Errorf("phase 3 while still ejected: regions %v, status %v; want no Osaka and no errors", p.Regions, p.Status)
	}
	// Ejection ends at the first sweep at or after base; serve sweeps on
	// a 1 s tick, so allow two outlier intervals of lateness, and more
	// for a busy machine: the lower bound is the one that matters.
	if got, lo, hi := rep.ReturnedAfter, (base - 200*time.Millisecond).Seconds(), (base + 2*DefaultOutlierInterval + 10*time.Second).Seconds(); got < lo || got > hi {
		t.Errorf("Osaka returned %.2fs after its ejection; want %.1fs..%.1fs", got, lo, hi)
	}
	all(rep.Phases[4], osaka)
	if p := rep.Phases[5]; p.Errors() != 0 || rep.ReloadErrors != 0 || p.Regions[osaka]+p.Regions[tokyo] != p.Requests {
		t.Errorf("phase 4 across the reload: regions %v, status %v; want no errors", p.Regions, p.Status)
	}
	all(rep.Phases[6], tokyo)

	var out strings.Builder
	if err := WriteWinticketTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"baseEjectionTime 3m0s -> 3s", "outlierDetection.interval 10s -> 1s", " EJECTED", "after the switch"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}
