package waf

import (
	"reflect"
	"strings"
	"testing"
)

// TestLookupSetNames: every name Google documents resolves to its CRS
// file and ID version; the rest are refused naming what exists.
func TestLookupSetNames(t *testing.T) {
	ok := []struct {
		name    string
		prefix  int
		version string
	}{
		{"sqli-v422-stable", 942, "042200"},
		{"sqli-v422-canary", 942, "042200"},
		{"generic-v422-stable", 934, "042200"},
		{"java-v422-canary", 944, "042200"},
		{"sqli-v33-stable", 942, "030301"},
		{"xss-v33-stable", 941, "030301"},
		{"lfi-v33-stable", 930, "030301"},
		{"rfi-v33-stable", 931, "030301"},
		{"rce-v33-stable", 932, "030301"},
		{"methodenforcement-v33-stable", 911, "030301"},
		{"scannerdetection-v33-stable", 913, "030301"},
		{"protocolattack-v33-stable", 921, "030301"},
		{"sessionfixation-v33-stable", 943, "030301"},
		{"php-v33-stable", 933, "030301"},
		{"nodejs-v33-stable", 934, "030301"},
		{"java-v33-stable", 944, "030301"},
		{"sqli-stable", 942, "030001"},
		{"sqli-canary", 942, "030001"},
		{"xss-stable", 941, "030001"},
		{"sessionfixation-canary", 943, "030001"},
		{"php-stable", 933, "030001"},
		{"json-sqli-canary", 942, ""},
	}
	for _, c := range ok {
		d, err := lookupSet(c.name)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if d.cat.prefix != c.prefix || d.version != c.version {
			t.Errorf("%s: prefix %d version %q, want %d %q", c.name, d.cat.prefix, d.version, c.prefix, c.version)
		}
	}
	bad := []struct{ name, want string }{
		{"sqli", "ends in -stable or -canary"},
		{"sqli-v34-stable", "the versions are -v422"},
		{"nodejs-v422-stable", "generic-v422-stable"},
		{"generic-v33-stable", "nodejs-v33-stable"},
		{"java-stable", "java-v422-stable or java-v33-stable"},
		{"sqlinjection-v33-stable", "CRS 3.3 (-v33) has sqli, xss"},
		{"cve-canary", "java-v422-stable"},
		{"", "ends in -stable or -canary"},
		{"SQLI-v33-stable", "CRS 3.3"},
	}
	for _, c := range bad {
		_, err := lookupSet(c.name)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestParseWaf(t *testing.T) {
	cases := []struct {
		set  string
		opts map[string]any
		want SetRef
		err  string
	}{
		{set: "sqli-v33-stable", want: SetRef{Set: "sqli-v33-stable", Sensitivity: 4}},
		{set: "sqli-v33-stable", opts: map[string]any{"sensitivity": int64(1)}, want: SetRef{Set: "sqli-v33-stable", Sensitivity: 1}},
		{set: "sqli-v33-stable", opts: map[string]any{"sensitivity": 2.0}, want: SetRef{Set: "sqli-v33-stable", Sensitivity: 2}},
		{set: "sqli-v33-stable", opts: map[string]any{"sensitivity": uint64(3)}, want: SetRef{Set: "sqli-v33-stable", Sensitivity: 3}},
		{
			set:  "sqli-v33-stable",
			opts: map[string]any{"sensitivity": 4, "opt_out_rule_ids": []any{"owasp-crs-v030301-id942251-sqli"}},
			want: SetRef{Set: "sqli-v33-stable", Sensitivity: 4, OptOut: []string{"owasp-crs-v030301-id942251-sqli"}},
		},
		{
			set:  "xss-v422-stable",
			opts: map[string]any{"sensitivity": 0, "opt_in_rule_ids": []string{"owasp-crs-v042200-id941100-xss"}},
			want: SetRef{Set: "xss-v422-stable", OptIn: []string{"owasp-crs-v042200-id941100-xss"}},
		},
		{
			set:  "json-sqli-canary",
			opts: map[string]any{"sensitivity": 0, "opt_in_rule_ids": []any{"owasp-crs-id942550-sqli"}},
			want: SetRef{Set: "json-sqli-canary", OptIn: []string{"owasp-crs-id942550-sqli"}},
		},
		{set: "sqli-v33-stable", opts: map[string]any{"sensitivity": 5}, err: "0 (none unless opted in) to 4"},
		{set: "sqli-v33-stable", opts: map[string]any{"sensitivity": -1}, err: "0 (none unless opted in) to 4"},
		{set: "sqli-v33-stable", opts: map[string]any{"sensitivity": 1.5}, err: "integer 0-4"},
		{set: "sqli-v33-stable", opts: map[string]any{"sensitivity": "1"}, err: "integer 0-4"},
		{set: "sqli-v33-stable", opts: map[string]any{"sensitivty": 1}, err: `unknown option "sensitivty"`},
		{set: "sqli-v33-stable", opts: map[string]any{"opt_out_rule_ids": "owasp-crs-v030301-id942251-sqli"}, err: "write a list"},
		{set: "sqli-v33-stable", opts: map[string]any{"opt_out_rule_ids": []any{942251}}, err: "takes strings"},
		{set: "sqli-v33-stable", opts: map[string]any{"opt_in_rule_ids": []any{"owasp-crs-v030301-id942251-sqli"}}, err: `needs "sensitivity": 0`},
		{set: "sqli-v33-stable", opts: map[string]any{"sensitivity": 1, "opt_in_rule_ids": []any{"owasp-crs-v030301-id942251-sqli"}}, err: "needs sensitivity 0"},
		{
			set:  "sqli-v33-stable",
			opts: map[string]any{"sensitivity": 0, "opt_in_rule_ids": []any{"owasp-crs-v030301-id942251-sqli"}, "opt_out_rule_ids": []any{"owasp-crs-v030301-id942100-sqli"}},
			err:  "not both",
		},
		{set: "sqli-v33-stable", opts: map[string]any{"opt_out_rule_ids": []any{"owasp-crs-v030001-id942251-sqli"}}, err: `this set's IDs look like "owasp-crs-v030301-id942100-sqli"`},
		{set: "sqli-v33-stable", opts: map[string]any{"opt_out_rule_ids": []any{"owasp-crs-v030301-id94225-sqli"}}, err: "id and 6 digits"},
		{set: "sqli-v33-stable", opts: map[string]any{"opt_out_rule_ids": []any{"owasp-crs-v030301-id942251-xss"}}, err: "not in category xss"},
		{set: "sqli-v33-stable", opts: map[string]any{"opt_out_rule_ids": []any{"owasp-crs-v030301-id942251-sql"}}, err: `unknown category "sql"`},
		{set: "sqli-v33-stable", opts: map[string]any{"opt_out_rule_ids": []any{"942251"}}, err: "not a signature ID"},
		{set: "sqli-v33-stable", opts: map[string]any{"opt_out_rule_ids": []any{"owasp-crs-v030301-id-42251-sqli"}}, err: "id and 6 digits"},
		{set: "sqli-v34-stable", err: "the versions are"},
	}
	for _, c := range cases {
		got, err := ParseWaf(c.set, c.opts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseWaf(%q, %v): error %v, want one containing %q", c.set, c.opts, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseWaf(%q, %v) = %+v, %v; want %+v", c.set, c.opts, got, err, c.want)
		}
	}
}

func TestParseExpr(t *testing.T) {
	got, err := ParseExpr("xss-stable", []string{"owasp-crs-v030001-id941110-xss"})
	want := SetRef{Set: "xss-stable", Sensitivity: 4, OptOut: []string{"owasp-crs-v030001-id941110-xss"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseExpr = %+v, %v; want %+v", got, err, want)
	}
	if _, err := ParseExpr("xss-stable", []string{"owasp-crs-v030301-id941110-xss"}); err == nil {
		t.Error("ParseExpr accepted a CRS 3.3 ID in a CRS 3.0 set")
	}
	many := make([]string, maxSignatures+1)
	for i := range many {
		many[i] = "owasp-crs-v030001-id941110-xss"
	}
	if _, err := ParseExpr("xss-stable", many); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("ParseExpr with %d IDs: %v", len(many), err)
	}
}

func TestParseCall(t *testing.T) {
	cases := []struct {
		text string
		want SetRef
		err  string
	}{
		{text: "evaluatePreconfiguredWaf('sqli-v33-stable')", want: SetRef{Set: "sqli-v33-stable", Sensitivity: 4}},
		{text: " evaluatePreconfiguredWaf( 'sqli-v33-stable' , { 'sensitivity' : 1 } ) ", want: SetRef{Set: "sqli-v33-stable", Sensitivity: 1}},
		{
			text: "evaluatePreconfiguredWaf(\n  'sqli-v422-stable',\n  {\n    'sensitivity': 4,\n    'opt_out_rule_ids': ['owasp-crs-v042200-id942350-sqli', 'owasp-crs-v042200-id942360-sqli']\n  }\n)",
			want: SetRef{Set: "sqli-v422-stable", Sensitivity: 4, OptOut: []string{"owasp-crs-v042200-id942350-sqli", "owasp-crs-v042200-id942360-sqli"}},
		},
		{
			text: `evaluatePreconfiguredWaf("cve-canary", {"sensitivity": 0})`,
			err:  "java-v422-stable",
		},
		{
			text: "evaluatePreconfiguredExpr('sqli-v33-stable', ['owasp-crs-v030301-id942251-sqli', 'owasp-crs-v030301-id942490-sqli',])",
			want: SetRef{Set: "sqli-v33-stable", Sensitivity: 4, OptOut: []string{"owasp-crs-v030301-id942251-sqli", "owasp-crs-v030301-id942490-sqli"}},
		},
		{text: "evaluatePreconfiguredExpr('xss-stable')", want: SetRef{Set: "xss-stable", Sensitivity: 4}},
		{
			text: "evaluatePreconfiguredWaf('xss-v422-stable', ['owasp-crs-v042200-id941180-xss'])",
			want: SetRef{Set: "xss-v422-stable", Sensitivity: 4, OptOut: []string{"owasp-crs-v042200-id941180-xss"}},
		},
		{
			text: "evaluatePreconfiguredWaf('json-sqli-canary', {'sensitivity':0, 'opt_in_rule_ids': ['owasp-crs-id942550-sqli']})",
			want: SetRef{Set: "json-sqli-canary", OptIn: []string{"owasp-crs-id942550-sqli"}},
		},
		{text: "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1}) || true", err: "after the call"},
		{text: "evaluatePreconfiguredExpr('sqli-v33-stable', {'sensitivity': 1})", err: "second argument is a list"},
		{text: "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1, 'sensitivity': 2})", err: "twice"},
		{text: "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': one})", err: "want an integer or a list"},
		{text: "evaluatePreconfiguredWaf('sqli-v33-stable", err: "unterminated string"},
		{text: `evaluatePreconfiguredWaf('sqli\x-v33-stable')`, err: "unsupported escape"},
		{text: "evaluatePreconfiguredWaf(sqli-v33-stable)", err: "want a quoted string"},
		{text: "inIpRange(origin.ip, '1.2.3.4/32')", err: "want evaluatePreconfiguredWaf(...)"},
		{text: "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1}", err: `want ')'`},
		{text: "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 99999999999999999})", err: "want"},
		{text: "", err: "want evaluatePreconfiguredWaf"},
	}
	for _, c := range cases {
		got, err := ParseCall(c.text)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseCall(%q): error %v, want one containing %q", c.text, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseCall(%q) = %+v, %v; want %+v", c.text, got, err, c.want)
		}
	}
	if _, err := ParseCall(strings.Repeat(" ", maxCallBytes+1)); err == nil {
		t.Error("ParseCall accepted more than maxCallBytes")
	}
}
