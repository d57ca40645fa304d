package config

import (
	"strings"
	"testing"
)

// geoLocs replaces dnsBase's locations list.
const geoLocs = "locations: [{cidr: 10.0.0.0/8, region: us-east1}]"

func TestDNSLocationKeys(t *testing.T) {
	const db = "geoDatabase: /var/lib/GeoLite2-Country.mmdb\n    "
	for _, tc := range []struct {
		name, locs string
		want       string // "" = valid
	}{
		{"country and continent", db + "locations: [{country: JP, region: asia-northeast1}, {continent: EU, region: europe-west1}, {cidr: 10.0.0.0/8, region: us-east1}]", ""},
		{"Kosovo", db + "locations: [{country: XK, region: europe-west3}]", ""},
		{"lower-case country", db + "locations: [{country: jp, region: asia-northeast1}]", `locations[0].country: "jp" is not an ISO 3166-1 alpha-2 country code (fix: write JP`},
		{"UK", db + "locations: [{country: UK, region: europe-west2}]", `"UK" is not an ISO 3166-1 alpha-2 country code (fix: write GB`},
		{"unknown country", db + "locations: [{country: ZZ, region: us-east1}]", `locations[0].country: "ZZ" is not an ISO 3166-1 alpha-2 country code`},
		{"three letters", db + "locations: [{country: JPN, region: us-east1}]", `"JPN" is not an ISO 3166-1 alpha-2`},
		{"unknown continent", db + "locations: [{continent: EA, region: us-east1}]", `locations[0].continent: "EA" is not a continent code (fix: use one of AF, AN, AS, EU, NA, OC, SA)`},
		{"lower-case continent", db + "locations: [{continent: eu, region: us-east1}]", `(fix: write EU`},
		{"two keys", db + "locations: [{country: JP, continent: AS, region: us-east1}]", "locations[0]: cidr, country and continent are exclusive"},
		{"no key", db + "locations: [{region: us-east1}]", "locations[0]: a cidr, country or continent is required"},
		{"no region", db + "locations: [{country: JP}]", "locations[0].region: a region is required"},
		{"duplicate country", db + "locations: [{country: JP, region: a}, {country: JP, region: b}]", "locations[1]: country JP is already locations[0]"},
		{"duplicate cidr", "locations: [{cidr: 10.0.0.0/8, region: a}, {cidr: 10.0.0.0/8, region: b}]", "locations[1]: cidr 10.0.0.0/8 is already locations[0]"},
		{"country needs database", "locations: [{country: JP, region: asia-northeast1}]", "locations[0].country: a country entry needs a geoDatabase (fix: set geoDatabase"},
		{"continent needs database", "locations: [{continent: EU, region: europe-west1}]", "locations[0].continent: a continent entry needs a geoDatabase"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(dnsBase, geoLocs, tc.locs, 1)), "dns.yaml")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid config rejected:\n%v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got:\n%v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDNSLatencyPolicy(t *testing.T) {
	const member = "{name: a, address: 192.0.2.1, region: us-east1, healthCheck: hc}"
	for _, tc := range []struct {
		name, policy, member string
		want                 string // "" = valid
	}{
		{"bias", "LATENCY", "{name: a, address: 192.0.2.1, region: us-east1, bias: -40}", ""},
		{"bias bounds", "LATENCY", "{name: a, address: 192.0.2.1, region: us-east1, bias: 99}", ""},
		{"bias out of range", "LATENCY", "{name: a, address: 192.0.2.1, region: us-east1, bias: 100}", "members[a].bias: bias 100 is out of range (fix: use -99 to 99"},
		{"bias too low", "LATENCY", "{name: a, address: 192.0.2.1, region: us-east1, bias: -100}", "bias -100 is out of range"},
		{"bias needs LATENCY", "GEO", "{name: a, address: 192.0.2.1, region: us-east1, bias: 10}", "members[a].bias: bias is only used by the LATENCY policy (fix: set policy: LATENCY"},
		{"LATENCY needs regions", "LATENCY", "{name: a, address: 192.0.2.1}", "members[a].region: the LATENCY policy needs a region for every member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := strings.Replace(dnsBase, member, tc.member, 1)
			cfg = strings.Replace(cfg, "policy: GEO", "policy: "+tc.policy, 1)
			_, err := Parse([]byte(cfg), "dns.yaml")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid config rejected:\n%v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got:\n%v\nwant an error containing %q", err, tc.want)
			}
		})
	}
	// locations and geoDatabase serve LATENCY as they serve GEO.
	cfg := strings.Replace(dnsBase, "policy: GEO", "policy: LATENCY\n    geoDatabase: /x.mmdb", 1)
	if _, err := Parse([]byte(cfg), "dns.yaml"); err != nil {
		t.Fatalf("LATENCY with locations rejected:\n%v", err)
	}
}
