package waf

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/config"
)

// TestForArmorBodySize: the adapter inspects up to 64 KiB of the body it
// is given, and each policy gives it its own requestBodyInspectionSize:
// an attack 20 KiB into a form is denied by a 32KB policy, not by the
// default 8KB one.
func TestForArmorBodySize(t *testing.T) {
	attack := "q=%3Cscript%3Ealert(1)%3C%2Fscript%3E"
	body := []byte("pad=" + strings.Repeat("a", 20<<10) + "&" + attack)
	form := map[string][]string{"Content-Type": {"application/x-www-form-urlencoded"}}
	w := ForArmor(Options{})
	m, err := w.Compile(armor.WAFCall{Set: "xss-v33-stable", Sensitivity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Match(&armor.Request{Method: "POST", Path: "/comment", Host: "shop.example", Header: form, Body: body}).Matched {
		t.Errorf("the adapter did not see an attack 20 KiB into the body")
	}
	y := `
backendServices:
- {name: small, securityPolicy: waf-8k}
- {name: large, securityPolicy: waf-32k}
securityPolicies:
- name: waf-8k
  rules: &rules
  - {priority: 10, action: deny(403), match: {expr: {expression: "evaluatePreconfiguredWaf('xss-v33-stable', {'sensitivity': 1})"}}}
  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
- name: waf-32k
  advancedOptionsConfig: {requestBodyInspectionSize: 32KB}
  rules: *rules
`
	cfg, err := config.Parse([]byte(y), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, err := armor.Compile(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"ACCEPT", "DENY"} {
		_, p := set.ForService(i)
		d := p.Evaluate(&armor.Request{Method: "POST", Path: "/comment", Host: "shop.example", Header: form, Body: body}, time.Unix(0, 0))
		if d.Enforced.Result != want {
			t.Errorf("policy %s: %s, want %s", p.Name, d.Enforced.Result, want)
		}
	}
}

// jsonCustomConfig's content types match a Content-Type's media type
// exactly, in any case, with or without parameters.
func TestJSONTypesPattern(t *testing.T) {
	re := regexp.MustCompile(jsonTypesPattern([]string{"text/x-shop", "Application/Vnd.A+B"}))
	for ct, want := range map[string]bool{
		"text/x-shop": true, "text/x-shop; charset=utf-8": true, "text/x-shop ;v=1": true,
		"application/vnd.a+b": true, "text/x-shopping": false, "text/x-sho": false, "xtext/x-shop": false, "application/vnd_a+b": false,
	} {
		if got := re.MatchString(strings.ToLower(ct)); got != want {
			t.Errorf("%q: %v, want %v (pattern %s)", ct, got, want, re)
		}
	}
	if p := jsonTypesPattern(nil); p != "" {
		t.Errorf("no types: %q", p)
	}
}
