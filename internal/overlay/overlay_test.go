package overlay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/overlay"
)

const testConfig = `
instanceGroups:
- name: ig-a
  zone: us-east1-b
  namedPorts: [{name: http, port: 8080}]
  instances:
  - {name: vm-1, ipAddress: 10.0.0.1}
  - {name: vm-2, ipAddress: 10.0.0.2}
networkEndpointGroups:
- name: neg-a
  zone: us-east1-b
  defaultPort: 8080
  endpoints:
  - {ipAddress: 10.2.0.1}
- name: neg-b
  zone: us-west1-a
  defaultPort: 8080
  endpoints:
  - {ipAddress: 10.1.0.1}
  - {ipAddress: 10.1.0.2, port: 9090}
backendServices:
- name: bs-web
  backends:
  - {group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 100}
  - {group: neg-b, balancingMode: RATE, maxRatePerEndpoint: 100}
- name: bs-vm
  portName: http
  backends:
  - {group: ig-a, balancingMode: UTILIZATION}
- name: bs-canary
  backends:
  - {group: neg-b, balancingMode: RATE, maxRatePerEndpoint: 100}
  - {group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 100}
urlMaps:
- name: um
  defaultRouteAction:
    weightedBackendServices:
    - {backendService: bs-web, weight: 70}
    - {backendService: bs-canary, weight: 30}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
`

func parse(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(testConfig), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func scalers(c *config.Config, svc string) []float64 {
	var out []float64
	for _, bs := range c.BackendServices {
		if bs.Name != svc {
			continue
		}
		for _, b := range bs.Backends {
			v := 1.0
			if b.CapacityScaler != nil {
				v = *b.CapacityScaler
			}
			out = append(out, v)
		}
	}
	return out
}

func members(c *config.Config) int {
	n := 0
	for _, g := range c.InstanceGroups {
		n += len(g.Instances)
	}
	for _, g := range c.NetworkEndpointGroups {
		n += len(g.Endpoints)
	}
	return n
}

func TestApply(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		entries []overlay.Entry
		check   func(c *config.Config) string
		problem string
	}{
		{"drain a group of one service", []overlay.Entry{{Target: overlay.Target{Service: "bs-web", Group: "neg-b"}, Action: overlay.Drain}},
			func(c *config.Config) string {
				if s := scalers(c, "bs-web"); s[0] != 1 || s[1] != 0 {
					return "bs-web scalers " + fmtF(s)
				}
				if s := scalers(c, "bs-canary"); s[0] != 1 || s[1] != 1 {
					return "bs-canary changed"
				}
				return ""
			}, ""},
		{"drain a group of every service", []overlay.Entry{{Target: overlay.Target{Group: "neg-b"}, Action: overlay.Drain}},
			func(c *config.Config) string {
				if s := scalers(c, "bs-web"); s[1] != 0 {
					return "bs-web not drained"
				}
				if s := scalers(c, "bs-canary"); s[0] != 0 {
					return "bs-canary not drained"
				}
				return ""
			}, ""},
		{"a drain wins over a capacity scaler", []overlay.Entry{
			{Target: overlay.Target{Service: "bs-web"}, Action: overlay.Drain},
			{Target: overlay.Target{Service: "bs-web"}, Action: overlay.CapacityScaler, Value: 0.5},
		}, func(c *config.Config) string {
			if s := scalers(c, "bs-web"); s[0] != 0 || s[1] != 0 {
				return "bs-web scalers " + fmtF(s)
			}
			return ""
		}, ""},
		{"weight", []overlay.Entry{{Target: overlay.Target{Service: "bs-canary"}, Action: overlay.Weight, Value: 5}},
			func(c *config.Config) string {
				if w := c.URLMaps[0].DefaultRouteAction.WeightedBackendServices[1].Weight; w != 5 {
					return "weight not set"
				}
				return ""
			}, ""},
		{"endpoint by instance name", []overlay.Entry{{Target: overlay.Target{Endpoint: "vm-2"}, Action: overlay.Drain}},
			func(c *config.Config) string {
				if len(c.InstanceGroups[0].Instances) != 1 || c.InstanceGroups[0].Instances[0].Name != "vm-1" {
					return "vm-2 not removed"
				}
				return ""
			}, ""},
		{"endpoint by IP:port with the default port", []overlay.Entry{{Target: overlay.Target{Group: "neg-b", Endpoint: "10.1.0.1:8080"}, Action: overlay.Drain}},
			func(c *config.Config) string {
				if members(c) != 4 || c.NetworkEndpointGroups[1].Endpoints[0].IPAddress != "10.1.0.2" {
					return "10.1.0.1 not removed"
				}
				return ""
			}, ""},
		{"expired entries do nothing", []overlay.Entry{{Target: overlay.Target{Service: "bs-web"}, Action: overlay.Drain, Expires: t0}},
			func(c *config.Config) string {
				if s := scalers(c, "bs-web"); s[0] != 1 {
					return "expired drain applied"
				}
				return ""
			}, ""},
		{"a missing service is a problem, not an error", []overlay.Entry{{Target: overlay.Target{Service: "bs-gone"}, Action: overlay.Drain}},
			func(c *config.Config) string { return "" }, "no backend service bs-gone"},
		{"a missing endpoint is a problem", []overlay.Entry{{Target: overlay.Target{Group: "ig-a", Endpoint: "10.9.9.9"}, Action: overlay.Drain}},
			func(c *config.Config) string { return "" }, "group ig-a has no member 10.9.9.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := parse(t)
			var s overlay.Set
			for _, e := range tt.entries {
				if err := e.Check(); err != nil {
					t.Fatalf("Check: %v", err)
				}
				s = s.Put(e)
			}
			out, problems, err := overlay.Apply(base, s, t0)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(out); msg != "" {
				t.Error(msg)
			}
			if got := strings.Join(problems, "\n"); tt.problem == "" && got != "" || !strings.Contains(got, tt.problem) {
				t.Errorf("problems %q, want one with %q", got, tt.problem)
			}
			if s := scalers(base, "bs-web"); s[0] != 1 || s[1] != 1 || members(base) != 5 {
				t.Error("Apply changed its input config")
			}
			if err := out.Validate(); err != nil && tt.problem == "" {
				t.Errorf("the overlaid config does not validate: %v", err)
			}
		})
	}
}

