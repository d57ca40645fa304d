package config

import (
	"strings"
	"testing"
)

func TestDNSCalculatedCheck(t *testing.T) {
	const old = "healthCheck: hc}"
	for _, tc := range []struct {
		name, checks string
		want         string // "" = valid
	}{
		{"2 of 3", "{layer: SHALLOW, calculated: {minHealthy: 2, checks: [{name: hc, address: 10.0.0.1}, {name: hc, address: 10.0.0.2}, {name: hc}]}}", ""},
		{"beside a plain check", "{name: hc}, {layer: DEEP, calculated: {minHealthy: 1, checks: [{name: hc, address: 10.0.0.1}]}}", ""},
		{"name and calculated", "{name: hc, calculated: {minHealthy: 1, checks: [{name: hc}]}}", "healthChecks[hc].name: name and calculated are exclusive"},
		{"no children", "{calculated: {minHealthy: 1, checks: []}}", "healthChecks[0].calculated.checks: at least one child check is required"},
		{"minHealthy 0", "{calculated: {minHealthy: 0, checks: [{name: hc}]}}", "healthChecks[0].calculated.minHealthy: minHealthy 0 is out of range (fix: use 1 to 1"},
		{"minHealthy above M", "{calculated: {minHealthy: 3, checks: [{name: hc}, {name: hc, address: 10.0.0.1}]}}", "minHealthy 3 is out of range (fix: use 1 to 2"},
		{"bad address", "{calculated: {minHealthy: 1, checks: [{name: hc, address: 10.0.0.1:80}]}}", `calculated.checks[hc].address: "10.0.0.1:80" is not an IP address`},
		{"duplicate child", "{calculated: {minHealthy: 1, checks: [{name: hc, address: 10.0.0.1}, {name: hc, address: 10.0.0.1}]}}", "calculated.checks[1]: hc at 10.0.0.1 is already checks[0]"},
		{"duplicate member address", "{calculated: {minHealthy: 1, checks: [{name: hc}, {name: hc}]}}", "calculated.checks[1]: hc at the member's address is already checks[0]"},
		{"unknown child", "{calculated: {minHealthy: 1, checks: [{name: hc-x}]}}", `calculated.checks[hc-x].name: unknown health check "hc-x"`},
		{"serving-port child", "{calculated: {minHealthy: 1, checks: [{name: hc-serving}]}}", `calculated.checks[hc-serving].name: health check "hc-serving" probes the serving port`},
		{"unnamed child", "{calculated: {minHealthy: 1, checks: [{address: 10.0.0.1}]}}", "calculated.checks[0].name: a health check name is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(dnsBase, old, "healthChecks: ["+tc.checks+"]}", 1)), "dns.yaml")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid config rejected:\n%v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got:\n%v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDNSMemberBackendService(t *testing.T) {
	for _, tc := range []struct {
		name, member, want string
	}{
		{"valid", "{name: a, address: 192.0.2.1, region: us-east1, backendService: web}", ""},
		{"unknown", "{name: a, address: 192.0.2.1, region: us-east1, backendService: webb}", `members[a].backendService: unknown backend service "webb"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := strings.Replace(dnsBase, "{name: a, address: 192.0.2.1, region: us-east1, healthCheck: hc}", tc.member, 1)
			_, err := Parse([]byte(cfg), "dns.yaml")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid config rejected:\n%v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got:\n%v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}
