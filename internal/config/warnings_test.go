package config

import (
	"strings"
	"testing"
)

func TestWarningsForRegexMatch(t *testing.T) {
	c, err := Parse([]byte(`
networkEndpointGroups: [{name: neg, zone: us-east1-b, endpoints: [{ipAddress: 10.0.0.1, port: 80}]}]
backendServices: [{name: bs, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 10}]}]
urlMaps:
- name: um
  defaultService: bs
  hostRules: [{hosts: ["*"], pathMatcher: pm}]
  pathMatchers:
  - name: pm
    defaultService: bs
    routeRules:
    - priority: 1
      service: bs
      matchRules:
      - regexMatch: "/v[0-9]+/.*"
        headerMatches: [{headerName: x-id, regexMatch: "[a-z]+"}]
        queryParameterMatches: [{name: q, regexMatch: "a.*"}]
    - priority: 2
      service: bs
      matchRules: [{prefixMatch: /}]
frontends: [{name: web, address: "127.0.0.1:8080", urlMap: um}]
`), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := c.Warnings()
	want := []string{
		"urlMaps[um].pathMatchers[pm].routeRules[priority=1].matchRules[0].regexMatch:",
		"urlMaps[um].pathMatchers[pm].routeRules[priority=1].matchRules[0].headerMatches[0].regexMatch:",
		"urlMaps[um].pathMatchers[pm].routeRules[priority=1].matchRules[0].queryParameterMatches[q].regexMatch:",
	}
	if len(w) != len(want) {
		t.Fatalf("got %d warnings, want %d: %q", len(w), len(want), w)
	}
	for i := range want {
		if !strings.HasPrefix(w[i], want[i]) || !strings.Contains(w[i], "rejects regexMatch") {
			t.Errorf("warning %d = %q, want prefix %q", i, w[i], want[i])
		}
	}
}

// NET_HTTP cannot refuse ambiguous framing on TLS connections (net/http
// drops the evidence before a handler runs, and a listener sees only
// ciphertext): a config that combines it with an HTTPS frontend is warned.
func TestWarningsForNetHTTPWithHTTPS(t *testing.T) {
	base := `
networkEndpointGroups: [{name: neg, zone: us-east1-b, endpoints: [{ipAddress: 10.0.0.1, port: 80}]}]
backendServices: [{name: bs, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 10}]}]
urlMaps: [{name: um, defaultService: bs}]
frontends:
- {name: plain, address: "127.0.0.1:8080", protocol: HTTP, urlMap: um}
- {name: tls, address: "127.0.0.1:8443", protocol: HTTPS, urlMap: um, certificates: [{certificateFile: c.pem, privateKeyFile: k.pem}]}
`
	for _, tc := range []struct {
		extra string
		want  bool
	}{
		{"", false},
		{"spillway: {http1Server: SPILLWAY}\n", false},
		{"spillway: {http1Server: NET_HTTP}\n", true},
	} {
		c, err := Parse([]byte(base+tc.extra), "w.yaml")
		if err != nil {
			t.Fatal(err)
		}
		got := false
		for _, w := range c.Warnings() {
			if strings.HasPrefix(w, "spillway.http1Server:") && strings.Contains(w, "frontends[1]") {
				got = true
			}
		}
		if got != tc.want {
			t.Errorf("%q: warning %v, want %v (%q)", tc.extra, got, tc.want, c.Warnings())
		}
	}
}

// Every backend of a service at capacityScaler 0 is how Google drains a
// whole service, so it is accepted, but the service then answers 503 to
// every request: a warning names it. One backend at 0 is not warned.
func TestWarningsForServiceWithNoCapacity(t *testing.T) {
	base := `
networkEndpointGroups:
- {name: neg-a, zone: us-east1-b, endpoints: [{ipAddress: 10.0.0.1, port: 80}]}
- {name: neg-b, zone: us-east1-c, endpoints: [{ipAddress: 10.0.0.2, port: 80}]}
backendServices:
- name: bs-other
  backends: [{group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 10}]
- name: bs
  backends:
  - {group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 10, capacityScaler: 0}
  - {group: neg-b, balancingMode: RATE, maxRatePerEndpoint: 10, capacityScaler: %s}
urlMaps: [{name: um, defaultService: bs}]
`
	for _, tc := range []struct {
		scaler string
		want   []string
	}{
		{"0", []string{"backendServices[bs].backends: every backend of backend service bs has capacityScaler 0, so every request routed to it gets 503 until a capacityScaler is raised above 0"}},
		{"0.0", []string{"backendServices[bs].backends: every backend of backend service bs has capacityScaler 0, so every request routed to it gets 503 until a capacityScaler is raised above 0"}},
		{"0.5", nil},
	} {
		c, err := Parse([]byte(strings.Replace(base, "%s", tc.scaler, 1)), "w.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range c.Warnings() {
			if strings.HasPrefix(w, "backendServices") {
				got = append(got, w)
			}
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("capacityScaler %s: warnings %q, want %q", tc.scaler, got, tc.want)
		}
	}
}

// Fields that are set, accepted and have no effect (or less than in
// Google Cloud) are warned, each once, with what Google Cloud would do;
// settings Spillway honours are not.
func TestWarningsForIgnoredFields(t *testing.T) {
	tests := []struct {
		name  string
		edits []edit
		want  []string // warning prefixes, in order
	}{
		{"nothing ignored", nil, nil},
		{"draining shorter than the timeout", []edit{{"- name: bs-east-pref\n", "- name: bs-east-pref\n  connectionDraining: {drainingTimeoutSec: 10}\n"}},
			[]string{"backendServices[bs-east-pref].connectionDraining.drainingTimeoutSec: Spillway does not cut requests in flight"}},
		{"draining as long as the timeout", []edit{{"- name: bs-east-pref\n", "- name: bs-east-pref\n  timeoutSec: 30\n  connectionDraining: {drainingTimeoutSec: 300}\n"}}, nil},
		{"header variables", []edit{{"- name: bs-east-pref\n", "- name: bs-east-pref\n  customRequestHeaders: [\"X-Geo: {client_region},{client_city}\", \"X-TLS: {tls_version}\", \"X-Odd: {colour}\"]\n  customResponseHeaders: [\"X-RTT: {client_rtt_msec}\"]\n"}},
			[]string{
				"backendServices[bs-east-pref].customRequestHeaders[0]: Spillway cannot know {client_region}, {client_city}",
				"backendServices[bs-east-pref].customRequestHeaders[2]: {colour} is not a Google Cloud header variable",
				"backendServices[bs-east-pref].customResponseHeaders[0]: Spillway cannot know {client_rtt_msec}",
			}},
		{"logging", []edit{{"- name: bs-east-pref\n", "- name: bs-east-pref\n  logConfig: {enable: true}\n"}, {"- name: hc-web\n", "- name: hc-web\n  logConfig: {enable: true}\n"}},
			[]string{"healthChecks[hc-web].logConfig.enable:", "backendServices[bs-east-pref].logConfig.enable:"}},
		{"logging off", []edit{{"- name: bs-east-pref\n", "- name: bs-east-pref\n  logConfig: {enable: false}\n"}}, nil},
		{"isolation", []edit{{"  failoverConfig: {failoverHealthThreshold: 70}\n", "  failoverConfig: {failoverHealthThreshold: 70}\n  isolationConfig: {isolationGranularity: REGION, isolationMode: NEAREST}\n"}},
			[]string{"serviceLbPolicies[policy-web].isolationConfig: accepted and not enforced"}},
		{"failover backend", []edit{{"    maxRatePerEndpoint: 100\n  - group: neg-south\n", "    maxRatePerEndpoint: 100\n    failover: true\n  - group: neg-south\n"}},
			[]string{"backendServices[bs-east-pref].backends[neg-east].failover:"}},
		{"weighted round robin", []edit{{"- name: bs-east-pref\n", "- name: bs-east-pref\n  localityLbPolicy: WEIGHTED_ROUND_ROBIN\n"}},
			[]string{"backendServices[bs-east-pref].localityLbPolicy: WEIGHTED_ROUND_ROBIN"}},
		{"JSON content types without JSON parsing", []edit{{"- name: bs-east-pref\n", "- name: bs-east-pref\n  securityPolicy: sp\n"}, {"urlMaps:", jsonPolicy("") + "urlMaps:"}},
			[]string{"securityPolicies[sp].advancedOptionsConfig.jsonCustomConfig: has no effect without jsonParsing: STANDARD"}},
		{"JSON content types with JSON parsing", []edit{{"- name: bs-east-pref\n", "- name: bs-east-pref\n  securityPolicy: sp\n"}, {"urlMaps:", jsonPolicy("jsonParsing: STANDARD, ") + "urlMaps:"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(apply(t, tt.edits)), "w.yaml")
			if err != nil {
				t.Fatal(err)
			}
			w := c.Warnings()
			if len(w) != len(tt.want) {
				t.Fatalf("got %d warnings, want %d: %q", len(w), len(tt.want), w)
			}
			for i := range tt.want {
				if !strings.HasPrefix(w[i], tt.want[i]) {
					t.Errorf("warning %d = %q, want prefix %q", i, w[i], tt.want[i])
				}
			}
		})
	}
}

// jsonPolicy is a security policy whose advancedOptionsConfig lists a
// JSON content type, after opts.
func jsonPolicy(opts string) string {
	return "securityPolicies:\n- name: sp\n  advancedOptionsConfig: {" + opts + "jsonCustomConfig: {contentTypes: [application/vnd.api+json]}}\n" +
		"  rules: [{priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}]\n"
}

func TestHeaderVariables(t *testing.T) {
	tests := []struct {
		value string
		want  string
	}{
		{"plain", ""},
		{"{client_region},{client_city}", "client_region client_city"},
		{"{a}{b} {unclosed", "a b"},
		{"{} {x y} {ok}", "ok"},
	}
	for _, tt := range tests {
		if got := strings.Join(HeaderVariables(tt.value), " "); got != tt.want {
			t.Errorf("HeaderVariables(%q) = %q, want %q", tt.value, got, tt.want)
		}
	}
	for name, want := range map[string]HeaderVariableSupport{"tls_version": HeaderVariableExpanded, "client_region": HeaderVariableEmpty, "colour": HeaderVariableLiteral} {
		if got := HeaderVariable(name); got != want {
			t.Errorf("HeaderVariable(%q) = %d, want %d", name, got, want)
		}
	}
}

// A retryPolicy whose conditions retry after the backend got the request
// (a response, a reset) replays body-less POST and PATCH requests (RFC
// 9110 §9.2.2): one warning per such policy, naming its field path. Not
// for connect-failure and refused-stream, where the backend did not act
// on the request (RFC 9113 §8.7), nor for a route rule whose every match
// rule admits only idempotent methods.
func TestWarningsForRetryPolicyReplayingPost(t *testing.T) {
	base := `
networkEndpointGroups: [{name: neg, zone: us-east1-b, endpoints: [{ipAddress: 10.0.0.1, port: 80}]}]
backendServices: [{name: bs, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 10}]}]
urlMaps:
- name: um
  defaultService: bs
  hostRules: [{hosts: ["*"], pathMatcher: pm}]
  pathMatchers:
  - name: pm
    defaultService: bs
    routeRules:
    - priority: 1
      service: bs
      matchRules: [MATCH]
      routeAction: {retryPolicy: {retryConditions: [CONDS]}}
`
	const path = "urlMaps[um].pathMatchers[pm].routeRules[priority=1].routeAction.retryPolicy: "
	get := "{prefixMatch: /, headerMatches: [{headerName: ':method', exactMatch: GET}]}"
	for _, tc := range []struct {
		match, conds string
		want         bool
	}{
		{"{prefixMatch: /}", "gateway-error", true},
		{"{prefixMatch: /}", "5xx, gateway-error, connect-failure", true},
		{"{prefixMatch: /}", "retriable-4xx", true},
		{"{prefixMatch: /}", "unavailable", true},
		{"{prefixMatch: /}", "connect-failure, refused-stream", false},
		{get, "5xx", false},
		{get + ", {prefixMatch: /post}", "5xx", true},
		{"{prefixMatch: /, headerMatches: [{headerName: ':method', exactMatch: GET, invertMatch: true}]}", "5xx", true},
		{"{prefixMatch: /, headerMatches: [{headerName: ':method', exactMatch: POST}]}", "5xx", true},
	} {
		c, err := Parse([]byte(strings.NewReplacer("MATCH", tc.match, "CONDS", tc.conds).Replace(base)), "w.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range c.Warnings() {
			if strings.Contains(w, "retryPolicy") {
				got = append(got, w)
			}
		}
		switch {
		case !tc.want && len(got) > 0:
			t.Errorf("%s, [%s]: warned %q, want none", tc.match, tc.conds, got)
		case tc.want && (len(got) != 1 || !strings.HasPrefix(got[0], path) || !strings.Contains(got[0], "POST")):
			t.Errorf("%s, [%s]: warnings %q, want one starting %q", tc.match, tc.conds, got, path)
		}
	}
}

// A signed zone with transfers warns that the secondaries' signatures
// expire unless the serial moves.
func TestWarningsForSignedTransfer(t *testing.T) {
	c := &Config{DNSZones: []DNSZone{{Name: "gslb.example.", DNSSEC: &DNSZoneDNSSEC{}, Transfer: &DNSTransfer{}}, {Name: "plain.example.", Transfer: &DNSTransfer{}}}}
	var got []string
	for _, w := range c.Warnings() {
		if strings.HasPrefix(w, "dnsZones[") {
			got = append(got, w)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "dnsZones[gslb.example.].transfer") || !strings.Contains(got[0], "bump it") {
		t.Fatalf("warnings %q, want one for dnsZones[gslb.example.].transfer", got)
	}
}

// A config with no frontends is valid (simulate and validate use such
// configs), but spillway serve would listen on its admin address only:
// it is warned, first. One frontend, HTTP or DNS, serves something.
func TestWarningNothingServed(t *testing.T) {
	const backends = `
networkEndpointGroups: [{name: neg, zone: us-east1-b, endpoints: [{ipAddress: 10.0.0.1, port: 80}]}]
backendServices: [{name: bs, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 10}]}]
urlMaps: [{name: um, defaultService: bs}]
`
	for _, tc := range []struct {
		name, yaml string
		want       bool
	}{
		{"empty file", "", true},
		{"comments only", "# nothing yet\n", true},
		{"backends, no frontend", backends, true},
		{"HTTP frontend", backends + "frontends: [{name: web, address: '127.0.0.1:8080', urlMap: um}]\n", false},
		{"DNS frontend", "frontends: [{name: dns, address: '127.0.0.1:5353', protocol: DNS}]\n" +
			"dnsZones: [{name: example.com., nameServers: [ns1.example.com.], records: [{name: www, type: A, rrdatas: [192.0.2.1]}]}]\n", false},
	} {
		c, err := Parse([]byte(tc.yaml), "w.yaml")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		w := c.Warnings()
		got := len(w) > 0 && strings.HasPrefix(w[0], "frontends: nothing is served")
		if got != tc.want {
			t.Errorf("%s: warnings %q; want the nothing-served warning first: %v", tc.name, w, tc.want)
		}
	}
}
