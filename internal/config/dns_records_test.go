package config

import (
	"strings"
	"testing"
)

// dnsRecordsBase adds wildcards, a delegation with glue and a DS, CAA and
// a reverse zone with PTR records to dnsBase.
var dnsRecordsBase = strings.Replace(dnsBase, "  gslbNames:\n", `  - {name: "*.wild", type: A, rrdatas: ["192.0.2.7"]}
  - {name: "*.cn", type: CNAME, rrdatas: [www.gslb.example.]}
  - {name: sub, type: NS, rrdatas: [ns1.sub.gslb.example., ns.other.example.]}
  - {name: sub, type: DS, rrdatas: ["12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]}
  - {name: ns1.sub, type: A, rrdatas: ["192.0.2.53"]}
  - {name: "@", type: CAA, rrdatas: ["0 issue \"letsencrypt.org\""]}
  gslbNames:
  - {name: "*.svc2", backendService: web}
`, 1) + `- name: 2.0.192.in-addr.arpa.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: "1", type: PTR, rrdatas: [www.gslb.example.]}
`

func TestDNSRecordsValid(t *testing.T) {
	if _, err := Parse([]byte(dnsRecordsBase), "dns.yaml"); err != nil {
		t.Fatalf("valid config rejected:\n%v", err)
	}
}

func TestDNSRecordsInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"occluded record", "{name: ns1.sub, type: A,", "{name: www.sub, type: TXT,",
			`dnsZones[gslb.example.].records[www.sub].name: "www.sub.gslb.example." is below the delegation of sub.gslb.example. at dnsZones[gslb.example.].records[4]`},
		{"occluded at cut", "{name: ns1.sub, type: A,", "{name: sub, type: A,",
			`dnsZones[gslb.example.].records[6].name: "sub.gslb.example." is delegated by dnsZones[gslb.example.].records[4]`},
		{"GSLB name below cut", `{name: "*.svc2",`, `{name: "x.sub",`,
			`dnsZones[gslb.example.].gslbNames[x.sub].name: "x.sub.gslb.example." is below the delegation of sub.gslb.example.`},
		{"DS without cut", "{name: sub, type: NS, rrdatas: [ns1.sub.gslb.example., ns.other.example.]}", "{name: subx, type: TXT, rrdatas: [x]}",
			`dnsZones[gslb.example.].records[sub].type: a DS record set belongs at a delegation`},
		{"NS at apex", `{name: sub, type: NS,`, `{name: "@", type: NS,`,
			`dnsZones[gslb.example.].records[4].name: the apex's NS records are nameServers`},
		{"wildcard not leftmost", `{name: "*.wild",`, `{name: "a.*.wild",`,
			`dnsZones[gslb.example.].records[a.*.wild].name: "a.*.wild" is not a domain name`},
		{"NS at wildcard", `{name: sub, type: NS,`, `{name: "*.sub", type: NS,`,
			`dnsZones[gslb.example.].records[*.sub].name: a wildcard cannot be delegated`},
		{"bad CAA", `"0 issue \"letsencrypt.org\""`, `"issue letsencrypt.org"`,
			`dnsZones[gslb.example.].records[@].rrdatas[0]: "issue letsencrypt.org" is not valid CAA data`},
		{"bad PTR", `PTR, rrdatas: [www.gslb.example.]}`, `PTR, rrdatas: ["192.0.2.1 x"]}`, `dnsZones[2.0.192.in-addr.arpa.].records[0].rrdatas[0]: "192.0.2.1 x" is not valid PTR data`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(dnsRecordsBase, tc.old) {
				t.Fatalf("base config has no %q", tc.old)
			}
			_, err := Parse([]byte(strings.Replace(dnsRecordsBase, tc.old, tc.new, 1)), "dns.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got:\n%v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}
