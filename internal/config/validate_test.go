package config

import (
	"errors"
	"strings"
	"testing"
)

// baseConfig is a small valid configuration; the invalid cases below each
// change one piece of it. The line numbers in the expected messages refer
// to this text (the comments give the line numbers).
const baseConfig = `healthChecks:
- name: hc-web
  type: HTTP
  checkIntervalSec: 5
  httpHealthCheck: {requestPath: /healthz}
serviceLbPolicies:
- name: policy-web
  failoverConfig: {failoverHealthThreshold: 70}
networkEndpointGroups:
- name: neg-east
  zone: us-east1-b
  defaultPort: 8080
  endpoints:
  - {ipAddress: 10.0.0.1}
- name: neg-south
  zone: us-south1-a
  endpoints:
  - {ipAddress: 10.0.1.1, port: 8080}
instanceGroups:
- name: ig-west
  zone: us-west1-a
  namedPorts: [{name: http, port: 80}]
  instances: [{name: vm-1, ipAddress: 10.0.2.1}]
backendServices:
- name: bs-east-pref
  healthChecks: [hc-web]
  serviceLbPolicy: policy-web
  backends:
  - group: neg-east
    balancingMode: RATE
    maxRatePerEndpoint: 100
  - group: neg-south
    balancingMode: RATE
    maxRatePerEndpoint: 100
    capacityScaler: 1
- name: bs-south-pref
  backends:
  - group: ig-west
urlMaps:
- name: web-map
  defaultRouteAction:
    weightedBackendServices:
    - {backendService: bs-south-pref, weight: 50}
    - {backendService: bs-east-pref, weight: 50}
  hostRules:
  - hosts: [example.com]
    pathMatcher: paths
  pathMatchers:
  - name: paths
    defaultService: bs-east-pref
    pathRules:
    - paths: [/api/*]
      service: bs-south-pref
  - name: routes
    defaultService: bs-east-pref
    routeRules:
    - priority: 1
      matchRules: [{prefixMatch: /a}]
      service: bs-east-pref
regions:
- {name: us-east1, latitude: 33.2, longitude: -80.0}
frontends:
- name: web
  address: 127.0.0.1:8080
  urlMap: web-map
spillway: {undrainHoldSec: 60}
`

// edit is one text substitution applied to baseConfig: old must occur
// exactly once.
type edit struct{ old, new string }

