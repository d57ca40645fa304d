package armor

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// policy compiles one policy from YAML rules (the default rule allows
// unless given) attached to backend service 0.
func policy(t testing.TB, typ, rules string) *Policy {
	t.Helper()
	y := fmt.Sprintf(`
backendServices:
- name: bs
  %s: sp
securityPolicies:
- name: sp
  type: %s
  rules:
%s`, map[bool]string{true: "edgeSecurityPolicy", false: "securityPolicy"}[typ == "CLOUD_ARMOR_EDGE"], typ, rules)
	if !strings.Contains(rules, "2147483647") {
		y += "  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}\n"
	}
	cfg, err := config.Parse([]byte(y), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, err := Compile(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	edge, backend := set.ForService(0)
	if typ == "CLOUD_ARMOR_EDGE" {
		return edge
	}
	return backend
}

func req(method, path, query, peer string, hdr ...string) *Request {
	r := &Request{Method: method, Path: path, Query: query, Scheme: "http", Host: "shop.example", Peer: netip.MustParseAddr(peer), Header: map[string][]string{}}
	for i := 0; i+1 < len(hdr); i += 2 {
		k := hdr[i]
		r.Header[k] = append(r.Header[k], hdr[i+1])
	}
	return r
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		name, match string
		r           *Request
		want        bool
	}{
		{"ip in range", "{versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['198.51.100.0/24']}}", req("GET", "/", "", "198.51.100.7"), true},
		{"ip out of range", "{versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['198.51.100.0/24']}}", req("GET", "/", "", "198.51.101.7"), false},
		{"ipv6 range", "{versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['2001:db8::/32', '203.0.113.9']}}", req("GET", "/", "", "2001:db8:1::5"), true},
		{"single address", "{versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['2001:db8::/32', '203.0.113.9']}}", req("GET", "/", "", "203.0.113.9"), true},
		{"mapped v4", "{versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['203.0.113.0/24']}}", req("GET", "/", "", "::ffff:203.0.113.9"), true},
		{"path prefix", `{expr: {expression: "request.path.startsWith('/admin')"}}`, req("GET", "/admin/users", "", "192.0.2.1"), true},
		{"path prefix miss", `{expr: {expression: "request.path.startsWith('/admin')"}}`, req("GET", "/shop", "", "192.0.2.1"), false},
		{"header lower", `{expr: {expression: "request.headers['user-agent'].lower().contains('sqlmap')"}}`, req("GET", "/", "", "192.0.2.1", "User-Agent", "SQLMap/1.7"), true},
		{"missing header", `{expr: {expression: "request.headers['x-missing'] == 'a'"}}`, req("GET", "/", "", "192.0.2.1"), false},
		{"method and query", `{expr: {expression: "request.method == 'POST' && request.query.matches('debug=1')"}}`, req("POST", "/", "a=b&debug=1", "192.0.2.1"), true},
		{"inIpRange", `{expr: {expression: "inIpRange(origin.ip, '192.0.2.0/28') && request.scheme == 'http'"}}`, req("GET", "/", "", "192.0.2.5"), true},
		{"inIpRange miss", `{expr: {expression: "inIpRange(origin.ip, '192.0.2.0/28')"}}`, req("GET", "/", "", "192.0.2.50"), false},
		{"host header", `{expr: {expression: "request.headers['host'] == 'shop.example'"}}`, req("GET", "/", "", "192.0.2.1"), true},
		{"base64Decode", `{expr: {expression: "request.headers['x-token'].base64Decode() == 'admin'"}}`, req("GET", "/", "", "192.0.2.1", "X-Token", "YWRtaW4="), true},
		{"urlDecode", `{expr: {expression: "request.query.urlDecode().contains('<script>')"}}`, req("GET", "/", "q=%3Cscript%3E", "192.0.2.1"), true},
		{"region code unknown", `{expr: {expression: "origin.region_code == 'CN'"}}`, req("GET", "/", "", "192.0.2.1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy(t, "CLOUD_ARMOR", "  - {priority: 100, action: deny(403), match: "+tc.match+"}\n")
			d := p.Evaluate(tc.r, time.Unix(0, 0))
			if got := d.Enforced.Priority == 100; got != tc.want {
				t.Fatalf("matched = %v (%+v), want %v", got, d.Enforced, tc.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct{ name, expr, want string }{
		{"unknown attribute", "request.body == 'x'", "undeclared reference"},
		{"macro", "request.headers.exists(h, h == 'x')", "undeclared reference"},
		{"has macro", "has(request.headers.x)", "undeclared reference"},
		{"not bool", "request.path", "not a bool"},
		{"syntax", "request.path ==", "Syntax error"},
		{"waf without engine", "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})", "not available"},
		{"waf non-literal", "evaluatePreconfiguredWaf(request.path)", "literal arguments"},
		{"too long", "request.path == '" + strings.Repeat("a", maxExprBytes) + "'", "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := `
backendServices:
- name: bs
  securityPolicy: sp
securityPolicies:
- name: sp
  rules:
  - {priority: 10, action: deny(403), match: {expr: {expression: "` + tc.expr + `"}}}
  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
`
			cfg, err := config.Parse([]byte(y), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "securityPolicies[sp].rules[0]") {
				t.Fatalf("Compile: %v; want an error naming the rule and containing %q", err, tc.want)
			}
		})
	}
}

func TestActionsAndPreview(t *testing.T) {
	p := policy(t, "CLOUD_ARMOR", `
  - {priority: 1, action: deny(404), preview: true, match: {expr: {expression: "request.path == '/p'"}}}
  - {priority: 5, action: redirect, redirectOptions: {type: EXTERNAL_302, target: "https://example.com/blocked"}, match: {expr: {expression: "request.path == '/r'"}}}
  - {priority: 6, action: allow, headerAction: {requestHeadersToAdds: [{headerName: X-Armor, headerValue: ok}]}, match: {expr: {expression: "request.path == '/a'"}}}
  - {priority: 2147483647, action: deny(502), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
`)
	now := time.Unix(0, 0)
	d := p.Evaluate(req("GET", "/p", "", "192.0.2.1"), now)
	if d.Preview == nil || d.Preview.Status != 404 || d.Enforced.Status != 502 || d.Enforced.Result != "DENY" {
		t.Fatalf("preview rule: %+v / %+v, want preview deny(404) and the default deny(502) enforced", d.Preview, d.Enforced)
	}
	d = p.Evaluate(req("GET", "/r", "", "192.0.2.1"), now)
	if d.Enforced.Result != "REDIRECT" || d.Enforced.Status != 302 || d.Enforced.Location != "https://example.com/blocked" || !d.Enforced.Denied() {
		t.Fatalf("redirect: %+v", d.Enforced)
	}
	d = p.Evaluate(req("GET", "/a", "", "192.0.2.1"), now)
	if d.Enforced.Result != "ACCEPT" || len(d.Enforced.Headers) != 1 || d.Enforced.Headers[0].HeaderName != "X-Armor" || d.Enforced.Denied() {
		t.Fatalf("allow with headers: %+v", d.Enforced)
	}
}

// A throttled key gets the threshold's rate (within 10%) when it sends
// at twice it; another key is not affected.
func TestThrottleRate(t *testing.T) {
	p := policy(t, "CLOUD_ARMOR", `
  - priority: 10
    action: throttle
    match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}
    rateLimitOptions: {rateLimitThreshold: {count: 100, intervalSec: 10}, conformAction: allow, exceedAction: deny(429), enforceOnKey: IP}
`)
	t0 := time.Unix(1000, 0)
	allowed := 0
	const seconds, perSecond = 120, 20 // 2x the 10/s threshold
	for i := range seconds * perSecond {
		now := t0.Add(time.Duration(i) * time.Second / perSecond)
		d := p.Evaluate(req("GET", "/", "", "192.0.2.1"), now)
		switch d.Enforced.RateLimitAction {
		case "RATE_LIMIT_THRESHOLD_CONFORM":
			allowed++
		case "RATE_LIMIT_THRESHOLD_EXCEED":
			if d.Enforced.Status != 429 {
				t.Fatalf("exceed: %+v", d.Enforced)
			}
		default:
			t.Fatalf("unexpected %+v", d.Enforced)
		}
		if i%perSecond == 0 && p.Evaluate(req("GET", "/", "", "192.0.2.99"), now).Enforced.Result != "ACCEPT" {
			t.Fatal("another client's requests were throttled")
		}
	}
	rate := float64(allowed) / seconds
	if rate < 9 || rate > 11 {
		t.Fatalf("allowed %.2f requests/s, want 10 ± 10%%", rate)
	}
}

// A rate_based_ban bans a key over the ban threshold for banDurationSec,
// then lets it back.
func TestBanDuration(t *testing.T) {
	p := policy(t, "CLOUD_ARMOR", `
  - priority: 10
    action: rate_based_ban
    match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}
    rateLimitOptions:
      rateLimitThreshold: {count: 100, intervalSec: 60}
      banThreshold: {count: 20, intervalSec: 10}
      banDurationSec: 60
      conformAction: allow
      exceedAction: deny(403)
      enforceOnKey: HTTP_HEADER
      enforceOnKeyName: X-Api-Key
`)
	t0 := time.Unix(1000, 0)
	key := func(now time.Time) Decision {
		return p.Evaluate(req("GET", "/", "", "192.0.2.1", "X-Api-Key", "k1"), now)
	}
	var bannedAt time.Time
	for i := range 50 {
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if d := key(now); d.Enforced.RateLimitAction == "BAN_THRESHOLD_EXCEED" {
			bannedAt = now
			break
		}
	}
	if bannedAt.IsZero() {
		t.Fatal("50 requests in 5 s did not trip the ban threshold of 20 per 10 s")
	}
	if d := key(bannedAt.Add(59 * time.Second)); d.Enforced.RateLimitAction != "BAN_THRESHOLD_EXCEED" || d.Enforced.Status != 403 {
		t.Fatalf("59 s into a 60 s ban: %+v", d.Enforced)
	}
	if d := key(bannedAt.Add(61 * time.Second)); d.Enforced.Result != "ACCEPT" {
		t.Fatalf("after the ban: %+v", d.Enforced)
	}
	if d := p.Evaluate(req("GET", "/", "", "192.0.2.1", "X-Api-Key", "k2"), bannedAt.Add(time.Second)); d.Enforced.Result != "ACCEPT" {
		t.Fatalf("another key was banned: %+v", d.Enforced)
	}
}

// The limiter's memory is bounded: keys past a shard's room conform and
// are counted as overflow.
func TestLimiterBounded(t *testing.T) {
	p := policy(t, "CLOUD_ARMOR", `
  - priority: 10
    action: throttle
    match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}
    rateLimitOptions: {rateLimitThreshold: {count: 1, intervalSec: 60}, conformAction: allow, exceedAction: deny(429), enforceOnKey: HTTP_PATH}
`)
	now := time.Unix(1000, 0)
	n := limiterShards*maxKeysPerShard + 5000
	for i := range n {
		p.Evaluate(req("GET", fmt.Sprintf("/%d", i), "", "192.0.2.1"), now)
	}
	l := p.rules[0].limit
	total := 0
	for i := range l.shards {
		total += len(l.shards[i].rate.cur)
	}
	if total > limiterShards*maxKeysPerShard || l.overflow.Load() == 0 {
		t.Fatalf("%d keys held, %d overflowed; want at most %d held and some overflow", total, l.overflow.Load(), limiterShards*maxKeysPerShard)
	}
}

func TestUserIPHeader(t *testing.T) {
	y := `
  - {priority: 10, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['203.0.113.0/24']}}}
`
	p := policy(t, "CLOUD_ARMOR", y)
	p.userIP = []string{"X-Real-IP"}
	if d := p.Evaluate(req("GET", "/", "", "192.0.2.1", "X-Real-Ip", "203.0.113.5"), time.Unix(0, 0)); d.Enforced.Status != 403 {
		t.Fatalf("the user IP header was not used: %+v", d.Enforced)
	}
	if d := p.Evaluate(req("GET", "/", "", "192.0.2.1", "X-Real-Ip", "garbage"), time.Unix(0, 0)); d.Enforced.Result != "ACCEPT" {
		t.Fatalf("an invalid user IP header: %+v, want the peer's address used", d.Enforced)
	}
}
