package config

import (
	"net/netip"
)

// DNSResponseRateLimit is spillway.dnsResponseRateLimit: response rate
// limiting of the DNS frontends' UDP replies, in BIND's model (docs/dns.md
// "Response rate limiting"). Each client prefix may receive so many
// identical responses per second; past that they are dropped, every
// Slip-th sent truncated. TCP replies are never limited.
type DNSResponseRateLimit struct {
	// ResponsesPerSecond limits positive answers, counted per query name
	// and type. 0 does not limit them.
	ResponsesPerSecond int `json:"responsesPerSecond,omitempty"`
	// ReferralsPerSecond limits referrals, counted per delegation.
	// Unset: ResponsesPerSecond; 0 does not limit them.
	ReferralsPerSecond *int `json:"referralsPerSecond,omitempty"`
	// NxdomainsPerSecond limits NXDOMAIN answers (compact denials of a
	// name included), counted per zone, so that random names under one
	// zone count as one response. Unset: ResponsesPerSecond; 0 does not
	// limit them.
	NxdomainsPerSecond *int `json:"nxdomainsPerSecond,omitempty"`
	// NodataPerSecond limits NODATA answers, counted per zone. Unset:
	// ResponsesPerSecond; 0 does not limit them.
	NodataPerSecond *int `json:"nodataPerSecond,omitempty"`
	// ErrorsPerSecond limits error replies (SERVFAIL, FORMERR, REFUSED,
	// NOTIMP, …), all counted together per prefix. Unset:
	// ResponsesPerSecond; 0 does not limit them.
	ErrorsPerSecond *int `json:"errorsPerSecond,omitempty"`
	// WindowSec is how many seconds of debt a prefix over its rate runs
	// up (BIND's window): 1 to 3600, default 15.
	WindowSec int `json:"windowSec,omitempty"`
	// Slip sends every Slip-th limited response truncated (TC set, no
	// records) instead of dropping it: 0 drops all, 1 truncates all;
	// 0 to 10, default 2.
	Slip *int `json:"slip,omitempty"`
	// IPv4PrefixLength and IPv6PrefixLength are the client prefixes
	// counted together: default 24 and 56.
	IPv4PrefixLength int `json:"ipv4PrefixLength,omitempty"`
	IPv6PrefixLength int `json:"ipv6PrefixLength,omitempty"`
	// Exempt lists client subnets (or addresses) never limited.
	Exempt []string `json:"exempt,omitempty"`
	// TableSize is how many keys (prefix and response) are counted at
	// once, 32 bytes each: 1024 to 16777216, default 65536 (2 MiB).
	TableSize int `json:"tableSize,omitempty"`
	// DryRun counts what would be limited (metrics) and limits nothing.
	DryRun bool `json:"dryRun,omitempty"`
}

// Bounds of spillway.dnsResponseRateLimit and
// spillway.dnsMaxDenialSignaturesPerSecond (internal/rrl clamps to the
// same; a gslb test checks they agree). The defaults are rrl's.
const (
	DNSRRLMaxRate      = 1_000_000
	DNSRRLMaxWindowSec = 3600
	DNSRRLMaxSlip      = 10
	DNSRRLMinTableSize = 1 << 10
	DNSRRLMaxTableSize = 1 << 24
)

// RateOr returns *r, or def when r is unset: a class's rate.
func RateOr(r *int, def int) int {
	if r == nil {
		return def
	}
	return *r
}

// dnsRateLimits validates spillway.dnsResponseRateLimit and
// spillway.dnsMaxDenialSignaturesPerSecond.
func (v *validator) dnsRateLimits() {
	if v.c.Spillway == nil {
		return
	}
	if n := v.c.Spillway.DNSMaxDenialSignaturesPerSecond; n < 0 || n > DNSRRLMaxRate {
		v.add("spillway.dnsMaxDenialSignaturesPerSecond", "use 1 to 1000000 signatures per second, or 0 (or leave it out) for no cap",
			"%d is out of range", n)
	}
	r := v.c.Spillway.DNSResponseRateLimit
	if r == nil {
		return
	}
	const p = "spillway.dnsResponseRateLimit"
	v.rrlRates(p, r)
	v.rrlRange(p+".windowSec", r.WindowSec, 0, DNSRRLMaxWindowSec, "use 1 to 3600 seconds (default 15)")
	if r.Slip != nil {
		v.rrlRange(p+".slip", *r.Slip, 0, DNSRRLMaxSlip, "use 0 (drop every limited response) to 10; 2 (the default) truncates every other one")
	}
	v.rrlRange(p+".ipv4PrefixLength", r.IPv4PrefixLength, 0, 32, "use 1 to 32 (default 24)")
	v.rrlRange(p+".ipv6PrefixLength", r.IPv6PrefixLength, 0, 128, "use 1 to 128 (default 56)")
	if r.TableSize != 0 {
		v.rrlRange(p+".tableSize", r.TableSize, DNSRRLMinTableSize, DNSRRLMaxTableSize, "use 1024 to 16777216 entries (default 65536, 2 MiB)")
	}
	for i, e := range r.Exempt {
		if _, err := ParseTransferPrefix(e); err != nil {
			v.add(at("%s.exempt[%d]", p, i), "write a subnet (192.0.2.0/24, 2001:db8::/48) or an address", "%v", err)
		}
	}
}

// rrlRates validates the per-class rates: each in range, and at least
// one class limited.
func (v *validator) rrlRates(p string, r *DNSResponseRateLimit) {
	const fix = "use 1 to 1000000 responses per second, or 0 for no limit"
	v.rrlRange(p+".responsesPerSecond", r.ResponsesPerSecond, 0, DNSRRLMaxRate, fix)
	limited := r.ResponsesPerSecond > 0
	for _, f := range []struct {
		name string
		rate *int
	}{{"referralsPerSecond", r.ReferralsPerSecond}, {"nxdomainsPerSecond", r.NxdomainsPerSecond}, {"nodataPerSecond", r.NodataPerSecond}, {"errorsPerSecond", r.ErrorsPerSecond}} {
		if f.rate != nil {
			v.rrlRange(p+"."+f.name, *f.rate, 0, DNSRRLMaxRate, fix)
		}
		limited = limited || RateOr(f.rate, r.ResponsesPerSecond) > 0
	}
	if !limited {
		v.add(p, "set responsesPerSecond (e.g. 20), or remove the block", "every rate is 0: nothing would be limited")
	}
}

// rrlRange reports a value outside [lo, hi].
func (v *validator) rrlRange(path string, n, lo, hi int, fix string) {
	if n < lo || n > hi {
		v.add(path, fix, "%d is out of range", n)
	}
}

// DNSRRLExempt parses spillway.dnsResponseRateLimit.exempt (validated).
func DNSRRLExempt(r *DNSResponseRateLimit) []netip.Prefix {
	var out []netip.Prefix
	for _, e := range r.Exempt {
		if p, err := ParseTransferPrefix(e); err == nil {
			out = append(out, p)
		}
	}
	return out
}
