package anycast

import (
	"fmt"
	"math"
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/plan"
)

// capacityConfig: bs-a has two checked backends of weights 200 (two
// endpoints) and 100 (one); bs-b one endpoint without a health check.
const capacityConfig = `
healthChecks:
- {name: hc, type: TCP, healthyThreshold: 1, unhealthyThreshold: 1}
networkEndpointGroups:
- {name: neg-a, zone: us-east1-b, endpoints: [{ipAddress: 10.0.0.1, port: 80}, {ipAddress: 10.0.0.2, port: 80}]}
- {name: neg-b, zone: us-east1-c, endpoints: [{ipAddress: 10.0.1.1, port: 80}]}
- {name: neg-c, zone: us-east1-d, endpoints: [{ipAddress: 10.0.2.1, port: 80}]}
backendServices:
- name: bs-a
  healthChecks: [hc]
  backends:
  - {group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 100}
  - {group: neg-b, balancingMode: RATE, maxRatePerEndpoint: 100%s}
- name: bs-b
  backends: [{group: neg-c}]
`

func capacityPlan(t *testing.T, scaler string) *plan.Plan {
	t.Helper()
	c, err := config.Parse([]byte(fmt.Sprintf(capacityConfig, scaler)), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMeasure(t *testing.T) {
	p := capacityPlan(t, "")
	st := control.New(p)
	both := Services(p, []string{"bs-a", "bs-b", "unknown"})
	if len(both) != 2 {
		t.Fatalf("Services: %d", len(both))
	}
	check := func(step string, c Capacity, pct float64, healthy, unknown int) {
		t.Helper()
		if math.Abs(c.Percent()-pct) > 0.01 || c.Healthy != healthy || c.Unknown != unknown || c.Members != 4 || c.Services != 2 {
			t.Errorf("%s: %+v, %.2f%%; want %.2f%%, %d healthy, %d unknown", step, c, c.Percent(), pct, healthy, unknown)
		}
	}
	// Not probed yet: bs-a counts nothing healthy, bs-b (no check) all.
	check("before probes", Measure(st, both), 50, 1, 3)
	byAddr := map[string]int{}
	for _, e := range p.Endpoints {
		byAddr[e.Addr] = e.ID
		st.ObserveProbe(e.ID, true, "", t0)
	}
	check("all healthy", Measure(st, both), 100, 4, 0)
	st.ObserveProbe(byAddr["10.0.0.1:80"], false, "refused", t0)
	// bs-a: (200 * 1/2 + 100) / 300 = 2/3; bs-b: 1; average 5/6.
	check("one of neg-a down", Measure(st, both), 100*5.0/6, 3, 0)
	st.ObserveProbe(byAddr["10.0.0.2:80"], false, "refused", t0)
	st.ObserveProbe(byAddr["10.0.1.1:80"], false, "refused", t0)
	check("bs-a down", Measure(st, both), 50, 1, 0)
	if c := Measure(st, both[:1]); c.Percent() != 0 || c.Healthy != 0 || c.Services != 1 {
		t.Errorf("bs-a alone: %+v", c)
	}
	if c := Measure(st, nil); c.Services != 0 || c.Percent() != 0 {
		t.Errorf("no services: %+v", c)
	}
}

// TestMeasureZeroCapacity: a backend drained by an operator
// (capacityScaler 0) does not count; a service whose backends all are
// does not count either.
func TestMeasureZeroCapacity(t *testing.T) {
	p := capacityPlan(t, ", capacityScaler: 0")
	st := control.New(p)
	for _, e := range p.Endpoints {
		st.ObserveProbe(e.ID, true, "", t0)
	}
	c := Measure(st, Services(p, []string{"bs-a"}))
	if c.Members != 2 || c.Healthy != 2 || c.Percent() != 100 {
		t.Errorf("bs-a without neg-b: %+v", c)
	}
}
