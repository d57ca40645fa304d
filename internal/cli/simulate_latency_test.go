package cli

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/sim"
)

// latencySimYAML is a LATENCY name: Seoul's resolvers (RTT: Tokyo 19 ms,
// Hong Kong 32, Virginia 152), Hong Kong biased +50 in "pull".
const latencySimYAML = `
healthChecks:
- {name: hc, type: TCP, checkIntervalSec: 5, tcpHealthCheck: {port: 443}}
frontends:
- {name: dns, address: "127.0.0.1:5300", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: lat
    policy: LATENCY
    pool:
      members:
      - {name: tok, address: 192.0.2.1, region: asia-northeast1, healthCheck: hc}
      - {name: hkg, address: 192.0.2.2, region: asia-east2, healthCheck: hc}
      - {name: iad, address: 192.0.2.3, region: us-east4, healthCheck: hc}
    locations: [{cidr: 10.1.0.0/16, region: asia-northeast3}]
  - name: pull
    policy: LATENCY
    pool:
      members:
      - {name: tok, address: 192.0.2.1, region: asia-northeast1, healthCheck: hc}
      - {name: hkg, address: 192.0.2.2, region: asia-east2, healthCheck: hc, bias: 50}
      - {name: iad, address: 192.0.2.3, region: us-east4, healthCheck: hc}
    locations: [{cidr: 10.1.0.0/16, region: asia-northeast3}]
`

func TestSimulateDNSLatency(t *testing.T) {
	p := compilePlan(t, latencySimYAML)
	for _, tc := range []struct {
		name, subnet string
		down         []string
		want         string // every answer
	}{
		{"lat.gslb.example", "10.1.0.0/24", nil, "tok"},
		{"lat.gslb.example", "10.1.0.0/24", []string{"tok"}, "hkg"},
		{"lat.gslb.example", "10.1.0.0/24", []string{"asia-northeast1", "asia-east2"}, "iad"},
		{"pull.gslb.example", "10.1.0.0/24", nil, "hkg"},
		{"pull.gslb.example", "10.1.0.0/24", []string{"hkg"}, "tok"},
	} {
		r, err := simulateDNS(p, sim.DNSOptions{Name: tc.name, ClientSubnet: tc.subnet, Queries: 500, Seed: 1, Down: tc.down})
		if err != nil {
			t.Fatal(err)
		}
		if r.Members[tc.want] != r.Queries {
			t.Errorf("%s from %s with %v down: members %v, want every answer %s", tc.name, tc.subnet, tc.down, r.Members, tc.want)
		}
	}
	// Without a client subnet the client is placed nowhere: every member.
	r, err := simulateDNS(p, sim.DNSOptions{Name: "lat.gslb.example", Queries: 600, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"tok", "hkg", "iad"} {
		if s := share(r.Members[m], r.Queries); s < 25 || s > 42 {
			t.Errorf("no client subnet: %s got %.1f%%, want about a third (%v)", m, s, r.Members)
		}
	}
}
