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
	for _, f := range lint.Check(p) {
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
	for _, f := range lint.Check(p) {
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
