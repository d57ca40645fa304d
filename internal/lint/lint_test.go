package lint_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/lint"
	"github.com/spillwaylb/spillway/internal/plan"
)

func check(t *testing.T, data []byte) []string {
	t.Helper()
	c, err := config.Parse(data, "lint.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range lint.Check(p, lint.Options{}) {
		out = append(out, f.String())
	}
	return out
}

func TestSeedPatternStepUp(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "seed-70-30", "with-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := check(t, data)
	if len(got) != 1 || !strings.HasPrefix(got[0], "urlMaps[um-global-alb]: us-east4 normally serves 30% of this split; if every other region fails it serves 100%, a 3.3× step-up") {
		t.Fatalf("findings: %q", got)
	}
}

func TestDrainLimitWithFiveGroups(t *testing.T) {
	// The seed's caveat 1: 3 zones in us-south1 and 2 in us-east4.
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "seed-70-30", "with-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(data, "with-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.BackendServices {
		bs := &c.BackendServices[i]
		var keep []config.Backend
		for _, b := range bs.Backends {
			if !strings.HasSuffix(b.Group, "mig-us-east4-c") {
				keep = append(keep, b)
			}
		}
		bs.Backends = keep
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	var drain []string
	for _, f := range lint.Check(p, lint.Options{}) {
		if strings.Contains(f.Message, "cannot be drained") {
			drain = append(drain, f.String())
		}
	}
	if len(drain) != 2 || !strings.Contains(drain[0], "a full outage of us-south1 (3 of 5 backends) cannot be drained: auto-capacity drain stops at 50% (2 backends), the other 1 stay") {
		t.Fatalf("drain findings: %q", drain)
	}
}

func TestSharedUtilization(t *testing.T) {
	got := check(t, []byte(`
instanceGroups:
- {name: ig, zone: us-east1-b, namedPorts: [{name: http, port: 80}], instances: [{name: vm, ipAddress: 10.0.0.1}]}
backendServices:
- {name: a, backends: [{group: ig, balancingMode: UTILIZATION}]}
- {name: b, backends: [{group: ig, balancingMode: UTILIZATION}]}
urlMaps: [{name: um, defaultService: a}]
`))
	if len(got) != 1 || !strings.HasPrefix(got[0], "group ig: is shared by backend services a, b with balancingMode UTILIZATION") {
		t.Fatalf("findings: %q", got)
	}
}

// A serverless group shared by services with gcloud's UTILIZATION (what
// describe shows for a serverless backend) has no utilization to
// autoscale on: no finding (seed 003's bs-default and bs-osaka).
func TestSharedUtilizationServerless(t *testing.T) {
	got := check(t, []byte(`
spillway: {serverless: [{region: asia-northeast2, baseUrl: "https://127.6.1.1:18443"}]}
networkEndpointGroups:
- {name: neg, region: asia-northeast2, networkEndpointType: SERVERLESS, cloudRun: {service: web}}
backendServices:
- {name: a, backends: [{group: neg, balancingMode: UTILIZATION}]}
- {name: b, backends: [{group: neg, balancingMode: UTILIZATION}]}
urlMaps: [{name: um, defaultService: a}]
`))
	if len(got) != 0 {
		t.Fatalf("findings: %q", got)
	}
}

func readExample(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "seed-70-30", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func checkWith(t *testing.T, data []byte, o lint.Options) []string {
	t.Helper()
	c, err := config.Parse(data, "lint.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range lint.Check(p, o) {
		out = append(out, f.String())
	}
	return out
}

// TestSingleRegionWeighted: seed 000's baseline (70/30 over two
// single-region services) gets the headline advice, naming both services,
// their regions and the share that fails with each region; the seed's
// fix (with-policy.yaml) and a split over multi-region services do not.
func TestSingleRegionWeighted(t *testing.T) {
	const prefix = "urlMaps[um-global-alb].defaultRouteAction: weighted backend services"
	tests := []struct {
		name string
		file string
		want []string // substrings of the one finding; nil: no finding
	}{
		{"baseline", "baseline.yaml", []string{
			"bs-south (us-south1, weight 70), bs-east (us-east4, weight 30)",
			"when us-east4 fails, 30% of these requests fail with 503",
			"when us-south1 fails, 70% of these requests fail with 503",
			"fix: give each of bs-south, bs-east backends in more than one region",
		}},
		{"with-policy", "with-policy.yaml", nil},
		{"no-policy", "no-policy.yaml", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range checkWith(t, readExample(t, tt.file), lint.Options{}) {
				if strings.HasPrefix(f, prefix) {
					got = append(got, f)
				}
			}
			if tt.want == nil {
				if len(got) != 0 {
					t.Fatalf("unexpected findings: %q", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("got %d single-region findings, want 1: %q", len(got), got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("finding lacks %q:\n%s", w, got[0])
				}
			}
		})
	}
}

// TestSingleRegionWeightedInPathMatcher: a split in a route rule is
// checked too, and a zero weight does not count.
func TestSingleRegionWeightedInPathMatcher(t *testing.T) {
	got := check(t, []byte(`
networkEndpointGroups:
- {name: neg-a, zone: us-east1-b, defaultPort: 80, endpoints: [{ipAddress: 10.0.0.1}]}
- {name: neg-b, zone: europe-west1-b, defaultPort: 80, endpoints: [{ipAddress: 10.0.1.1}]}
backendServices:
- {name: a, backends: [{group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 10}]}
- {name: b, backends: [{group: neg-b, balancingMode: RATE, maxRatePerEndpoint: 10}]}
- {name: both, backends: [{group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 10}, {group: neg-b, balancingMode: RATE, maxRatePerEndpoint: 10}]}
urlMaps:
- name: um
  defaultRouteAction:
    weightedBackendServices: [{backendService: both, weight: 100}, {backendService: a, weight: 0}]
  hostRules: [{hosts: ["*"], pathMatcher: pm}]
  pathMatchers:
  - name: pm
    defaultService: both
    routeRules:
    - priority: 1
      matchRules: [{prefixMatch: /api}]
      routeAction:
        weightedBackendServices: [{backendService: a, weight: 1}, {backendService: b, weight: 3}]
`))
	if len(got) != 1 || !strings.HasPrefix(got[0], "urlMaps[um].pathMatchers[pm].routeRules[priority 1].routeAction: weighted backend services a (us-east1, weight 1), b (europe-west1, weight 3)") ||
		!strings.Contains(got[0], "when europe-west1 fails, 75% of these requests fail") {
		t.Fatalf("findings: %q", got)
	}
}

// TestRateBelowLoad: with --rate, a service whose first tier targets less
// than its share of the load is advised; below the capacity, nothing.
func TestRateBelowLoad(t *testing.T) {
	tests := []struct {
		name string
		file string
		rate float64
		want []string
	}{
		{"under capacity", "with-policy.yaml", 1000, nil},
		{"no rate given", "with-policy.yaml", 0, nil},
		{"preferred tier overflows", "with-policy.yaml", 1500, []string{
			"backendServices[bs-south-pref]: gets 1050 rps of the stated load (--rate 1500), above the RATE capacity of its PREFERRED backends (us-south1) (900 rps): 150 rps spill over",
		}},
		{"whole service overflows", "baseline.yaml", 4000, []string{
			"backendServices[bs-east]: gets 1200 rps of the stated load (--rate 4000), above the RATE capacity of all its backends together (900 rps)",
			"backendServices[bs-south]: gets 2800 rps of the stated load (--rate 4000), above the RATE capacity of all its backends together (900 rps)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range checkWith(t, readExample(t, tt.file), lint.Options{Rate: tt.rate}) {
				if strings.Contains(f, "of the stated load") {
					got = append(got, f)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d load findings, want %d: %q", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) && !strings.Contains(got[i], w) {
					t.Errorf("finding %d:\n%s\nwant it to contain\n%s", i, got[i], w)
				}
			}
		})
	}
}
