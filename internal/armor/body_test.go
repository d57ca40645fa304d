package armor

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// bodyWAF is a WAF whose every set matches a request whose body holds
// "attack", and records how much body it was given.
type bodyWAF struct{ seen *int }

func (w bodyWAF) Compile(WAFCall) (WAFMatcher, error) { return w, nil }

func (w bodyWAF) Match(r *Request) WAFMatch {
	*w.seen = len(r.Body)
	if bytes.Contains(r.Body, []byte("attack")) {
		return WAFMatch{Matched: true, IDs: []string{"owasp-crs-v030301-id942100-sqli"}}
	}
	return WAFMatch{}
}

// A policy needs the body when one of its rules (preview ones included)
// calls the WAF; it inspects its requestBodyInspectionSize of it, and
// nothing past it.
func TestNeedsBody(t *testing.T) {
	const wafRule = "  - {priority: 10, action: deny(403), match: {expr: {expression: \"evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})\"}}}\n"
	for _, tc := range []struct {
		name, size, rules string
		needs             bool
		bytes             int
	}{
		{"source ranges only", "", "  - {priority: 10, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['198.51.100.0/24']}}}\n", false, 8192},
		{"expressions without the WAF", "16KB", "  - {priority: 10, action: deny(403), match: {expr: {expression: \"request.path.startsWith('/admin')\"}}}\n", false, 16384},
		{"a WAF rule", "", wafRule, true, 8192},
		{"a WAF rule, 64KB", "64kb", wafRule, true, 65536},
		{"a preview WAF rule", "32KB", "  - {priority: 10, action: deny(403), preview: true, match: {expr: {expression: \"request.method == 'POST' && evaluatePreconfiguredExpr('xss-stable')\"}}}\n", true, 32768},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := -1
			p := wafPolicy(t, tc.size, tc.rules, bodyWAF{&seen})
			if p.NeedsBody() != tc.needs || p.BodyInspectionSize() != tc.bytes {
				t.Fatalf("NeedsBody %v, BodyInspectionSize %d; want %v, %d", p.NeedsBody(), p.BodyInspectionSize(), tc.needs, tc.bytes)
			}
			if !tc.needs {
				return
			}
			// An attack just inside the inspected size is seen; one
			// just past it is not, and the WAF is given no more.
			for _, at := range []int{tc.bytes - len("attack"), tc.bytes} {
				r := req("POST", "/form", "", "192.0.2.1")
				r.Body = []byte(strings.Repeat("a", at) + "attack")
				d := p.Evaluate(r, time.Unix(0, 0))
				hit := d.Enforced.Result == "DENY" || d.Preview != nil
				if want := at < tc.bytes; hit != want || seen != min(len(r.Body), tc.bytes) {
					t.Errorf("attack at %d: matched %v, WAF saw %d bytes; want %v, %d", at, hit, seen, want, min(len(r.Body), tc.bytes))
				}
				if len(r.Body) != at+len("attack") {
					t.Errorf("Evaluate changed the caller's Request.Body")
				}
			}
		})
	}
}

// wafPolicy compiles a backend policy with rules, a default rule and a
// requestBodyInspectionSize, with waf.
func wafPolicy(t *testing.T, size, rules string, waf WAF) *Policy {
	t.Helper()
	y := fmt.Sprintf(`
backendServices:
- name: bs
  securityPolicy: sp
securityPolicies:
- name: sp
  advancedOptionsConfig: {requestBodyInspectionSize: '%s'}
  rules:
%s  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
`, size, rules)
	cfg, err := config.Parse([]byte(y), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	set, err := Compile(cfg, waf)
	if err != nil {
		t.Fatal(err)
	}
	_, p := set.ForService(0)
	return p
}
