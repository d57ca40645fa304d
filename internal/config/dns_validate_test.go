package config

import (
	"strings"
	"testing"
)

// dnsBase is a valid DNS configuration; each case below replaces one
// piece of it.
const dnsBase = `healthChecks:
- {name: hc, type: HTTP, httpHealthCheck: {port: 8080}}
- {name: hc-serving, type: HTTP, httpHealthCheck: {portSpecification: USE_SERVING_PORT}}
networkEndpointGroups:
- {name: neg, zone: us-east1-b, defaultPort: 80, endpoints: [{ipAddress: 10.0.0.1}]}
backendServices:
- {name: web, backends: [{group: neg}]}
urlMaps:
- {name: web-map, defaultService: web}
frontends:
- {name: dns, address: "127.0.0.1:5300", protocol: DNS}
- {name: web, address: "127.0.0.1:8080", urlMap: web-map, region: us-east1}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: www, type: CNAME, rrdatas: [app.gslb.example.]}
  - {name: mx, type: MX, rrdatas: ["10 mail.gslb.example."]}
  gslbNames:
  - name: app
    policy: GEO
    pool:
      members:
      - {name: a, address: 192.0.2.1, region: us-east1, healthCheck: hc}
    locations: [{cidr: 10.0.0.0/8, region: us-east1}]
  - {name: svc, backendService: web}
`

func TestDNSValid(t *testing.T) {
	if _, err := Parse([]byte(dnsBase), "dns.yaml"); err != nil {
		t.Fatalf("valid DNS config rejected:\n%v", err)
	}
}

func TestDNSLayeredAndPassiveValid(t *testing.T) {
	cfg := strings.Replace(dnsBase, "healthCheck: hc}", "healthChecks: [{name: hc}, {name: hc2, layer: DEEP}, {name: hc3, layer: SYNTHETIC}]}", 1)
	cfg = strings.Replace(cfg, "- {name: hc, type: HTTP", "- {name: hc2, type: HTTP, checkIntervalSec: 15, httpHealthCheck: {port: 8080, requestPath: /deep}}\n- {name: hc3, type: TCP, checkIntervalSec: 60, tcpHealthCheck: {port: 443}}\n- {name: hc, type: HTTP", 1)
	cfg = strings.Replace(cfg, "policy: GEO", "policy: GEO\n    geoDatabase: /var/lib/GeoLite2-City.mmdb\n    passive: {windowSec: 10, maxErrorRate: 0.02, maxP95LatencyMs: 250, minRequests: 20}", 1)
	if _, err := Parse([]byte(cfg), "dns.yaml"); err != nil {
		t.Fatalf("valid layered config rejected:\n%v", err)
	}
}

func TestDNSInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"bad zone name", "- name: gslb.example.", "- name: gslb..example", `dnsZones[gslb..example].name: "gslb..example" is not a domain name`},
		{"no name servers", "nameServers: [ns1.gslb.example.]", "nameServers: []", "dnsZones[gslb.example.].nameServers: at least one name server is required"},
		{"unknown record type", "type: MX", "type: HINFO", `dnsZones[gslb.example.].records[mx].type: unknown value "HINFO"`},
		{"bad MX data", `"10 mail.gslb.example."`, `"mail.gslb.example."`, `dnsZones[gslb.example.].records[mx].rrdatas[0]: "mail.gslb.example." is not valid MX data`},
		{"name outside zone", "{name: mx,", "{name: mx.other.example.,", `dnsZones[gslb.example.].records[mx.other.example.].name: "mx.other.example." is outside zone gslb.example.`},
		{"CNAME clash", "{name: mx,", "{name: www,", `dnsZones[gslb.example.].records[1].name: "www.gslb.example." already has records`},
		{"CNAME loop", "  - {name: www, type: CNAME, rrdatas: [app.gslb.example.]}", "  - {name: www, type: CNAME, rrdatas: [app.gslb.example.]}\n  - {name: a, type: CNAME, rrdatas: [b.gslb.example.]}\n  - {name: b, type: CNAME, rrdatas: [A.gslb.example.]}", `CNAME chain a.gslb.example. → b.gslb.example. → a.gslb.example. loops`},
		{"CNAME to itself", "rrdatas: [app.gslb.example.]", "rrdatas: [www.gslb.example.]", `CNAME chain www.gslb.example. → www.gslb.example. loops`},
		{"GSLB clash", "{name: svc,", "{name: www,", `dnsZones[gslb.example.].gslbNames[www].name: "www.gslb.example." is already used`},
		{"unknown policy", "policy: GEO", "policy: NEAREST", `dnsZones[gslb.example.].gslbNames[app].policy: unknown value "NEAREST"`},
		{"pool and service", "{name: svc, backendService: web}", "{name: svc, backendService: web, pool: {members: [{name: b, address: 192.0.2.2}]}}", "pool and backendService are exclusive"},
		{"bad address", "address: 192.0.2.1", "address: 192.0.2.1:80", `members[a].address: "192.0.2.1:80" is not an IP address`},
		{"geo needs region", "region: us-east1, healthCheck", "healthCheck", "members[a].region: the GEO policy needs a region"},
		{"serving-port check", "healthCheck: hc}", "healthCheck: hc-serving}", `members[a].healthCheck: health check "hc-serving" probes the serving port`},
		{"unknown check", "healthCheck: hc}", "healthCheck: hc-x}", `members[a].healthCheck: unknown health check "hc-x"`},
		{"host bits", "cidr: 10.0.0.0/8", "cidr: 10.0.0.1/8", `locations[0].cidr: "10.0.0.1/8" has host bits set (fix: write 10.0.0.0/8)`},
		{"unknown service", "backendService: web}", "backendService: webb}", `gslbNames[svc].backendService: unknown backend service "webb"`},
		{"no DNS frontend", `{name: dns, address: "127.0.0.1:5300", protocol: DNS}`, `{name: dns, address: "127.0.0.1:5300", urlMap: web-map}`, "dnsZones: no frontend serves the DNS zones"},
		{"transition longer than ttl", "policy: GEO", "policy: GEO\n    ttl: 10", "transitionTtl 15 is longer than ttl 10"},
		{"steps must end at 100", "policy: GEO", "policy: GEO\n    failback: {steps: [10, 50]}", "failback.steps[1]: the last step must be 100, not 50"},
		{"check and checks", "healthCheck: hc}", "healthCheck: hc, healthChecks: [{name: hc}]}", "healthCheck and healthChecks are exclusive"},
		{"unknown layer", "healthCheck: hc}", "healthChecks: [{name: hc, layer: MEDIUM}]}", `members[a].healthChecks[hc].layer: unknown value "MEDIUM"`},
		{"duplicate layered check", "healthCheck: hc}", "healthChecks: [{name: hc}, {name: hc, layer: DEEP}]}", `members[a].healthChecks[1].name: "hc" is already healthChecks[hc]`},
		{"layered serving-port check", "healthCheck: hc}", "healthChecks: [{name: hc}, {name: hc-serving, layer: DEEP}]}", `healthChecks[hc-serving].name: health check "hc-serving" probes the serving port`},
		{"passive error rate range", "policy: GEO", "policy: GEO\n    passive: {maxErrorRate: 1.5}", "passive.maxErrorRate: 1.5 is out of range"},
		{"passive window range", "policy: GEO", "policy: GEO\n    passive: {windowSec: 0}", "passive.windowSec: 0 is out of range"},
		{"geoDatabase needs GEO", "{name: svc, backendService: web}", "{name: svc, backendService: web, geoDatabase: /x.mmdb}", "a geoDatabase is only used by the GEO and LATENCY policies"},
		{"answerCount range", "policy: GEO", "policy: GEO\n    answerCount: 0", "answerCount: 0 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(dnsBase, tc.old) {
				t.Fatalf("base config has no %q", tc.old)
			}
			_, err := Parse([]byte(strings.Replace(dnsBase, tc.old, tc.new, 1)), "dns.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got:\n%v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}