// apply returns baseConfig with the edits applied.
func apply(t *testing.T, edits []edit) string {
	t.Helper()
	s := baseConfig
	for _, e := range edits {
		if n := strings.Count(s, e.old); n != 1 {
			t.Fatalf("edit %q matches %d times in the base config, want 1", e.old, n)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	return s
}

func TestBaseConfigIsValid(t *testing.T) {
	if _, err := Parse([]byte(baseConfig), "test.yaml"); err != nil {
		t.Fatalf("base config: %v", err)
	}
}

// TestBuiltinRegionsNeedNoEntry: a frontend in a built-in Google Cloud
// region with no backends there, and rttMs to one, need no regions[]
// entry of their own.
func TestBuiltinRegionsNeedNoEntry(t *testing.T) {
	for _, edits := range [][]edit{
		{{"  urlMap: web-map\n", "  urlMap: web-map\n  region: europe-north1\n"}},
		{{"  urlMap: web-map\n", "  urlMap: web-map\n  region: regions/asia-northeast1\n"}},
		{{"longitude: -80.0}", "longitude: -80.0, rttMs: {europe-west1: 90}}"}},
	} {
		if _, err := Parse([]byte(apply(t, edits)), "test.yaml"); err != nil {
			t.Errorf("%v: %v", edits, err)
		}
	}
}

func TestBuiltinRegionsSorted(t *testing.T) {
	l := BuiltinRegions()
	for i := 1; i < len(l); i++ {
		if l[i-1] >= l[i] {
			t.Fatalf("builtinRegions not sorted at %q, %q", l[i-1], l[i])
		}
	}
	if !BuiltinRegion("europe-north1") || BuiltinRegion("us-east2") {
		t.Error("BuiltinRegion(europe-north1) or BuiltinRegion(us-east2) wrong")
	}
}

func TestInvalidConfigs(t *testing.T) {
	tests := []struct {
		name  string
		edits []edit
		want  string
	}{
		{"capacity scaler between 0 and 0.1", []edit{{"capacityScaler: 1", "capacityScaler: 0.05"}},
			`test.yaml:35:5: backendServices[bs-east-pref].backends[neg-south].capacityScaler: 0.05 is out of range (fix: use 0 to drain the backend, or a value between 0.1 and 1.0)`},
		{"capacity scaler above 1", []edit{{"capacityScaler: 1", "capacityScaler: 1.5"}},
			`test.yaml:35:5: backendServices[bs-east-pref].backends[neg-south].capacityScaler: 1.5 is out of range (fix: use 0 to drain the backend, or a value between 0.1 and 1.0)`},
		{"dangling weighted backend service", []edit{{"{backendService: bs-south-pref, weight: 50}", "{backendService: bs-sotuh-pref, weight: 50}"}},
			`test.yaml:43:8: urlMaps[web-map].defaultRouteAction.weightedBackendServices[bs-sotuh-pref].backendService: unknown backend service "bs-sotuh-pref" (fix: did you mean "bs-south-pref"? known: bs-east-pref, bs-south-pref)`},
		{"unknown field with suggestion", []edit{{"{backendService: bs-east-pref, weight: 50}", "{backendService: bs-east-pref, weigth: 50}"}},
			`test.yaml:44:38: urlMaps[web-map].defaultRouteAction.weightedBackendServices[bs-east-pref]: unknown field "weigth" (fix: did you mean "weight"?)`},
		{"integer field given text", []edit{{"  serviceLbPolicy: policy-web\n", "  timeoutSec: abc\n"}},
			`test.yaml:27:15: backendServices[bs-east-pref].timeoutSec: want an integer, got "abc" (fix: write a whole number such as 30)`},
		{"duplicate key", []edit{{"    maxRatePerEndpoint: 100\n    capacityScaler: 1", "    maxRatePerEndpoint: 100\n    maxRatePerEndpoint: 200"}},
			`test.yaml:35:5: backendServices[bs-east-pref].backends[neg-south].maxRatePerEndpoint: duplicate key (first set on line 34) (fix: keep only one "maxRatePerEndpoint")`},
		{"missing name", []edit{{"- name: policy-web", "- description: no name"}, {"  serviceLbPolicy: policy-web\n", "\n"}},
			`test.yaml:7:3: serviceLbPolicies[0].name: a name is required (fix: give the service LB policy a name, e.g. name: policy-web)`},
		{"invalid name", []edit{{"- name: neg-south\n", "- name: NEG_South\n"}, {"  - group: neg-south\n", "  - group: NEG_South\n"}},
			`test.yaml:15:3: networkEndpointGroups[NEG_South].name: "NEG_South" is not a valid name (fix: use 1-63 lowercase letters, digits and '-', starting with a letter and not ending with '-', e.g. "neg-us-east1-b")`},
		{"duplicate name", []edit{{"- name: bs-south-pref", "- name: bs-east-pref"}},
			"test.yaml:36:3: backendServices[1].name: \"bs-east-pref\" is already the name of backendServices[0] (fix: give each backend service its own name)\ntest.yaml:43:8: urlMaps[web-map].defaultRouteAction.weightedBackendServices[bs-south-pref].backendService: unknown backend service \"bs-south-pref\" (fix: known: bs-east-pref)\ntest.yaml:53:7: urlMaps[web-map].pathMatchers[paths].pathRules[0].service: unknown backend service \"bs-south-pref\" (fix: known: bs-east-pref)"},
		{"health check type not supported", []edit{{"  type: HTTP\n", "  type: SSL\n"}, {"{requestPath: /healthz}", "{}"}},
			`test.yaml:3:3: healthChecks[hc-web].type: type SSL is not supported yet (fix: use HTTP, HTTPS, HTTP2, TCP, GRPC or GRPC_WITH_TLS)`},
		{"gRPC block under an HTTP type", []edit{{"httpHealthCheck: {requestPath: /healthz}", "grpcHealthCheck: {grpcServiceName: web}"}},
			`test.yaml:5:3: healthChecks[hc-web].grpcHealthCheck: grpcHealthCheck does not match type HTTP (fix: rename it to httpHealthCheck, or set type: GRPC)`},
		{"gRPC service name not ASCII", []edit{{"  type: HTTP\n", "  type: GRPC\n"}, {"httpHealthCheck: {requestPath: /healthz}", "grpcHealthCheck: {grpcServiceName: \"caf\u00e9\"}"}},
			`test.yaml:5:21: healthChecks[hc-web].grpcHealthCheck.grpcServiceName: "caf\u00e9" has a character outside printable ASCII (fix: use printable ASCII characters only, e.g. grpc.health.v1.Health or my.pkg.Service)`},
		{"health check sub-object does not match type", []edit{{"  type: HTTP\n", "  type: TCP\n"}},
			`test.yaml:5:3: healthChecks[hc-web].httpHealthCheck: httpHealthCheck does not match type TCP (fix: rename it to tcpHealthCheck, or set type: HTTP)`},
		{"named port specification", []edit{{"{requestPath: /healthz}", "{portSpecification: USE_NAMED_PORT}"}},
			`test.yaml:5:21: healthChecks[hc-web].httpHealthCheck.portSpecification: USE_NAMED_PORT is not supported by the load balancer (fix: use USE_SERVING_PORT (the backend service's port) or USE_FIXED_PORT)`},
		{"probe timeout longer than interval", []edit{{"  checkIntervalSec: 5\n", "  checkIntervalSec: 5\n  timeoutSec: 10\n"}},
			`test.yaml:5:3: healthChecks[hc-web].timeoutSec: timeoutSec 10 is longer than checkIntervalSec 5 (fix: make the timeout at most the check interval)`},
		{"probe interval shorter than default timeout", []edit{{"  checkIntervalSec: 5\n", "  checkIntervalSec: 2\n"}},
			`test.yaml:4:3: healthChecks[hc-web].checkIntervalSec: checkIntervalSec 2 is shorter than timeoutSec 5 (the default) (fix: set timeoutSec to at most the check interval)`},
		{"threshold out of range", []edit{{"  checkIntervalSec: 5\n", "  healthyThreshold: 11\n"}},
			`test.yaml:4:3: healthChecks[hc-web].healthyThreshold: 11 is out of range (fix: use a value between 1 and 10)`},
		{"request path without slash", []edit{{"{requestPath: /healthz}", "{requestPath: healthz}"}},
			`test.yaml:5:21: healthChecks[hc-web].httpHealthCheck.requestPath: "healthz" does not start with '/' (fix: write it as "/healthz")`},
		{"spray to world", []edit{{"  failoverConfig: {failoverHealthThreshold: 70}", "  loadBalancingAlgorithm: SPRAY_TO_WORLD"}},
			`test.yaml:8:3: serviceLbPolicies[policy-web].loadBalancingAlgorithm: SPRAY_TO_WORLD is not supported by Spillway yet (fix: use WATERFALL_BY_REGION, SPRAY_TO_REGION or WATERFALL_BY_ZONE)`},
		{"failover threshold out of range", []edit{{"failoverHealthThreshold: 70", "failoverHealthThreshold: 100"}},
			`test.yaml:8:20: serviceLbPolicies[policy-web].failoverConfig.failoverHealthThreshold: 100 is out of range (fix: use a value between 1 and 99)`},
		{"zone without letter", []edit{{"zone: us-east1-b", "zone: us-east1"}},
			`test.yaml:11:3: networkEndpointGroups[neg-east].zone: "us-east1" is not a zone name (fix: write a zone as <region>-<letter>, e.g. us-south1-a, or set region explicitly)`},
		{"endpoint IP with port", []edit{{"{ipAddress: 10.0.0.1}", "{ipAddress: \"10.0.0.1:80\"}"}},
			`test.yaml:14:6: networkEndpointGroups[neg-east].endpoints[0].ipAddress: "10.0.0.1:80" is not an IP address (fix: write an IPv4 or IPv6 address such as 10.0.0.5 or 2001:db8::5, without a port)`},
		{"duplicate endpoint", []edit{{"  - {ipAddress: 10.0.0.1}\n", "  - {ipAddress: 10.0.0.1}\n  - {ipAddress: 10.0.0.1, port: 8080}\n"}},
			`test.yaml:15:5: networkEndpointGroups[neg-east].endpoints[1]: 10.0.0.1:8080 is already endpoints[0] of this group (fix: remove the duplicate endpoint)`},
		{"endpoint without port", []edit{{"  defaultPort: 8080\n", "  description: no default port\n"}},
			`test.yaml:14:5: networkEndpointGroups[neg-east].endpoints[0].port: a port is required (fix: set port on the endpoint, or defaultPort on the group)`},
		{"missing named port", []edit{{"- name: bs-south-pref\n", "- name: bs-south-pref\n  portName: web\n"}},
			`test.yaml:37:3: backendServices[bs-south-pref].portName: instance group "ig-west" has no named port "web" (fix: add namedPorts: [{name: web, port: 80}] to instance group "ig-west", or set portName to one of http)`},
		{"unknown group", []edit{{"  - group: neg-south\n", "  - group: neg-sotuh\n"}},
			`test.yaml:32:5: backendServices[bs-east-pref].backends[neg-sotuh].group: unknown instance group or network endpoint group "neg-sotuh" (fix: did you mean "neg-south"? known: ig-west, neg-east, neg-south)`},
		{"group is a link to the wrong kind", []edit{{"  - group: neg-south\n", "  - group: projects/p/global/backendServices/neg-south\n"}},
			`test.yaml:32:5: backendServices[bs-east-pref].backends[neg-south].group: "projects/p/global/backendServices/neg-south" is a link into backendServices, not to an instance group or network endpoint group (fix: link to …/networkEndpointGroups/neg-south, or write just the name)`},
		{"mixed group kinds", []edit{{"  - group: neg-south\n", "  - group: ig-west\n"}},
			"test.yaml:32:5: backendServices[bs-east-pref].backends[ig-west].group: instance group \"ig-west\" cannot be mixed with the network endpoint group of backends[neg-east] (fix: use a separate backend service for instance groups and for network endpoint groups)\ntest.yaml:34:5: backendServices[bs-east-pref].backends[ig-west].maxRatePerEndpoint: maxRatePerEndpoint applies to network endpoint groups only (fix: use maxRatePerInstance instead)"},
		{"same group twice", []edit{{"  - group: neg-south\n", "  - group: zones/us-east1-b/networkEndpointGroups/neg-east\n"}},
			`test.yaml:32:5: backendServices[bs-east-pref].backends[1].group: group "neg-east" is already backends[0] (fix: list each group once per backend service)`},
		{"utilization on a NEG", []edit{{"    balancingMode: RATE\n    maxRatePerEndpoint: 100\n    capacityScaler: 1", "    balancingMode: UTILIZATION\n    maxRatePerEndpoint: 100\n    capacityScaler: 1"}},
			`test.yaml:33:5: backendServices[bs-east-pref].backends[neg-south].balancingMode: UTILIZATION is not available for network endpoint groups (fix: use RATE with maxRatePerEndpoint)`},
		{"connection mode on a NEG of an HTTP service", []edit{{"    balancingMode: RATE\n    maxRatePerEndpoint: 100\n    capacityScaler: 1", "    balancingMode: CONNECTION\n    maxConnectionsPerEndpoint: 100\n    capacityScaler: 1"}},
			`test.yaml:33:5: backendServices[bs-east-pref].backends[neg-south].balancingMode: CONNECTION is not available for backend services with protocol HTTP (fix: use RATE with maxRatePerEndpoint; CONNECTION is for TCP, SSL and UDP backend services)`},
		{"connection mode on an instance group of an HTTP2 service", []edit{{"- name: bs-south-pref\n", "- name: bs-south-pref\n  protocol: HTTP2\n"}, {"  - group: ig-west\n", "  - group: ig-west\n    balancingMode: CONNECTION\n    maxConnections: 10\n"}},
			`test.yaml:40:5: backendServices[bs-south-pref].backends[ig-west].balancingMode: CONNECTION is not available for backend services with protocol HTTP2 (fix: use RATE with maxRatePerInstance, or UTILIZATION; CONNECTION is for TCP, SSL and UDP backend services)`},
		{"connection target with rate", []edit{{"    maxRatePerEndpoint: 100\n    capacityScaler: 1", "    maxRatePerEndpoint: 100\n    maxConnectionsPerEndpoint: 100"}},
			`test.yaml:35:5: backendServices[bs-east-pref].backends[neg-south].maxConnectionsPerEndpoint: maxConnectionsPerEndpoint does not apply with balancingMode RATE (fix: remove it; connection targets are for TCP, SSL and UDP backend services)`},
		{"rate without target", []edit{{"    maxRatePerEndpoint: 100\n    capacityScaler: 1", "    capacityScaler: 1"}},
			`test.yaml:33:5: backendServices[bs-east-pref].backends[neg-south].balancingMode: balancingMode RATE needs a target rate (fix: set one of maxRate, maxRatePerEndpoint)`},
		{"rate with two targets", []edit{{"    maxRatePerEndpoint: 100\n    capacityScaler: 1", "    maxRatePerEndpoint: 100\n    maxRate: 1000"}},
			`test.yaml:34:5: backendServices[bs-east-pref].backends[neg-south].maxRatePerEndpoint: maxRate and maxRatePerEndpoint are both set; balancingMode RATE takes one target (fix: keep exactly one of maxRate, maxRatePerEndpoint)`},
		{"per-instance rate on a NEG", []edit{{"    maxRatePerEndpoint: 100\n    capacityScaler: 1", "    maxRatePerInstance: 100"}},
			`test.yaml:34:5: backendServices[bs-east-pref].backends[neg-south].maxRatePerInstance: maxRatePerInstance applies to instance groups only (fix: use maxRatePerEndpoint instead)`},
		{"draining the only backend", []edit{{"  - group: ig-west\n", "  - group: ig-west\n    capacityScaler: 0\n"}},
			`test.yaml:39:5: backendServices[bs-south-pref].backends[ig-west].capacityScaler: 0 would drain the only backend of the service (fix: add another backend before draining this one, or use a value between 0.1 and 1.0)`},
		{"max utilization with rate", []edit{{"    maxRatePerEndpoint: 100\n    capacityScaler: 1", "    maxRatePerEndpoint: 100\n    maxUtilization: 0.8"}},
			`test.yaml:35:5: backendServices[bs-east-pref].backends[neg-south].maxUtilization: maxUtilization does not apply with balancingMode RATE (fix: remove it, or use balancingMode UTILIZATION)`},
		{"two health checks", []edit{{"[hc-web]", "[hc-web, hc-web]"}},
			`test.yaml:26:3: backendServices[bs-east-pref].healthChecks: 2 health checks are listed; a backend service takes at most one (fix: keep one health check)`},
		{"unknown health check", []edit{{"[hc-web]", "[hc-wbe]"}},
			`test.yaml:26:18: backendServices[bs-east-pref].healthChecks[0]: unknown health check "hc-wbe" (fix: did you mean "hc-web"? known: hc-web)`},
		{"service LB policy link to the wrong collection", []edit{{"serviceLbPolicy: policy-web", "serviceLbPolicy: projects/p/locations/global/healthChecks/policy-web"}},
			`test.yaml:27:3: backendServices[bs-east-pref].serviceLbPolicy: "projects/p/locations/global/healthChecks/policy-web" is a link into healthChecks, not to a service LB policy (fix: link to …/serviceLbPolicies/policy-web, or write just the name)`},
		{"service LB policy on a classic backend service", []edit{{"  serviceLbPolicy: policy-web\n", "  serviceLbPolicy: policy-web\n  loadBalancingScheme: EXTERNAL\n"}},
			`test.yaml:27:3: backendServices[bs-east-pref].serviceLbPolicy: serviceLbPolicy cannot be set with loadBalancingScheme EXTERNAL (the classic Application Load Balancer) (fix: remove it, or use loadBalancingScheme EXTERNAL_MANAGED)`},
		{"header affinity without header", []edit{{"  serviceLbPolicy: policy-web\n", "  sessionAffinity: HEADER_FIELD\n"}},
			`test.yaml:27:3: backendServices[bs-east-pref].sessionAffinity: HEADER_FIELD needs consistentHash.httpHeaderName (fix: name the header to hash, e.g. consistentHash: {httpHeaderName: X-User})`},
		{"misspelt enum", []edit{{"  serviceLbPolicy: policy-web\n", "  localityLbPolicy: ROUND_ROBBIN\n"}},
			`test.yaml:27:3: backendServices[bs-east-pref].localityLbPolicy: unknown value "ROUND_ROBBIN" (fix: did you mean "ROUND_ROBIN"? use one of ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV, WEIGHTED_ROUND_ROBIN)`},
		{"custom header without colon", []edit{{"  serviceLbPolicy: policy-web\n", "  customRequestHeaders: [X-Region-us]\n"}},
			`test.yaml:27:26: backendServices[bs-east-pref].customRequestHeaders[0]: "X-Region-us" is not of the form "Name: value" (fix: write it as "Name: value", e.g. "X-TLS-Version: {tls_version}")`},
		{"outlier percentage", []edit{{"  serviceLbPolicy: policy-web\n", "  outlierDetection: {maxEjectionPercent: 101}\n"}},
			`test.yaml:27:22: backendServices[bs-east-pref].outlierDetection.maxEjectionPercent: 101 is out of range (fix: use a value between 0 and 100)`},
		{"all weights zero", []edit{{"bs-south-pref, weight: 50}", "bs-south-pref, weight: 0}"}, {"bs-east-pref, weight: 50}", "bs-east-pref, weight: 0}"}},
			`test.yaml:42:5: urlMaps[web-map].defaultRouteAction.weightedBackendServices: all weights are 0, so no traffic can be sent (fix: give at least one backend service a weight above 0)`},
		{"weight too large", []edit{{"bs-south-pref, weight: 50}", "bs-south-pref, weight: 1001}"}},
			`test.yaml:43:39: urlMaps[web-map].defaultRouteAction.weightedBackendServices[bs-south-pref].weight: 1001 is out of range (fix: use a value between 0 and 1000)`},
		{"weight too large and the other 0", []edit{{"bs-south-pref, weight: 50}", "bs-south-pref, weight: 1001}"}, {"bs-east-pref, weight: 50}", "bs-east-pref, weight: 0}"}},
			`test.yaml:43:39: urlMaps[web-map].defaultRouteAction.weightedBackendServices[bs-south-pref].weight: 1001 is out of range (fix: use a value between 0 and 1000)`},
		{"negative weight and the other 0", []edit{{"bs-south-pref, weight: 50}", "bs-south-pref, weight: 0}"}, {"bs-east-pref, weight: 50}", "bs-east-pref, weight: -1}"}},
			`test.yaml:44:38: urlMaps[web-map].defaultRouteAction.weightedBackendServices[bs-east-pref].weight: -1 is out of range (fix: use a value between 0 and 1000)`},
		{"two default actions", []edit{{"- name: web-map\n", "- name: web-map\n  defaultService: bs-east-pref\n"}},
			`test.yaml:40:3: urlMaps[web-map]: defaultService and defaultRouteAction.weightedBackendServices are both set; they exclude each other (fix: keep exactly one of defaultService, defaultUrlRedirect, defaultRouteAction.weightedBackendServices)`},
		{"no default action", []edit{{"    defaultService: bs-east-pref\n    pathRules:", "    pathRules:"}},
			`test.yaml:49:5: urlMaps[web-map].pathMatchers[paths]: no default action is set (fix: set one of defaultService, defaultUrlRedirect, defaultRouteAction.weightedBackendServices)`},
		{"path rules and route rules", []edit{{"    routeRules:\n", "    pathRules: [{paths: [/b], service: bs-east-pref}]\n    routeRules:\n"}},
			`test.yaml:57:5: urlMaps[web-map].pathMatchers[routes].routeRules: a path matcher takes pathRules or routeRules, not both (fix: move the pathRules into routeRules (prefixMatch or fullPathMatch), or use a second path matcher)`},
		{"duplicate priority", []edit{{"      service: bs-east-pref\n", "      service: bs-east-pref\n    - {priority: 1, matchRules: [{prefixMatch: /b}], service: bs-east-pref}\n"}},
			`test.yaml:60:8: urlMaps[web-map].pathMatchers[routes].routeRules[1].priority: priority 1 is already used by routeRules[0] (fix: give each route rule of the path matcher its own priority (gaps are fine))`},
		{"two path matches", []edit{{"[{prefixMatch: /a}]", "[{prefixMatch: /a, fullPathMatch: /a}]"}},
			`test.yaml:58:20: urlMaps[web-map].pathMatchers[routes].routeRules[priority=1].matchRules[0]: prefixMatch and fullPathMatch are both set; they exclude each other (fix: keep exactly one of prefixMatch, fullPathMatch, regexMatch, pathTemplateMatch)`},
		{"invalid regex", []edit{{"[{prefixMatch: /a}]", "[{regexMatch: \"/a(\"}]"}},
			"test.yaml:58:21: urlMaps[web-map].pathMatchers[routes].routeRules[priority=1].matchRules[0].regexMatch: invalid regular expression: missing closing ): `/a(` (fix: write an RE2 regular expression (see https://github.com/google/re2/wiki/Syntax))"},
		{"ignore case with regex", []edit{{"[{prefixMatch: /a}]", "[{regexMatch: /a.*, ignoreCase: true}]"}},
			`test.yaml:58:39: urlMaps[web-map].pathMatchers[routes].routeRules[priority=1].matchRules[0].ignoreCase: ignoreCase does not apply to regexMatch (fix: remove it and write (?i) at the start of the regex)`},
		{"header match with two matchers", []edit{{"[{prefixMatch: /a}]", "[{prefixMatch: /a, headerMatches: [{headerName: x-a, exactMatch: a, presentMatch: true}]}]"}},
			`test.yaml:58:54: urlMaps[web-map].pathMatchers[routes].routeRules[priority=1].matchRules[0].headerMatches[0]: exactMatch and presentMatch are both set; they exclude each other (fix: keep exactly one of exactMatch, prefixMatch, suffixMatch, regexMatch, presentMatch, rangeMatch)`},
		{"empty header range", []edit{{"[{prefixMatch: /a}]", "[{prefixMatch: /a, headerMatches: [{headerName: x-a, rangeMatch: {rangeStart: 5, rangeEnd: 5}}]}]"}},
			`test.yaml:58:72: urlMaps[web-map].pathMatchers[routes].routeRules[priority=1].matchRules[0].headerMatches[0].rangeMatch: rangeStart 5 is not below rangeEnd 5 (fix: make rangeStart smaller than rangeEnd (rangeEnd is exclusive))`},
		{"misplaced star in path", []edit{{"[/api/*]", "[/api*]"}},
			`test.yaml:52:15: urlMaps[web-map].pathMatchers[paths].pathRules[0].paths[0]: "/api*" has a misplaced '*' (fix: use '*' only as the last character, right after '/', e.g. /videos/*)`},
		{"query in path", []edit{{"[/api/*]", "[\"/api?x=1\"]"}},
			`test.yaml:52:15: urlMaps[web-map].pathMatchers[paths].pathRules[0].paths[0]: "/api?x=1" contains '?' or '#' (fix: remove the query or fragment; paths match without them)`},
		{"misplaced star in host", []edit{{"[example.com]", "[\"www.*.example.com\"]"}},
			`test.yaml:46:13: urlMaps[web-map].hostRules[0].hosts[0]: "www.*.example.com" has a misplaced '*' (fix: use '*' only as the first character, followed by '.' or '-' (e.g. *.example.com), or alone)`},
		{"duplicate host", []edit{{"    pathMatcher: paths\n", "    pathMatcher: paths\n  - {hosts: [example.com], pathMatcher: routes}\n"}},
			`test.yaml:48:14: urlMaps[web-map].hostRules[1].hosts[0]: "example.com" is already listed in hostRules[0] (fix: list each host in one host rule only)`},
		{"unknown path matcher", []edit{{"pathMatcher: paths", "pathMatcher: pahts"}},
			`test.yaml:47:5: urlMaps[web-map].hostRules[0].pathMatcher: unknown path matcher "pahts" (fix: did you mean "paths"? known: paths, routes)`},
		{"retries out of range", []edit{{"    - {backendService: bs-east-pref, weight: 50}\n", "    - {backendService: bs-east-pref, weight: 50}\n    retryPolicy: {numRetries: 30, retryConditions: [5xx, gateway_error]}\n"}},
			"test.yaml:45:19: urlMaps[web-map].defaultRouteAction.retryPolicy.numRetries: 30 is out of range (fix: use a value between 1 and 25)\ntest.yaml:45:58: urlMaps[web-map].defaultRouteAction.retryPolicy.retryConditions[1]: unknown value \"gateway_error\" (fix: did you mean \"gateway-error\"? use one of 5xx, gateway-error, connect-failure, retriable-4xx, refused-stream, cancelled, deadline-exceeded, internal, resource-exhausted, unavailable)"},
		{"fault abort status", []edit{{"    - {backendService: bs-east-pref, weight: 50}\n", "    - {backendService: bs-east-pref, weight: 50}\n    faultInjectionPolicy: {abort: {httpStatus: 600, percentage: 10}}\n"}},
			`test.yaml:45:36: urlMaps[web-map].defaultRouteAction.faultInjectionPolicy.abort.httpStatus: 600 is out of range (fix: use an HTTP status between 200 and 599, e.g. 503)`},
		{"redirect code", []edit{{"    defaultService: bs-east-pref\n    pathRules:", "    defaultUrlRedirect: {redirectResponseCode: MOVED, pathRedirect: /a, prefixRedirect: /b}\n    pathRules:"}},
			"test.yaml:50:5: urlMaps[web-map].pathMatchers[paths].defaultUrlRedirect: pathRedirect and prefixRedirect are both set; they exclude each other (fix: keep one of pathRedirect and prefixRedirect)\ntest.yaml:50:26: urlMaps[web-map].pathMatchers[paths].defaultUrlRedirect.redirectResponseCode: unknown value \"MOVED\" (fix: use one of MOVED_PERMANENTLY_DEFAULT, FOUND, SEE_OTHER, TEMPORARY_REDIRECT, PERMANENT_REDIRECT)"},
		{"url map test without expectation", []edit{{"  pathMatchers:\n", "  tests: [{host: example.com, path: /}]\n  pathMatchers:\n"}},
			`test.yaml:48:11: urlMaps[web-map].tests[0]: the test expects nothing (fix: set service (the backend service expected), or expectedOutputUrl and expectedRedirectResponseCode for a redirect)`},
		{"latitude out of range", []edit{{"latitude: 33.2", "latitude: 91"}},
			`test.yaml:61:20: regions[us-east1].latitude: 91 is out of range (fix: use a value between -90 and 90)`},
		{"frontend address without port", []edit{{"127.0.0.1:8080", "127.0.0.1"}},
			`test.yaml:64:3: frontends[web].address: "127.0.0.1" has no port (fix: write host:port, e.g. 0.0.0.0:8080, :8080 or [::1]:8443)`},
		{"https frontend without certificate", []edit{{"  urlMap: web-map\n", "  urlMap: web-map\n  protocol: HTTPS\n"}},
			`test.yaml:63:3: frontends[web].certificates: HTTPS needs at least one certificate (fix: add certificates: [{certificateFile: cert.pem, privateKeyFile: key.pem}], or sslCertificates: [NAME])`},
		{"frontend without URL map", []edit{{"  urlMap: web-map\n", "  region: us-east1\n"}},
			`test.yaml:63:3: frontends[web].urlMap: a URL map is required for HTTP (fix: name the URL map that routes this frontend's requests)`},
		{"frontend in unknown region", []edit{{"  urlMap: web-map\n", "  urlMap: web-map\n  region: us-east2\n"}},
			`test.yaml:66:3: frontends[web].region: unknown region "us-east2" (fix: did you mean "us-east1"? use a region of this config (us-east1) or a built-in Google Cloud region such as us-east1, us-east4, us-east5, or add it to regions[] with a latitude and longitude or rttMs)`},
		{"rttMs to an unknown region", []edit{{"longitude: -80.0}", "longitude: -80.0, rttMs: {mars-1: 5}}"}},
			`test.yaml:61:62: regions[us-east1].rttMs.mars-1: unknown region "mars-1" (fix: use a region of this config (us-east1) or a built-in Google Cloud region such as me-west1, us-east1, us-west1, or add it to regions[] with a latitude and longitude or rttMs)`},
		{"tuning out of range", []edit{{"{undrainHoldSec: 60}", "{undrainHoldSec: 60, demandWindowSec: 0}"}},
			`test.yaml:66:32: spillway.demandWindowSec: 0 is out of range (fix: use a value between 1 and 60)`},
		{"access log format and rate", []edit{{"{undrainHoldSec: 60}", "{undrainHoldSec: 60, accessLog: {enable: true, format: XML, sampleRate: 2}}"}},
			"test.yaml:66:58: spillway.accessLog.format: unknown value \"XML\" (fix: use one of JSON, TEXT)\ntest.yaml:66:71: spillway.accessLog.sampleRate: 2 is out of range (fix: use a value between 0 and 1)"},
		{"logConfig sample rate", []edit{{"  serviceLbPolicy: policy-web\n", "  logConfig: {enable: true, sampleRate: 1.5, optionalMode: CUSTOM}\n"}},
			`test.yaml:27:29: backendServices[bs-east-pref].logConfig.sampleRate: 1.5 is out of range (fix: use a value between 0 and 1)`},
		{"several errors at once", []edit{{"capacityScaler: 1", "capacityScaler: 0.05"}, {"latitude: 33.2", "latitude: 91"}, {"failoverHealthThreshold: 70", "failoverHealthThreshold: 0"}},
			"test.yaml:8:20: serviceLbPolicies[policy-web].failoverConfig.failoverHealthThreshold: 0 is out of range (fix: use a value between 1 and 99)\ntest.yaml:35:5: backendServices[bs-east-pref].backends[neg-south].capacityScaler: 0.05 is out of range (fix: use 0 to drain the backend, or a value between 0.1 and 1.0)\ntest.yaml:61:20: regions[us-east1].latitude: 91 is out of range (fix: use a value between -90 and 90)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(apply(t, tt.edits)), "test.yaml")
			if err == nil {
				t.Fatalf("Parse succeeded, want error:\n%s", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse error:\n got: %s\nwant: %s", got, tt.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.File != "test.yaml" || fe.Path == "" || fe.Fix == "" {
				t.Errorf("first error %+v lacks file, path or fix", fe)
			}
		})
	}
}
