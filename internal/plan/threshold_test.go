package plan

import (
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
)

// thresholdConfig is one backend service with the given scheme and
// serviceLbPolicy (policy "" for none) under spillway.fidelityProfile
// profile ("" for none).
func thresholdConfig(scheme, policy, profile string) string {
	y := `
healthChecks: [{name: hc, type: HTTP, httpHealthCheck: {portSpecification: USE_SERVING_PORT}}]
serviceLbPolicies:
- {name: slp-default}
- {name: slp-80, failoverConfig: {failoverHealthThreshold: 80}}
instanceGroups:
- {name: ig-a, zone: us-east4-a, namedPorts: [{name: http, port: 8080}], instances: [{name: a1, ipAddress: 127.0.0.1}]}
backendServices:
- name: bs
  loadBalancingScheme: ` + scheme + `
  healthChecks: [hc]
  backends: [{group: ig-a}]
`
	if policy != "" {
		y += "  serviceLbPolicy: " + policy + "\n"
	}
	if profile != "" {
		y += "spillway: {fidelityProfile: " + profile + "}\n"
	}
	return y
}

// Without a serviceLbPolicy the threshold follows the scheme (Google's
// documented 50 for the classic EXTERNAL, 70 for EXTERNAL_MANAGED), and
// the SEED_000 profile keeps the 50 seed 000 measured.
func TestFailoverThresholdByScheme(t *testing.T) {
	for _, tc := range []struct {
		scheme, policy, profile string
		want                    float64
		rule                    string
	}{
		{"EXTERNAL_MANAGED", "", "", 0.70, "EXTERNAL_MANAGED: Google's documented default, 70"},
		{"EXTERNAL_MANAGED", "", "DOCUMENTED", 0.70, "Google's documented default, 70"},
		{"EXTERNAL_MANAGED", "", "SEED_000", 0.50, "fidelityProfile SEED_000: 50, as seed 000's no-policy rows measured"},
		{"EXTERNAL", "", "", 0.50, "EXTERNAL (the classic Application Load Balancer): Google's documented default, 50"},
		{"EXTERNAL", "", "SEED_000", 0.50, "classic"},
		{"EXTERNAL_MANAGED", "slp-default", "SEED_000", 0.70, "slp-default sets no failoverHealthThreshold"},
		{"EXTERNAL_MANAGED", "slp-80", "", 0.80, "failoverConfig.failoverHealthThreshold of serviceLbPolicy slp-80"},
	} {
		c, err := config.Parse([]byte(thresholdConfig(tc.scheme, tc.policy, tc.profile)), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(c)
		if err != nil {
			t.Fatal(err)
		}
		s := p.Services[0]
		if s.FailoverThreshold != tc.want || !strings.Contains(s.ThresholdRule, tc.rule) {
			t.Errorf("%s, policy %q, profile %q: %.2f (%s), want %.2f (%s)", tc.scheme, tc.policy, tc.profile, s.FailoverThreshold, s.ThresholdRule, tc.want, tc.rule)
		}
	}
	if _, err := config.Parse([]byte(thresholdConfig("EXTERNAL_MANAGED", "", "SEED_001")), "t.yaml"); err == nil || !strings.Contains(err.Error(), "spillway.fidelityProfile") {
		t.Errorf("an unknown profile: %v, want an error naming spillway.fidelityProfile", err)
	}
}
