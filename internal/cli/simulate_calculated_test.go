package cli

import (
	"os"
	"testing"

	"github.com/spillwaylb/spillway/internal/sim"
)

// A member whose health is a calculated check simulates like any other:
// --down fails every child, and the name fails over.
func TestSimulateDNSCalculated(t *testing.T) {
	p := compilePlan(t, `
healthChecks:
- {name: hc, type: TCP, checkIntervalSec: 5, tcpHealthCheck: {port: 443}}
frontends:
- {name: dns, address: "127.0.0.1:5300", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: api
    policy: FAILOVER
    pool:
      members:
      - name: primary
        address: 192.0.2.1
        healthChecks:
        - calculated: {minHealthy: 2, checks: [{name: hc, address: 10.0.0.1}, {name: hc, address: 10.0.0.2}, {name: hc, address: 10.0.0.3}]}
      - {name: dr, address: 192.0.2.2, priority: 1, healthCheck: hc}
`)
	for _, tc := range []struct {
		down []string
		want string
	}{
		{nil, "primary"},
		{[]string{"primary"}, "dr"},
	} {
		r, err := simulateDNS(p, sim.DNSOptions{Name: "api.gslb.example", Queries: 200, Seed: 1, Down: tc.down})
		if err != nil {
			t.Fatal(err)
		}
		if r.Members[tc.want] != r.Queries {
			t.Errorf("%v down: members %v, want every answer %s", tc.down, r.Members, tc.want)
		}
	}
}

// A pool member following a backend service's fleet goes down in the
// simulation when the service's endpoints in its region do.
func TestSimulateDNSMemberFleet(t *testing.T) {
	b, err := os.ReadFile(dnsExample)
	if err != nil {
		t.Fatal(err)
	}
	p := compilePlan(t, string(b)+`
  - name: fleet
    policy: FAILOVER
    pool:
      members:
      - {name: us, address: 198.51.100.40, region: us-east1, backendService: web, healthCheck: hc-edge}
      - {name: eu, address: 203.0.113.40, region: europe-west3, backendService: web, priority: 1}
`)
	for _, tc := range []struct {
		down []string
		want string
	}{
		{nil, "us"},
		{[]string{"neg-web-us"}, "eu"},
	} {
		r, err := simulateDNS(p, sim.DNSOptions{Name: "fleet.gslb.example", Queries: 200, Seed: 1, Down: tc.down})
		if err != nil {
			t.Fatal(err)
		}
		if r.Members[tc.want] != r.Queries {
			t.Errorf("%v down: members %v, want every answer %s", tc.down, r.Members, tc.want)
		}
	}
}
