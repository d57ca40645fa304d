package config

import (
	"strings"
	"testing"
)

// dnsRRLBase is dnsBase with response rate limiting and a signature cap.
var dnsRRLBase = dnsBase + `spillway:
  dnsMaxDenialSignaturesPerSecond: 500
  dnsResponseRateLimit:
    responsesPerSecond: 20
    nxdomainsPerSecond: 10
    errorsPerSecond: 0
    windowSec: 5
    slip: 2
    ipv4PrefixLength: 24
    ipv6PrefixLength: 56
    exempt: [192.0.2.0/24, "2001:db8::1"]
    tableSize: 4096
`

func TestDNSRateLimitValid(t *testing.T) {
	c, err := Parse([]byte(dnsRRLBase), "dns.yaml")
	if err != nil {
		t.Fatalf("valid config rejected:\n%v", err)
	}
	r := c.Spillway.DNSResponseRateLimit
	if got := RateOr(r.NodataPerSecond, r.ResponsesPerSecond); got != 20 {
		t.Errorf("nodataPerSecond unset: %d, want responsesPerSecond's 20", got)
	}
	if got := RateOr(r.ErrorsPerSecond, r.ResponsesPerSecond); got != 0 {
		t.Errorf("errorsPerSecond: 0: %d, want 0 (not limited)", got)
	}
	if got := DNSRRLExempt(r); len(got) != 2 || got[1].String() != "2001:db8::1/128" {
		t.Errorf("exempt: %v", got)
	}
}

func TestDNSRateLimitInvalid(t *testing.T) {
	const p = "spillway.dnsResponseRateLimit"
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"negative rate", "responsesPerSecond: 20", "responsesPerSecond: -1", p + ".responsesPerSecond: -1 is out of range (fix: use 1 to 1000000 responses per second, or 0 for no limit)"},
		{"huge class rate", "nxdomainsPerSecond: 10", "nxdomainsPerSecond: 2000000", p + ".nxdomainsPerSecond: 2000000 is out of range"},
		{"nothing limited", "responsesPerSecond: 20\n    nxdomainsPerSecond: 10", "responsesPerSecond: 0\n    nxdomainsPerSecond: 0", p + ": every rate is 0: nothing would be limited (fix: set responsesPerSecond (e.g. 20), or remove the block)"},
		{"one class is enough", "responsesPerSecond: 20\n", "responsesPerSecond: 0\n", ""},
		{"window", "windowSec: 5", "windowSec: 7200", p + ".windowSec: 7200 is out of range (fix: use 1 to 3600 seconds (default 15))"},
		{"slip", "slip: 2", "slip: 11", p + ".slip: 11 is out of range (fix: use 0 (drop every limited response) to 10"},
		{"slip 0", "slip: 2", "slip: 0", ""},
		{"ipv4 prefix", "ipv4PrefixLength: 24", "ipv4PrefixLength: 33", p + ".ipv4PrefixLength: 33 is out of range (fix: use 1 to 32 (default 24))"},
		{"ipv6 prefix", "ipv6PrefixLength: 56", "ipv6PrefixLength: 129", p + ".ipv6PrefixLength: 129 is out of range"},
		{"table", "tableSize: 4096", "tableSize: 100", p + ".tableSize: 100 is out of range (fix: use 1024 to 16777216 entries"},
		{"exempt", "exempt: [192.0.2.0/24,", "exempt: [192.0.2.1/24,", p + `.exempt[0]: "192.0.2.1/24" has host bits set (192.0.2.0/24 is the subnet) (fix: write a subnet`},
		{"signature cap", "dnsMaxDenialSignaturesPerSecond: 500", "dnsMaxDenialSignaturesPerSecond: -5", "spillway.dnsMaxDenialSignaturesPerSecond: -5 is out of range (fix: use 1 to 1000000 signatures per second, or 0 (or leave it out) for no cap)"},
		{"unknown field", "windowSec: 5", "window: 5", `unknown field "window"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(dnsRRLBase, tc.old) {
				t.Fatalf("base config has no %q", tc.old)
			}
			_, err := Parse([]byte(strings.Replace(dnsRRLBase, tc.old, tc.new, 1)), "dns.yaml")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got:\n%v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}
