package armor

import (
	"net/netip"
	"testing"

	"cel.dev/cel-go/common/types"
)

// celEval runs p on cel-go, bypassing the native evaluator.
func celEval(p *program, a *activation) bool {
	out, _, err := p.prg.Eval(a)
	if err != nil {
		return false
	}
	b, ok := out.(types.Bool)
	return ok && bool(b)
}

// nativeRequests are requests that exercise present, absent, repeated
// and oddly cased headers, the Host fallback and address forms.
func nativeRequests() []*Request {
	return []*Request{
		req("GET", "/admin/x", "a=1", "192.0.2.1", "User-Agent", "SQLMap/1.0", "X-Token", "abc"),
		req("POST", "/login", "", "2001:db8::5", "User-Agent", "curl", "X-Multi", "a", "X-Multi", "b"),
		req("get", "", "union+select", "::ffff:203.0.113.9", "Host", "h.example"),
		{Method: "PUT", Path: "/p", Host: "shop.example", Header: map[string][]string{"x_odd": {"v"}}},
	}
}

var nativeExprs = []string{
	"request.path.startsWith('/admin')",
	"request.path.endsWith('/x') && request.method == 'GET'",
	"request.method != 'POST' || request.path == '/login'",
	"request.headers['user-agent'].lower().contains('sqlmap')",
	"request.headers['user-agent'].upper() == 'CURL'",
	"request.headers['x-missing'] == 'a' || request.path.startsWith('/admin')",
	"request.headers['x-missing'] == 'a' && false",
	"!(request.headers['x-missing'] == 'a')",
	"request.headers['x-missing'] != 'a' || true",
	"request.headers['x-multi'] == 'a,b'",
	"request.headers['host'] == 'shop.example'",
	"request.headers['Host'] == 'shop.example'",
	"request.headers['x_odd'] == 'v'",
	"request.query.matches('union.select')",
	"inIpRange(origin.ip, '192.0.2.0/24') || inIpRange(origin.ip, '2001:db8::/32')",
	"inIpRange(origin.ip, '203.0.113.0/24')",
	"inIpRange(origin.ip, 'not-a-range')",
	"origin.region_code == '' && request.scheme == 'http'",
	"origin.ip == '192.0.2.1'",
	"true && !false",
}

// The native evaluator agrees with cel-go on every expression and request,
// and covers the common shapes (every expression above).
func TestNativeMatchesCEL(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range nativeExprs {
		p, err := compileExpr(env, src, nil, WAFCall{})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if p.native == nil {
			t.Errorf("%s: not evaluated natively", src)
			continue
		}
		for i, r := range nativeRequests() {
			a1, a2 := activation{r: r, p: &Policy{}}, activation{r: r, p: &Policy{}}
			if got, want := p.eval(&a1), celEval(p, &a2); got != want {
				t.Errorf("%s on request %d: native %v, cel-go %v", src, i, got, want)
			}
		}
	}
}

// The differential check as a fuzz target: any expression the native
// evaluator takes gives cel-go's answer.
func FuzzNativeMatchesCEL(f *testing.F) {
	for _, s := range nativeExprs {
		f.Add(s, "/admin/x", "User-Agent", "SQLMap", "192.0.2.1")
	}
	env, err := newEnv()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src, path, hname, hval, peer string) {
		p, err := compileExpr(env, src, nil, WAFCall{})
		if err != nil || p.native == nil {
			return
		}
		r := &Request{Method: "GET", Path: path, Host: "h", Header: map[string][]string{hname: {hval}}}
		r.Peer, _ = netip.ParseAddr(peer)
		a1, a2 := activation{r: r, p: &Policy{}}, activation{r: r, p: &Policy{}}
		if got, want := p.eval(&a1), celEval(p, &a2); got != want {
			t.Fatalf("%q: native %v, cel-go %v", src, got, want)
		}
	})
}