func fmtF(s []float64) string { return fmt.Sprint(s) }

func TestEntryCheck(t *testing.T) {
	tests := []struct {
		e    overlay.Entry
		want string
	}{
		{overlay.Entry{Action: overlay.Drain}, "target: empty"},
		{overlay.Entry{Target: overlay.Target{Service: "s"}, Action: overlay.CapacityScaler, Value: 0.05}, "out of range"},
		{overlay.Entry{Target: overlay.Target{Endpoint: "10.0.0.1"}, Action: overlay.CapacityScaler, Value: 0.5}, "no capacityScaler of its own"},
		{overlay.Entry{Target: overlay.Target{Service: "s", Group: "g"}, Action: overlay.Weight, Value: 5}, "give --service alone"},
		{overlay.Entry{Target: overlay.Target{Service: "s"}, Action: overlay.Weight, Value: 2.5}, "whole number"},
		{overlay.Entry{Target: overlay.Target{Service: "s"}, Action: "STOP"}, "want DRAIN"},
		{overlay.Entry{Target: overlay.Target{Service: "s"}, Action: overlay.CapacityScaler, Value: 0}, ""},
	}
	for _, tt := range tests {
		err := tt.e.Check()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: Check = %v, want %q", tt.e, err, tt.want)
		}
	}
}

func TestSetPutReplacesAndExpire(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var s overlay.Set
	s = s.Put(overlay.Entry{Target: overlay.Target{Service: "a"}, Action: overlay.CapacityScaler, Value: 0.5, Expires: t0.Add(time.Minute)})
	s = s.Put(overlay.Entry{Target: overlay.Target{Service: "a"}, Action: overlay.CapacityScaler, Value: 0.2})
	s = s.Put(overlay.Entry{Target: overlay.Target{Service: "b"}, Action: overlay.Drain, Expires: t0.Add(time.Minute)})
	if len(s.Entries) != 2 || s.Entries[0].Value != 0.2 {
		t.Fatalf("Put did not replace by ID: %+v", s.Entries)
	}
	if got := s.NextExpiry(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("NextExpiry = %v", got)
	}
	kept, gone := s.Expire(t0.Add(59 * time.Second))
	if len(gone) != 0 || len(kept.Entries) != 2 {
		t.Errorf("expired too early: %+v", gone)
	}
	kept, gone = s.Expire(t0.Add(time.Minute))
	if len(gone) != 1 || gone[0].ID != "DRAIN service=b" || len(kept.Entries) != 1 {
		t.Errorf("Expire at the deadline: kept %+v gone %+v", kept.Entries, gone)
	}
}
