package config

import (
	"strings"
	"testing"
)

// serverlessConfig is seed 003's shape with serverless NEGs, plus an
// INTERNET_FQDN_PORT group; the cases below each change one piece of it
// (line numbers in the expected messages refer to this text).
const serverlessConfig = `spillway:
  serverless:
  - {region: asia-northeast1, baseUrl: "https://{service}.tokyo.run.internal:8443"}
  - {region: asia-northeast2, baseUrl: "https://127.6.1.1:18443"}
  resolver: {address: "127.0.0.1:53", minTtlSec: 5, maxTtlSec: 300}
networkEndpointGroups:
- name: neg-tokyo
  region: https://www.googleapis.com/compute/v1/projects/p/regions/asia-northeast1
  networkEndpointType: SERVERLESS
  cloudRun: {service: wt-web, tag: blue}
- name: neg-osaka
  region: asia-northeast2
  networkEndpointType: SERVERLESS
  cloudRun: {service: wt-web}
- name: neg-origin
  region: asia-northeast1
  networkEndpointType: INTERNET_FQDN_PORT
  defaultPort: 443
  endpoints:
  - {fqdn: origin.example.com}
backendServices:
- name: bs-default
  loadBalancingScheme: EXTERNAL_MANAGED
  outlierDetection: {consecutiveGatewayFailure: 5, enforcingConsecutiveGatewayFailure: 100}
  backends:
  - {group: neg-tokyo, balancingMode: UTILIZATION, capacityScaler: 1.0}
  - {group: neg-osaka}
- name: bs-origin
  backends:
  - {group: neg-origin}
urlMaps:
- name: wt-web
  defaultService: bs-default
  pathMatchers: [{name: p, defaultService: bs-origin}]
  hostRules: [{hosts: [origin.example], pathMatcher: p}]
`

