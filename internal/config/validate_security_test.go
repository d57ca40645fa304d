package config

import (
	"strings"
	"testing"
)

func TestValidateSecurityPolicies(t *testing.T) {
	const dflt = "  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}\n"
	for _, tc := range []struct {
		name, typ, attach, rules, want string
	}{
		{"valid", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 1, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['198.51.100.0/24']}}}\n" + dflt, ""},
		{"no default rule", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 1, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}\n", "has no default rule"},
		{"default rule must match all", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['10.0.0.0/8']}}}\n", "must match every request"},
		{"duplicate priority", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 1, action: allow, match: {expr: {expression: 'true'}}}\n  - {priority: 1, action: allow, match: {expr: {expression: 'true'}}}\n" + dflt, "already rules[0]"},
		{"deny without status", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 1, action: deny, match: {expr: {expression: 'true'}}}\n" + dflt, "deny(403)"},
		{"host bits", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 1, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['10.1.2.3/8']}}}\n" + dflt, "did you mean 10.0.0.0/8"},
		{"recaptcha", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 1, action: redirect, redirectOptions: {type: GOOGLE_RECAPTCHA}, match: {expr: {expression: 'true'}}}\n" + dflt, "reCAPTCHA"},
		{"throttle without options", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 1, action: throttle, match: {expr: {expression: 'true'}}}\n" + dflt, "needs rateLimitOptions"},
		{"bad interval", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 1, action: throttle, rateLimitOptions: {rateLimitThreshold: {count: 5, intervalSec: 7}, conformAction: allow, exceedAction: deny(429)}, match: {expr: {expression: 'true'}}}\n" + dflt, "intervalSec 7"},
		{"header key needs name", "CLOUD_ARMOR", "securityPolicy", "  - {priority: 1, action: throttle, rateLimitOptions: {rateLimitThreshold: {count: 5, intervalSec: 10}, conformAction: allow, exceedAction: deny(429), enforceOnKey: HTTP_HEADER}, match: {expr: {expression: 'true'}}}\n" + dflt, "needs enforceOnKeyName"},
		{"edge cannot throttle", "CLOUD_ARMOR_EDGE", "edgeSecurityPolicy", "  - {priority: 1, action: throttle, rateLimitOptions: {rateLimitThreshold: {count: 5, intervalSec: 10}, conformAction: allow, exceedAction: deny(429)}, match: {expr: {expression: 'true'}}}\n" + dflt, "cannot rate-limit"},
		{"wrong attachment type", "CLOUD_ARMOR_EDGE", "securityPolicy", dflt, "takes type CLOUD_ARMOR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "backendServices:\n- name: bs\n  " + tc.attach + ": sp\nsecurityPolicies:\n- name: sp\n  type: " + tc.typ + "\n  rules:\n" + tc.rules
			c, err := Parse([]byte(y), "test.yaml")
			if err == nil {
				err = c.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// advancedOptionsConfig.requestBodyInspectionSize takes Google's values,
// in any case, and says which they are otherwise.
func TestRequestBodyInspectionSize(t *testing.T) {
	for _, tc := range []struct {
		size  string
		bytes int
		want  string // error text, "" when valid
	}{
		{"", 8192, ""},
		{"8KB", 8192, ""},
		{"16KB", 16384, ""},
		{"32kb", 32768, ""},
		{"48Kb", 49152, ""},
		{"64KB", 65536, ""},
		{"128KB", 0, `unknown request body inspection size "128KB" (fix: use one of 8KB, 16KB, 32KB, 48KB, 64KB)`},
		{"8192", 0, "use one of 8KB"},
		{"12KB", 0, "use one of 8KB"},
	} {
		t.Run(tc.size, func(t *testing.T) {
			n, ok := RequestBodyInspectionBytes(tc.size)
			if n != tc.bytes || ok != (tc.want == "") {
				t.Errorf("RequestBodyInspectionBytes(%q) = %d, %v; want %d, %v", tc.size, n, ok, tc.bytes, tc.want == "")
			}
			y := "backendServices:\n- name: bs\n  securityPolicy: sp\nsecurityPolicies:\n- name: sp\n" +
				"  advancedOptionsConfig: {requestBodyInspectionSize: '" + tc.size + "'}\n" +
				"  rules:\n  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}\n"
			c, err := Parse([]byte(y), "test.yaml")
			if err == nil {
				err = c.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), "securityPolicies[sp].advancedOptionsConfig.requestBodyInspectionSize"):
				t.Fatalf("error %v does not name the field", err)
			}
		})
	}
}

// advancedOptionsConfig's jsonParsing, jsonCustomConfig and logLevel
// take Google's values; an error names the field.
func TestAdvancedOptions(t *testing.T) {
	for _, tc := range []struct {
		opts, want string
	}{
		{"{jsonParsing: STANDARD, jsonCustomConfig: {contentTypes: [application/vnd.api+json, text/json]}, logLevel: VERBOSE}", ""},
		{"{jsonParsing: DISABLED, logLevel: NORMAL}", ""},
		{"{jsonParsing: STANDARD_WITH_GRAPHQL}", ""},
		{"{jsonParsing: ON}", `advancedOptionsConfig.jsonParsing: unknown value "ON"`},
		{"{logLevel: DEBUG}", `advancedOptionsConfig.logLevel: unknown value "DEBUG"`},
		{"{jsonParsing: STANDARD, jsonCustomConfig: {contentTypes: ['application/json; charset=utf-8']}}", "advancedOptionsConfig.jsonCustomConfig.contentTypes[0]: \"application/json; charset=utf-8\" is not a type/subtype"},
		{"{jsonParsing: STANDARD, jsonCustomConfig: {contentTypes: [json]}}", "contentTypes[0]"},
	} {
		t.Run(tc.opts, func(t *testing.T) {
			y := "backendServices:\n- name: bs\n  securityPolicy: sp\nsecurityPolicies:\n- name: sp\n" +
				"  advancedOptionsConfig: " + tc.opts + "\n" +
				"  rules:\n  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}\n"
			c, err := Parse([]byte(y), "test.yaml")
			if err == nil {
				err = c.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
