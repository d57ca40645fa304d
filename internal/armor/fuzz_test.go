package armor

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// FuzzCompileExpr feeds arbitrary expressions to the loader: it returns
// a program or an error, never panics, and a program evaluates on a
// request without panicking.
func FuzzCompileExpr(f *testing.F) {
	for _, s := range []string{
		"request.path.startsWith('/admin')",
		"request.headers['user-agent'].lower().contains('bot') || origin.ip == '1.2.3.4'",
		"inIpRange(origin.ip, '10.0.0.0/8') && !request.query.matches('a+b*')",
		"request.headers['x'].base64Decode().urlDecodeUni().utf8ToUnicode().size() > 3",
		"evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1, 'opt_out_rule_ids': ['x']})",
		"evaluatePreconfiguredExpr('xss-stable', ['a', 'b'])",
		"has(request.headers.x)", "[1,2].exists(x, x > 1)", "1 / 0 == 1", "request.path",
		"'\\u00e9'.upper() == request.method", strings.Repeat("(", 100) + "true" + strings.Repeat(")", 100),
	} {
		f.Add(s)
	}
	env, err := newEnv()
	if err != nil {
		f.Fatal(err)
	}
	r := &Request{Method: "GET", Path: "/a", Query: "q=1", Scheme: "http", Host: "h", Peer: netip.MustParseAddr("192.0.2.1"),
		Header: map[string][]string{"User-Agent": {"x"}, "X": {"YWRtaW4="}}}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := compileExpr(env, src, nil, WAFCall{})
		if err != nil {
			return
		}
		a := activation{r: r, p: &Policy{}}
		p.eval(&a)
	})
}

// FuzzEvaluate runs a fixed policy over arbitrary request fields: no
// panic, exactly one enforced rule, and a denial always has a status.
func FuzzEvaluate(f *testing.F) {
	f.Add("GET", "/admin", "a=b", "203.0.113.7", "Mozilla", "k=v", "1.2.3.4, 5.6.7.8")
	f.Add("POST", "/api/x", "", "2001:db8::1", "sqlmap", "", "")
	f.Add("", "", "%zz", "::ffff:10.0.0.1", "\x00\xff", ";;==;", "not-an-ip")
	p := policy(f, "CLOUD_ARMOR", `
  - {priority: 1, action: deny(404), match: {expr: {expression: "request.path.startsWith('/admin') && request.query.urlDecode().contains('b')"}}}
  - {priority: 2, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['203.0.113.0/24', '2001:db8::/32']}}}
  - {priority: 3, action: deny(502), preview: true, match: {expr: {expression: "request.headers['user-agent'].lower().matches('sql.*')"}}}
  - priority: 4
    action: rate_based_ban
    match: {expr: {expression: "request.path.startsWith('/api')"}}
    rateLimitOptions: {rateLimitThreshold: {count: 2, intervalSec: 10}, banDurationSec: 60, conformAction: allow, exceedAction: deny(429), enforceOnKeyConfigs: [{enforceOnKeyType: XFF_IP}, {enforceOnKeyType: HTTP_COOKIE, enforceOnKeyName: k}]}
`)
	p.userIP = []string{"X-Real-Ip"}
	f.Fuzz(func(t *testing.T, method, path, query, peer, ua, cookie, xff string) {
		r := &Request{Method: method, Path: path, Query: query, Scheme: "https", Header: map[string][]string{
			"User-Agent": {ua}, "Cookie": {cookie}, "X-Forwarded-For": {xff}, "X-Real-Ip": {xff}}}
		r.Peer, _ = netip.ParseAddr(peer)
		d := p.Evaluate(r, time.Unix(1000, 0))
		if d.Enforced.Policy != "sp" {
			t.Fatalf("no rule enforced: %+v", d)
		}
		if d.Enforced.Denied() && d.Enforced.Status == 0 {
			t.Fatalf("a denial without a status: %+v", d.Enforced)
		}
	})
}