func serverlessEdit(t *testing.T, edits []edit) string {
	t.Helper()
	s := serverlessConfig
	for _, e := range edits {
		if n := strings.Count(s, e.old); n != 1 {
			t.Fatalf("edit %q matches %d times in the serverless config, want 1", e.old, n)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	return s
}

// TestServerlessConfigIsValid: a describe-shaped serverless NEG (region
// as a link) behind a backend with gcloud's UTILIZATION balancing mode,
// and an fqdn group, load.
func TestServerlessConfigIsValid(t *testing.T) {
	c, err := Parse([]byte(serverlessConfig), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.NetworkEndpointGroups[0].RegionName(); got != "asia-northeast1" {
		t.Errorf("region %q, want asia-northeast1", got)
	}
}

// TestInvalidServerlessConfigs: each bad value is reported at its field,
// with the fix.
func TestInvalidServerlessConfigs(t *testing.T) {
	tests := []struct {
		name  string
		edits []edit
		want  string
	}{
		{"serverless group with a zone", []edit{{"  region: asia-northeast2\n  networkEndpointType: SERVERLESS\n", "  zone: asia-northeast2-a\n  networkEndpointType: SERVERLESS\n"}},
			`test.yaml:11:3: networkEndpointGroups[neg-osaka].region: a SERVERLESS group needs a region and no zone (fix: set region (serverless NEGs are regional) and remove zone)`},
		{"serverless group with endpoints", []edit{{"  cloudRun: {service: wt-web}\n", "  cloudRun: {service: wt-web}\n  endpoints: [{ipAddress: 10.0.0.1, port: 80}]\n"}},
			`test.yaml:15:3: networkEndpointGroups[neg-osaka].endpoints: a SERVERLESS group has no endpoints (fix: remove endpoints and defaultPort; spillway.serverless says where the service runs)`},
		{"region without a mapping", []edit{{"  - {region: asia-northeast2, baseUrl: \"https://127.6.1.1:18443\"}\n", ""}},
			`test.yaml:11:3: networkEndpointGroups[neg-osaka].region: no spillway.serverless entry maps region asia-northeast2 (fix: add spillway: {serverless: [{region: asia-northeast2, baseUrl: "https://..."}]} saying where this region's serverless services run (docs/extensions.md))`},
		{"two serverless blocks", []edit{{"  cloudRun: {service: wt-web}\n", "  cloudRun: {service: wt-web}\n  appEngine: {service: default}\n"}},
			`test.yaml:11:3: networkEndpointGroups[neg-osaka]: 2 serverless blocks are set (fix: set exactly one of cloudRun, appEngine and cloudFunction)`},
		{"urlMask without a service", []edit{{"  cloudRun: {service: wt-web}\n", "  cloudRun: {urlMask: \"<service>.example.com\"}\n"}},
			`test.yaml:14:3: networkEndpointGroups[neg-osaka].cloudRun.service: cloudRun.service is required (fix: set service: NAME; Spillway maps a fixed service only (it does not derive one from each request through urlMask))`},
		{"base URL with a path", []edit{{"\"https://127.6.1.1:18443\"", "\"https://127.6.1.1:18443/run\""}},
			`test.yaml:4:31: spillway.serverless[1].baseUrl: "https://127.6.1.1:18443/run" has a path, query, fragment or user (fix: write an https:// URL with a host and optional port, no path, e.g. https://{service}.run.internal:8443)`},
		{"base URL over http", []edit{{"\"https://127.6.1.1:18443\"", "\"http://127.6.1.1:18080\""}},
			`test.yaml:4:31: spillway.serverless[1].baseUrl: "http://127.6.1.1:18080" does not start with https:// (fix: write an https:// URL with a host and optional port, no path, e.g. https://{service}.run.internal:8443)`},
		{"resolver address without port", []edit{{"address: \"127.0.0.1:53\"", "address: \"127.0.0.1\""}},
			`test.yaml:5:14: spillway.resolver.address: "127.0.0.1" is not host:port (fix: write host:port, e.g. 127.0.0.1:53)`},
		{"fqdn that is not a DNS name", []edit{{"{fqdn: origin.example.com}", "{fqdn: \"origin example\"}"}},
			`test.yaml:20:6: networkEndpointGroups[neg-origin].endpoints[0].fqdn: "origin example" is not a DNS name (fix: write a fully qualified DNS name such as backend.example.com)`},
		{"fqdn group with an IP endpoint", []edit{{"{fqdn: origin.example.com}", "{fqdn: origin.example.com, ipAddress: 10.0.0.1}"}},
			`test.yaml:20:32: networkEndpointGroups[neg-origin].endpoints[0].ipAddress: an INTERNET_FQDN_PORT endpoint has an fqdn, not an ipAddress (fix: write the endpoint as fqdn: NAME (INTERNET_IP_PORT groups are not supported))`},
		{"fqdn group without a region", []edit{{"- name: neg-origin\n  region: asia-northeast1\n", "- name: neg-origin\n"}},
			`test.yaml:15:3: networkEndpointGroups[neg-origin].region: an INTERNET_FQDN_PORT group needs a region in Spillway (fix: set region: to the region whose clients this group should be nearest to (a Spillway extension: Google's internet NEGs are global), e.g. region: us-east1)`},
		{"health check on a serverless service", []edit{{"  loadBalancingScheme: EXTERNAL_MANAGED\n", "  loadBalancingScheme: EXTERNAL_MANAGED\n  healthChecks: [hc]\n"}, {"backendServices:\n", "healthChecks:\n- {name: hc, type: TCP, tcpHealthCheck: {port: 443}}\nbackendServices:\n"}},
			"test.yaml:26:3: backendServices[bs-default].healthChecks: backendServices[bs-default].backends[neg-tokyo] uses SERVERLESS group \"neg-tokyo\", and serverless network endpoint groups take no health checks (fix: remove healthChecks; use outlierDetection to eject a failing serverless group)\n" +
				"test.yaml:26:3: backendServices[bs-default].healthChecks: backendServices[bs-default].backends[neg-osaka] uses SERVERLESS group \"neg-osaka\", and serverless network endpoint groups take no health checks (fix: remove healthChecks; use outlierDetection to eject a failing serverless group)"},
		{"utilization on a non-serverless NEG", []edit{{"  - {group: neg-origin}\n", "  - {group: neg-origin, balancingMode: UTILIZATION}\n"}},
			`test.yaml:30:25: backendServices[bs-origin].backends[neg-origin].balancingMode: UTILIZATION is not available for network endpoint groups (fix: use RATE with maxRatePerEndpoint)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(serverlessEdit(t, tt.edits)), "test.yaml")
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", err, tt.want)
			}
		})
	}
}
