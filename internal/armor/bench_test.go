package armor

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuNanos is the process's user and system CPU time: on a shared,
// loaded machine it tracks the work better than the wall clock, which
// counts the time other processes hold the CPUs.
func cpuNanos(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportCPU reports the CPU time per iteration since t0 (cpuNanos) as
// cpu-ns/op.
func reportCPU(b *testing.B, t0 int64) {
	b.ReportMetric(float64(cpuNanos(b)-t0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkEvaluate measures a policy of 10 source-range rules and 10
// expression rules, none of which matches, so every rule is evaluated
// before the default rule allows.
func BenchmarkEvaluate(b *testing.B) {
	var rules strings.Builder
	for i := range 10 {
		fmt.Fprintf(&rules, "  - {priority: %d, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['198.51.%d.0/24', '2001:db8:%x::/48']}}}\n", 10+i, i, i)
	}
	exprs := []string{
		"request.path.startsWith('/admin')",
		"request.headers['user-agent'].lower().contains('sqlmap')",
		"request.method == 'TRACE'",
		"inIpRange(origin.ip, '203.0.113.0/24')",
		"request.query.contains('union select')",
		"request.headers['x-forwarded-host'] == 'evil.example'",
		"request.path.matches('.*[.]php$')",
		"origin.region_code == 'ZZ'",
		"request.headers['referer'].contains('spam.example')",
		"request.scheme == 'http' && request.path == '/login'",
	}
	for i, e := range exprs {
		fmt.Fprintf(&rules, "  - {priority: %d, action: deny(403), match: {expr: {expression: \"%s\"}}}\n", 100+i, e)
	}
	p := policy(b, "CLOUD_ARMOR", rules.String())
	r := req("GET", "/shop/items", "page=2", "192.0.2.10",
		"User-Agent", "Mozilla/5.0 (X11; Linux x86_64)", "Accept", "text/html", "Accept-Language", "en", "Referer", "https://shop.example/", "Cookie", "s=1")
	now := time.Unix(0, 0)
	b.ReportAllocs()
	t0 := cpuNanos(b)
	for b.Loop() {
		if d := p.Evaluate(r, now); d.Enforced.Priority != 2147483647 {
			b.Fatal(d.Enforced)
		}
	}
	reportCPU(b, t0)
}

// BenchmarkEvaluateIPOnly is the same policy's 10 source-range rules
// alone.
func BenchmarkEvaluateIPOnly(b *testing.B) {
	var rules strings.Builder
	for i := range 10 {
		fmt.Fprintf(&rules, "  - {priority: %d, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['198.51.%d.0/24']}}}\n", 10+i, i)
	}
	p := policy(b, "CLOUD_ARMOR", rules.String())
	r := req("GET", "/", "", "192.0.2.10")
	now := time.Unix(0, 0)
	b.ReportAllocs()
	t0 := cpuNanos(b)
	for b.Loop() {
		p.Evaluate(r, now)
	}
	reportCPU(b, t0)
}

// BenchmarkThrottle is a throttle rule's cost per request, standalone
// and in fleet mode with 256 keys of another instance to look the
// request's key up in (the SHA-256 of the key and a map lookup).
func BenchmarkThrottle(b *testing.B) {
	for _, fleet := range []bool{false, true} {
		b.Run(map[bool]string{false: "standalone", true: "fleet"}[fleet], func(b *testing.B) {
			sets, srcs := fleetSets(b, 1, throttleRule)
			if fleet {
				var rs RuleShare
				rs.Rule = sets[0].limiters()[0].id
				for i := range MaxSharedKeys {
					rs.Counts = append(rs.Counts, KeyCount{Key: ShareKey(fmt.Sprintf("198.51.100.%d", i)), Rate: 1})
				}
				srcs[0].Store(MergeShares([]RateShare{{Rules: []RuleShare{rs}}}, false))
			}
			_, p := sets[0].ForService(0)
			r := req("GET", "/", "", "192.0.2.10")
			now := time.Unix(0, 0)
			b.ReportAllocs()
			t0 := cpuNanos(b)
			for b.Loop() {
				p.Evaluate(r, now)
			}
			reportCPU(b, t0)
		})
	}
}
