package lab

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestFleetLab: `spillway lab --fleet`, reduced: three instances on an
// embedded etcd reproduce the with-policy steady and us-south1-a-down
// rows through their three frontends; under load the control-loop
// leader, then a prober, are killed (their leases expire); a new leader
// is elected and the targets re-owned within a few lease TTLs; no
// request fails on the survivors and none reaches the down zone; and
// the a,b-down row, on the survivor, still matches the seed.
func TestFleetLab(t *testing.T) {
	before := runtime.NumGoroutine()
	var progress bytes.Buffer
	start := time.Now()
	rep, err := RunFleet(context.Background(), FleetOptions{
		Options: Options{
			Configs:   []Config{seedConfig(t, "with-policy")},
			Scenarios: [][]string{nil, {"us-south1-a"}},
			Requests:  400,
			Progress:  &progress,
		},
		Hold: time.Second,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	var out bytes.Buffer
	if err := WriteFleetTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("in %s:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if len(rep.Instances) != 3 {
		t.Errorf("instances %v, want 3", rep.Instances)
	}
	for i := range rep.Scenarios {
		r := &rep.Scenarios[i]
		if v := Verdict(r); v != "match" {
			t.Errorf("%s / %s: %s (status %v, zones %v)", r.Config, ScenarioName(r.Down), v, r.Status, r.Zones)
		}
	}
	k := rep.Kill
	if k == nil {
		t.Fatal("no kill timeline")
	}
	if k.NewLeader == "" || k.NewLeader == k.Leader || k.Prober == k.Leader || k.Prober == k.NewLeader {
		t.Errorf("leader %s, new leader %s, prober %s: want three different instances", k.Leader, k.NewLeader, k.Prober)
	}
	// A lease expires within its TTL (2 s) of the last keepalive; the
	// watches and the re-election follow within a few hundred ms.
	for name, d := range map[string]time.Duration{"new leader": k.NewLeaderAfter, "leader's targets re-owned": k.LeaderReowned, "prober's targets re-owned": k.ProberReowned} {
		if d <= 0 || d > 4*DefaultFleetLeaseTTL {
			t.Errorf("%s after %s, want within %s", name, d, 4*DefaultFleetLeaseTTL)
		}
	}
	// A kill is a crash: the killed instances' leases expire (kept alive
	// every TTL/3, so 2/3 TTL to TTL after the cut, plus etcd's 500 ms
	// expiry sweep), they are not revoked (milliseconds).
	for name, d := range map[string]time.Duration{"leader": k.LeaderExpired, "prober": k.ProberExpired} {
		if d < DefaultFleetLeaseTTL/2 || d > DefaultFleetLeaseTTL+2*time.Second {
			t.Errorf("the killed %s's registration left etcd after %s, want its lease to expire (%s to %s)", name, d, DefaultFleetLeaseTTL/2, DefaultFleetLeaseTTL+2*time.Second)
		}
	}
	for _, w := range k.Windows {
		if w.Requests == 0 && w.Duration > 200*time.Millisecond {
			t.Errorf("window %q: no requests in %s", w.Name, w.Duration)
		}
		if w.Failed-w.OnKilled != 0 || w.FromDown != 0 {
			t.Errorf("window %q: %d failed on the survivors, %d from the down zone, want 0", w.Name, w.Failed-w.OnKilled, w.FromDown)
		}
		if strings.HasPrefix(w.Name, "after convergence") && w.Failed != 0 {
			t.Errorf("window %q: %d failed after convergence, want 0", w.Name, w.Failed)
		}
	}
	if k.After == nil || Verdict(k.After) != "match" {
		t.Errorf("the a,b-down row on the survivor: %+v", k.After)
	}
	waitGoroutines(t, before)
}

// TestFleetLabKillTogether: the leader and a prober killed at the same
// moment: the targets both probed lose both probers at once; the
// survivor keeps their health until it probes them itself, elects
// itself, and no request fails or reaches the down zone.
func TestFleetLabKillTogether(t *testing.T) {
	var progress bytes.Buffer
	rep, err := RunFleet(context.Background(), FleetOptions{
		Options:  Options{Configs: []Config{seedConfig(t, "with-policy")}, Requests: 300, Progress: &progress},
		NoTable:  true,
		Together: true,
		Hold:     time.Second,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	var out bytes.Buffer
	if err := WriteFleetTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	k := rep.Kill
	if k == nil || !k.Together || len(k.Windows) != 3 || k.Orphaned == 0 {
		t.Fatalf("kill timeline %+v: want both killed together, three windows, targets that lost both probers", k)
	}
	if len(k.Survivors) != 1 || k.NewLeader != k.Survivors[0] {
		t.Errorf("survivors %v, new leader %s: want the one survivor leading", k.Survivors, k.NewLeader)
	}
	for _, w := range k.Windows {
		if w.Failed-w.OnKilled != 0 || w.FromDown != 0 {
			t.Errorf("window %q: %d failed on the survivor, %d from the down zone, want 0", w.Name, w.Failed-w.OnKilled, w.FromDown)
		}
	}
	if k.After == nil || Verdict(k.After) != "match" {
		t.Errorf("the a,b-down row on the survivor: %+v", k.After)
	}
}
