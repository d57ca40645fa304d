package control_test

import (
	"math"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/plan"
)

// TestMeasuredCapacity: a UTILIZATION backend's measured capacity caps
// its configured one, moves only past 5%, is forgotten with 0, survives
// a reload that keeps the backend's mode, and means nothing to a RATE
// backend.
func TestMeasuredCapacity(t *testing.T) {
	const cfg = `
instanceGroups:
- {name: u, zone: us-east1-b, namedPorts: [{name: http, port: 80}], instances: [{name: u1, ipAddress: 10.0.0.1}]}
- {name: r, zone: us-east1-c, namedPorts: [{name: http, port: 80}], instances: [{name: r1, ipAddress: 10.0.0.2}]}
backendServices:
- name: bs
  backends:
  - {group: u, balancingMode: UTILIZATION, maxUtilization: 0.8, maxRatePerInstance: 500}
  - {group: r, balancingMode: RATE, maxRatePerInstance: 100}
urlMaps: [{name: um, defaultService: bs}]
`
	compile := func(y string) *plan.Plan {
		c, err := config.Parse([]byte(y), "test.yaml")
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Compile(c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := compile(cfg)
	if got := p.Services[0].Backends[0].TargetUtilization; got != 0.8 {
		t.Fatalf("target utilisation %v, want 0.8", got)
	}
	s := control.New(p)
	now := time.Unix(0, 0)
	for _, c := range []struct {
		name    string
		set     float64
		changed bool
		want    float64 // Capacity(0, 0)
	}{
		{"none yet: the configured 500", -1, false, 500},
		{"measured 300", 300, true, 300},
		{"within 5%", 310, false, 300},
		{"past 5%", 330, true, 330},
		{"above the configured: the configured", 800, true, 500},
		{"not finite: forgotten", math.Inf(1), true, 500},
		{"again", 200, true, 200},
		{"0: forgotten", 0, true, 500},
	} {
		changed := false
		if c.set >= 0 {
			changed = s.SetMeasuredCapacity(0, 0, c.set, now)
		}
		if changed != c.changed || s.Capacity(0, 0) != c.want {
			t.Errorf("%s: changed %v, capacity %v; want %v, %v", c.name, changed, s.Capacity(0, 0), c.changed, c.want)
		}
	}
	if s.SetMeasuredCapacity(0, 1, 50, now) || s.Capacity(0, 1) != 100 {
		t.Errorf("a RATE backend took a measured capacity: %v", s.Capacity(0, 1))
	}
	s.SetMeasuredCapacity(0, 0, 250, now)
	if n := s.Rebase(compile(cfg)); n.Capacity(0, 0) != 250 {
		t.Errorf("after a reload: %v, want the measured 250 kept", n.Capacity(0, 0))
	}
}
