package cli

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/sim"
)

const dnsExample = "../../examples/dns/gslb.yaml"

// weightedYAML has a 70/20/10 WEIGHTED name and a FAILOVER name whose
// members are probed every 5 s (DNS thresholds: 3 down, 2 up).
const weightedYAML = `
healthChecks:
- {name: hc, type: HTTP, checkIntervalSec: 5, timeoutSec: 2, httpHealthCheck: {port: 8080, requestPath: /healthz}}
frontends:
- {name: dns, address: "127.0.0.1:5300", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: w
    pool:
      members:
      - {name: a, address: 192.0.2.1, weight: 70, healthCheck: hc}
      - {name: b, address: 192.0.2.2, weight: 20, healthCheck: hc}
      - {name: c, address: 192.0.2.3, weight: 10}
  - name: api
    policy: FAILOVER
    failback: {rampSec: 240, steps: [10, 25, 50, 100]}
    pool:
      members:
      - {name: primary, address: 198.51.100.20, priority: 0, healthCheck: hc}
      - {name: dr, address: 203.0.113.20, priority: 1, healthCheck: hc}
`

func compilePlan(t *testing.T, yaml string) *plan.Plan {
	t.Helper()
	c, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("config:\n%v", err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func share(n, total int) float64 { return 100 * float64(n) / float64(total) }

func TestSimulateDNSWeighted(t *testing.T) {
	p := compilePlan(t, weightedYAML)
	r, err := simulateDNS(p, sim.DNSOptions{Name: "w.gslb.example", Queries: 20000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Queries != 20000 || r.Rcodes["NOERROR"] != 20000 || r.TTLs["30"] != 20000 {
		t.Fatalf("queries %d rcodes %v ttls %v, want 20000 NOERROR answers at TTL 30", r.Queries, r.Rcodes, r.TTLs)
	}
	for m, want := range map[string]float64{"a": 70, "b": 20, "c": 10} {
		got := share(r.Members[m], r.Queries)
		t.Logf("%s: %.2f%% (want %.0f%%)", m, got, want)
		if math.Abs(got-want) > 1 {
			t.Errorf("%s: %.2f%% of answers, want %.0f%% ± 1", m, got, want)
		}
	}
	if r.Addresses["192.0.2.1"] != r.Members["a"] {
		t.Errorf("addresses %v disagree with members %v", r.Addresses, r.Members)
	}
	// b down: a and c split 70:10.
	r, err = simulateDNS(p, sim.DNSOptions{Name: "w.gslb.example", Queries: 20000, Seed: 1, Down: []string{"192.0.2.2"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Members["b"] != 0 || math.Abs(share(r.Members["a"], r.Queries)-87.5) > 1 {
		t.Errorf("b down: members %v, want b 0 and a 87.5%%", r.Members)
	}
}

func TestSimulateDNSFailover(t *testing.T) {
	p := compilePlan(t, weightedYAML)
	r, err := simulateDNS(p, sim.DNSOptions{Name: "api.gslb.example.", Queries: 20000, Seed: 7, Down: []string{"primary"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Members["dr"] != 20000 || r.Members["primary"] != 0 {
		t.Fatalf("primary down: members %v, want every answer dr", r.Members)
	}
	if r.TTLs["30"] != 20000 {
		t.Errorf("TTLs %v after convergence, want the normal 30", r.TTLs)
	}
	// 3 failures 5 s apart, the first within one interval of the failure.
	if c := time.Duration(r.ConvergedAfter); c < 10*time.Second || c > 15*time.Second {
		t.Errorf("converged after %s, want 10..15 s (3 failed probes 5 s apart)", c)
	}
	if len(r.Transitions) != 1 || r.Transitions[0].Member != "primary" || r.Transitions[0].To != 0 {
		t.Errorf("transitions %+v, want primary 1 → 0", r.Transitions)
	}
}

// TestSimulateDNSRamp: the primary recovers at 60 s; it must come back
// after 2 successful probes and ramp 10 → 25 → 50 → 100 % at 0, 80, 160
// and 240 s, with the transition TTL until the ramp ends.
func TestSimulateDNSRamp(t *testing.T) {
	p := compilePlan(t, weightedYAML)
	o := sim.DNSOptions{Name: "api.gslb.example", Rate: 100, Duration: 6 * time.Minute, Step: 10 * time.Second, Seed: 3,
		Down: []string{"primary"}, Events: []sim.Event{{At: 60 * time.Second, Down: false, Targets: []string{"primary"}}}}
	r, err := simulateDNS(p, o)
	if err != nil {
		t.Fatal(err)
	}
	var steps []sim.DNSTransition
	for _, tr := range r.Transitions {
		if tr.Member == "primary" && tr.At >= 0 {
			steps = append(steps, tr)
		}
	}
	if len(steps) != 4 {
		t.Fatalf("primary's changes after the recovery: %+v, want 4 ramp steps", steps)
	}
	rs := time.Duration(steps[0].At)
	// The first success comes within one 5 s interval of 60 s, the
	// second 5 s later.
	if rs <= 65*time.Second || rs > 70*time.Second+10*time.Millisecond {
		t.Errorf("ramp started at %s, want after the 2nd probe following 60 s (65..70 s)", rs)
	}
	want := []float64{0.10, 0.25, 0.50, 1}
	for i, tr := range steps {
		at := rs + time.Duration(i)*80*time.Second
		// Transitions are seen at query times (every 10 ms).
		if d := time.Duration(tr.At) - at; d < 0 || d > 10*time.Millisecond || tr.To != want[i] {
			t.Errorf("step %d: %s → %.2f at %s, want %.2f at %s", i, "primary", tr.To, time.Duration(tr.At), want[i], at)
		}
	}
	// Shares per phase, from the timeline buckets that lie wholly in it.
	for i, frac := range want {
		from, to := rs+time.Duration(i)*80*time.Second, rs+time.Duration(i+1)*80*time.Second
		if frac == 1 {
			to = o.Duration
		}
		var n, hits, trans int
		for _, b := range r.Timeline {
			bs := time.Duration(b.Start)
			if bs < from || bs+o.Step > to {
				continue
			}
			n += b.Queries
			hits += b.Members["primary"]
			trans += b.TTLs["15"]
		}
		got := share(hits, n)
		t.Logf("phase %.0f%%: primary %.1f%% of %d answers, %d with TTL 15", 100*frac, got, n, trans)
		if n == 0 || math.Abs(got-100*frac) > 2 {
			t.Errorf("phase %.0f%%: primary has %.1f%% of %d answers", 100*frac, got, n)
		}
		if frac < 1 && trans != n {
			t.Errorf("phase %.0f%%: %d of %d answers with the transition TTL, want all", 100*frac, trans, n)
		}
	}
	// Before the recovery: all dr at the normal TTL.
	if b := r.Timeline[0]; b.Members["dr"] != b.Queries || b.TTLs["30"] != b.Queries {
		t.Errorf("first step %+v, want all dr at TTL 30", b)
	}
	// After the ramp and one TTL: the normal TTL again.
	if b := r.Timeline[len(r.Timeline)-1]; b.TTLs["30"] != b.Queries {
		t.Errorf("last step %+v, want TTL 30", b)
	}
}

func TestSimulateDNSGeo(t *testing.T) {
	p, err := loadPlan(dnsExample)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		subnet string
		down   []string
		want   string
	}{
		{"203.0.113.0/24", nil, "fra-edge"},
		{"198.51.100.0/24", nil, "iad-edge"},
		{"192.0.2.0/24", nil, "sin-edge"},
		// Frankfurt's clients go to the next-nearest edge, Virginia.
		{"203.0.113.0/24", []string{"fra-edge"}, "iad-edge"},
	} {
		r, err := simulateDNS(p, sim.DNSOptions{Name: "cdn.gslb.example", ClientSubnet: tc.subnet, Queries: 2000, Seed: 1, Down: tc.down})
		if err != nil {
			t.Fatal(err)
		}
		if r.Members[tc.want] != r.Queries {
			t.Errorf("%s with %v down: members %v, want every answer %s", tc.subnet, tc.down, r.Members, tc.want)
		}
	}
	// Through the www CNAME, as a resolver would ask.
	r, err := simulateDNS(p, sim.DNSOptions{Name: "www.gslb.example", ClientSubnet: "192.0.2.0/24", Queries: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Members["sin-edge"] != 100 || r.Regions["asia-southeast1"] != 100 {
		t.Errorf("www: members %v regions %v, want sin-edge", r.Members, r.Regions)
	}
}

func TestSimulateDNSDeterministic(t *testing.T) {
	p := compilePlan(t, weightedYAML)
	run := func(seed uint64) string {
		r, err := simulateDNS(p, sim.DNSOptions{Name: "api.gslb.example", Rate: 50, Duration: 5 * time.Minute, Seed: seed,
			Down: []string{"primary"}, Events: []sim.Event{{At: 30 * time.Second, Targets: []string{"primary"}}}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		return string(b)
	}
	a, b := run(5), run(5)
	if a != b {
		t.Fatal("two runs with seed 5 differ")
	}
	if a == run(6) {
		t.Error("seeds 5 and 6 gave identical runs")
	}
}

func TestSimulateDNSCommand(t *testing.T) {
	code, out, errs := runMain(t, "simulate", "--config", dnsExample, "--dns", "api.gslb.example", "--down", "primary", "--queries", "500", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"queries", "members", "addresses", "ttls", "rcodes"} {
		if _, ok := got[k]; !ok {
			t.Errorf("--json output lacks %q:\n%s", k, out)
		}
	}
	wantMembers := map[string]any{"primary": 0.0, "dr": 500.0, "sorry": 0.0}
	if !reflect.DeepEqual(got["members"], wantMembers) {
		t.Errorf("members %v, want %v", got["members"], wantMembers)
	}

	code, out, errs = runMain(t, "simulate", "--config", dnsExample, "--dns", "api.gslb.example", "--down", "primary",
		"--at", "60s:up=primary", "--rate", "20", "--duration", "6m", "--step", "30s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"timeline", "TTL 15", "primary", "0% →  10%", "rcodes: NOERROR 7200"} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q:\n%s", want, out)
		}
	}

	for _, args := range [][]string{
		{"--dns", "api.gslb.example", "--down", "nobody"},
		{"--dns", "api.example.com"},
		{"--dns", "api.gslb.example", "--client-region", "us-east1"},
		{"--dns", "cdn.gslb.example", "--client-subnet", "not-a-cidr"},
		{"--queries", "10"},
	} {
		if code, _, errs := runMain(t, append([]string{"simulate", "--config", dnsExample}, args...)...); code == 0 || errs == "" {
			t.Errorf("%v: exit %d, want an error", args, code)
		}
	}
	if _, _, errs := runMain(t, "simulate", "--help"); !strings.Contains(errs, "--client-subnet") || !strings.Contains(errs, "--dns") {
		t.Errorf("--help does not document --dns:\n%s", errs)
	}
}
