package proxy

import (
	"math"
	"net/http"
	"testing"

	"github.com/spillwaylb/spillway/internal/plan"
)

func TestParseLoadReport(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64 // -1: no utilisation
	}{
		{"TEXT cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=10", 0.3},
		{"TEXT application_utilization=0.5,cpu_utilization=0.3", 0.5},
		{"TEXT application_utilization=0, cpu_utilization=0.3", 0.3}, // zero means unset, as gRPC reads it
		{"TEXT named_metrics.foo=123, cpu_utilization=1.7", 1.7},     // CPU may pass 1
		{"TEXT cpu_utilization = 0.25 ", 0.25},
		{`JSON {"cpu_utilization": 0.3, "mem_utilization": 0.8}`, 0.3},
		{`JSON {"cpuUtilization": 0.4, "applicationUtilization": 0.6}`, 0.6},
		{"TEXT mem_utilization=0.8", -1},
		{"TEXT cpu_utilization=-0.1", -1},
		{"TEXT cpu_utilization=NaN", -1},
		{"TEXT cpu_utilization=1e9", -1},
		{"TEXT cpu_utilization", -1},
		{"TEXT cpu_utilization=0.3, junk", -1},
		{`JSON {"cpu_utilization": "high"}`, -1},
		{"BIN CgQIARAB", -1}, // the binary form is not read
		{"cpu_utilization=0.3", -1},
		{"", -1},
	} {
		u, ok := parseLoadReport(c.in)
		if (c.want < 0) != !ok || (ok && u != c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, u, ok, c.want)
		}
	}
}

// FuzzParseLoadReport: whatever a backend sends, the parse does not
// panic and what it accepts is a finite utilisation in [0, 100].
func FuzzParseLoadReport(f *testing.F) {
	f.Add("TEXT cpu_utilization=0.3, mem_utilization=0.8")
	f.Add(`JSON {"application_utilization": 0.5}`)
	f.Add("TEXT =,=")
	f.Add("JSON ")
	f.Fuzz(func(t *testing.T, s string) {
		u, ok := parseLoadReport(s)
		if ok && !(u >= 0 && u <= maxUtilization) {
			t.Fatalf("%q parsed to %v", s, u)
		}
	})
}

// TestLoadReportsCount: reports of a UTILIZATION backend's endpoints are
// counted for it; a RATE backend's, a response without a report and an
// endpoint of no backend of the service are not.
func TestLoadReportsCount(t *testing.T) {
	gu, gr, other := &plan.Group{Name: "u"}, &plan.Group{Name: "r"}, &plan.Group{Name: "x"}
	svc := &plan.Service{ID: 1}
	svc.Backends = []*plan.Backend{{Index: 0, Group: gu, Mode: "UTILIZATION"}, {Index: 1, Group: gr, Mode: "RATE"}}
	p := &plan.Plan{Services: []*plan.Service{{ID: 0, Backends: []*plan.Backend{{Group: gu}}}, svc}}
	l := NewLoadReports(p)
	eu, er, ex := &plan.Endpoint{Group: gu}, &plan.Endpoint{Group: gr}, &plan.Endpoint{Group: other}
	rep := func(v string) http.Header { return http.Header{hdrLoadMetrics: {v}} }
	l.observe(svc, eu, rep("TEXT cpu_utilization=0.5"))
	l.observe(svc, eu, rep("TEXT cpu_utilization=0.7"))
	l.observe(svc, eu, http.Header{})
	l.observe(svc, eu, rep("TEXT nonsense"))
	l.observe(svc, er, rep("TEXT cpu_utilization=0.9"))
	l.observe(svc, ex, rep("TEXT cpu_utilization=0.9"))
	var nilReports *LoadReports
	nilReports.observe(svc, eu, rep("TEXT cpu_utilization=0.9"))
	if n, u := l.Swap(1, 0); n != 2 || math.Abs(u-0.6) > 1e-9 {
		t.Errorf("UTILIZATION backend: %d reports, mean %v; want 2, 0.6", n, u)
	}
	if n, _ := l.Swap(1, 0); n != 0 {
		t.Errorf("after Swap: %d reports, want 0", n)
	}
	if n, _ := l.Swap(1, 1); n != 0 {
		t.Errorf("RATE backend: %d reports counted, want 0", n)
	}
	if n, _ := l.Swap(0, 0); n != 0 {
		t.Errorf("service 0: %d reports, want 0", n)
	}
	if n, _ := l.Swap(0, 1); n != 0 {
		t.Errorf("out of range backend: %d", n)
	}
}
