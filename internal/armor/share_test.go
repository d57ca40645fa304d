package armor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// fleetSets compiles the same rules for n instances, each reading the
// others' exports from its own RemoteSource.
func fleetSets(t testing.TB, n int, rules string) ([]*Set, []*RemoteSource) {
	t.Helper()
	y := `
backendServices:
- {name: bs, securityPolicy: sp}
securityPolicies:
- name: sp
  rules:
` + rules + "  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}\n"
	cfg, err := config.Parse([]byte(y), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sets []*Set
	var srcs []*RemoteSource
	for range n {
		s, err := Compile(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		src := &RemoteSource{}
		s.UseRemote(src)
		sets, srcs = append(sets, s), append(srcs, src)
	}
	return sets, srcs
}

// exchange gives every instance the others' exports at now, through
// JSON as etcd carries them.
func exchange(t *testing.T, sets []*Set, srcs []*RemoteSource, now time.Time) {
	t.Helper()
	shares := make([]RateShare, len(sets))
	for i, s := range sets {
		b, err := json.Marshal(s.Export(now, len(sets)))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &shares[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sets {
		var others []RateShare
		for j := range shares {
			if j != i {
				others = append(others, shares[j])
			}
		}
		srcs[i].Store(MergeShares(others, false))
	}
}

const throttleRule = `  - priority: 10
    action: throttle
    match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}
    rateLimitOptions: {rateLimitThreshold: {count: 100, intervalSec: 10}, conformAction: allow, exceedAction: deny(429), enforceOnKey: IP}
`

// A key sending at twice the threshold, split across two instances that
// exchange their counts every second, gets the threshold's rate
// fleet-wide; without the exchange each instance would let its half
// through whole.
func TestFleetThrottle(t *testing.T) {
	for _, tc := range []struct {
		name      string
		share     bool
		want, tol float64
	}{
		{"shared", true, 10, 0.15},
		{"per instance", false, 20, 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets, srcs := fleetSets(t, 2, throttleRule)
			t0 := time.Unix(1000, 0)
			const seconds, perSecond = 120, 20 // 2x the 10/s threshold, fleet-wide
			allowed := 0
			for i := range seconds * perSecond {
				now := t0.Add(time.Duration(i) * time.Second / perSecond)
				if tc.share && i%perSecond == 0 {
					exchange(t, sets, srcs, now)
				}
				_, p := sets[i%2].ForService(0)
				if p.Evaluate(req("GET", "/", "", "192.0.2.1"), now).Enforced.Result == "ACCEPT" {
					allowed++
				}
			}
			rate := float64(allowed) / seconds
			if rate < tc.want*(1-tc.tol) || rate > tc.want*(1+tc.tol) {
				t.Fatalf("fleet-wide %.2f requests/s allowed, want %.0f ± %.0f%%", rate, tc.want, 100*tc.tol)
			}
			t.Logf("fleet-wide %.2f requests/s allowed (threshold 10/s, sent 20/s)", rate)
		})
	}
}

// A ban one instance sets holds on the other, which has not seen the
// key; another key is not banned.
func TestFleetBan(t *testing.T) {
	sets, srcs := fleetSets(t, 2, `  - priority: 10
    action: rate_based_ban
    match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}
    rateLimitOptions:
      rateLimitThreshold: {count: 100, intervalSec: 60}
      banThreshold: {count: 5, intervalSec: 10}
      banDurationSec: 60
      conformAction: allow
      exceedAction: deny(403)
      enforceOnKey: IP
`)
	_, a := sets[0].ForService(0)
	_, b := sets[1].ForService(0)
	t0 := time.Unix(1000, 0)
	for i := range 10 {
		a.Evaluate(req("GET", "/", "", "192.0.2.1"), t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	exchange(t, sets, srcs, t0.Add(time.Second))
	if d := b.Evaluate(req("GET", "/", "", "192.0.2.1"), t0.Add(2*time.Second)); d.Enforced.RateLimitAction != "BAN_THRESHOLD_EXCEED" || d.Enforced.Status != 403 {
		t.Fatalf("the other instance, first request of the banned key: %+v", d.Enforced)
	}
	if d := b.Evaluate(req("GET", "/", "", "192.0.2.2"), t0.Add(2*time.Second)); d.Enforced.Result != "ACCEPT" {
		t.Fatalf("another key: %+v", d.Enforced)
	}
	// The ban ends by the clock, on both.
	exchange(t, sets, srcs, t0.Add(61*time.Second))
	for i, p := range []*Policy{a, b} {
		if d := p.Evaluate(req("GET", "/", "", "192.0.2.1"), t0.Add(62*time.Second)); d.Enforced.Result != "ACCEPT" {
			t.Fatalf("instance %d after the ban: %+v", i, d.Enforced)
		}
	}
	// Lost etcd: the bans still hold, the counts are dropped.
	for i := range 10 {
		a.Evaluate(req("GET", "/", "", "192.0.2.3"), t0.Add(70*time.Second+time.Duration(i)*10*time.Millisecond))
	}
	sh := sets[0].Export(t0.Add(71*time.Second), 2)
	srcs[1].Store(MergeShares([]RateShare{sh}, true))
	if d := b.Evaluate(req("GET", "/", "", "192.0.2.3"), t0.Add(71*time.Second)); d.Enforced.RateLimitAction != "BAN_THRESHOLD_EXCEED" {
		t.Fatalf("a ban with the counts dropped: %+v", d.Enforced)
	}
	if rr := MergeShares([]RateShare{sh}, true).rules[sh.Rules[0].Rule]; len(rr.counts) != 0 || len(rr.bans) != 1 {
		t.Fatalf("bans only: %d counts, %d bans", len(rr.counts), len(rr.bans))
	}
}

// Export is bounded (MaxSharedKeys per rule, keys under the floor left
// out), carries no key in the clear, and names a rule by its options.
func TestExportBounded(t *testing.T) {
	sets, _ := fleetSets(t, 1, `  - priority: 10
    action: throttle
    match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}
    rateLimitOptions: {rateLimitThreshold: {count: 100, intervalSec: 60}, conformAction: allow, exceedAction: deny(429), enforceOnKey: HTTP_PATH}
`)
	_, p := sets[0].ForService(0)
	now := time.Unix(1000, 0)
	// 1,000 paths with 10 requests each, 10 with 1: the floor for 2
	// instances is 100/20 = 5.
	for i := range 1000 {
		for range 10 {
			p.Evaluate(req("GET", fmt.Sprintf("/heavy/%d", i), "", "192.0.2.1"), now)
		}
	}
	p.Evaluate(req("GET", "/heaviest", "", "192.0.2.1"), now)
	for range 50 {
		p.Evaluate(req("GET", "/heaviest", "", "192.0.2.1"), now)
	}
	for i := range 10 {
		p.Evaluate(req("GET", fmt.Sprintf("/light/%d", i), "", "192.0.2.1"), now)
	}
	sh := sets[0].Export(now, 2)
	if len(sh.Rules) != 1 || len(sh.Rules[0].Counts) != MaxSharedKeys {
		t.Fatalf("export: %d rules, want 1 with %d counts", len(sh.Rules), MaxSharedKeys)
	}
	if c := sh.Rules[0].Counts[0]; c.Key != ShareKey("/heaviest") || c.Rate != 51 {
		t.Fatalf("heaviest first: %+v, want %s with 51", c, ShareKey("/heaviest"))
	}
	for _, c := range sh.Rules[0].Counts {
		if c.Rate < 5 {
			t.Fatalf("a key under the floor: %+v", c)
		}
	}
	b, _ := json.Marshal(sh)
	if strings.Contains(string(b), "heavy") || len(b) > 40*MaxSharedKeys {
		t.Fatalf("export of %d bytes: %.200s", len(b), b)
	}
	if got := sh.Rules[0].Rule; !strings.HasPrefix(got, "sp/10/") {
		t.Fatalf("rule ID %q", got)
	}
	other, _ := fleetSets(t, 1, strings.Replace(throttleRule, "enforceOnKey: IP", "enforceOnKey: HTTP_PATH", 1))
	if id := other[0].limiters()[0].id; id == sh.Rules[0].Rule {
		t.Fatalf("rules with other options share the ID %q", id)
	}
	if sh := sets[0].Export(now.Add(3*time.Minute), 2); len(sh.Rules) != 0 {
		t.Fatalf("two intervals later the export still has %d rules", len(sh.Rules))
	}
}

// FuzzMergeShares reads arbitrary records as another instance's (etcd
// holds what anyone with access wrote): merging never panics, and a
// rule reading the merge still decides every request with a status for
// a denial.
func FuzzMergeShares(f *testing.F) {
	f.Add(`{"rules":[{"rule":"sp/10/x","counts":[{"k":"a","r":5,"b":1e308}],"bans":[{"k":"a","u":9223372036854775807}]}]}`)
	f.Add(`{"rules":[{"rule":"","counts":[{"k":"","r":-1e308,"b":"NaN"}],"bans":[{"k":"","u":-1}]}]}`)
	f.Add(`{"rules":null}`)
	sets, srcs := fleetSets(f, 1, throttleRule)
	_, p := sets[0].ForService(0)
	id := sets[0].limiters()[0].id
	f.Fuzz(func(t *testing.T, rec string) {
		rec = strings.ReplaceAll(rec, "sp/10/x", id) // let records reach the rule
		var sh RateShare
		if json.Unmarshal([]byte(rec), &sh) != nil {
			return
		}
		for i := range sh.Rules {
			for j := range sh.Rules[i].Counts {
				sh.Rules[i].Counts[j].Key = ShareKey("192.0.2.1")
			}
		}
		srcs[0].Store(MergeShares([]RateShare{sh, sh}, false))
		d := p.Evaluate(req("GET", "/", "", "192.0.2.1"), time.Unix(1000, 0))
		if d.Enforced.Policy != "sp" || d.Enforced.Denied() && d.Enforced.Status == 0 {
			t.Fatalf("%+v", d.Enforced)
		}
	})
}
