package config

import (
	"slices"
	"strconv"
	"strings"
)

// SecurityPolicy is a Cloud Armor security policy (Compute API
// securityPolicies), attached to backend services by their
// securityPolicy (a backend policy) and edgeSecurityPolicy (an edge
// policy). docs/security-policies.md describes what Spillway enforces.
type SecurityPolicy struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	OutputOnly
	// Type is CLOUD_ARMOR (a backend policy, the default) or
	// CLOUD_ARMOR_EDGE (an edge policy).
	Type  string               `json:"type,omitempty"`
	Rules []SecurityPolicyRule `json:"rules,omitempty"`
	// AdaptiveProtectionConfig is accepted and not enforced (a warning
	// says so): Spillway has no adaptive protection.
	AdaptiveProtectionConfig *Ignored `json:"adaptiveProtectionConfig,omitempty"`
	// AdvancedOptionsConfig: userIpRequestHeaders names the headers whose
	// first value is the client's address (origin.ip, the IP keys of rate
	// limits), for policies behind another proxy;
	// requestBodyInspectionSize is how much of a request body the
	// preconfigured WAF inspects; jsonParsing STANDARD has it inspect
	// JSON bodies value by value; logLevel VERBOSE logs where a WAF
	// signature matched.
	AdvancedOptionsConfig *SecurityAdvancedOptions `json:"advancedOptionsConfig,omitempty"`
	// LabelFingerprint and Labels are output-only or informational.
	LabelFingerprint string            `json:"labelFingerprint,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
}

// SecurityAdvancedOptions is securityPolicy.advancedOptionsConfig.
type SecurityAdvancedOptions struct {
	// JSONParsing is DISABLED (the default: JSON bodies are inspected
	// whole), STANDARD (each value of a JSON body is inspected) or
	// STANDARD_WITH_GRAPHQL (as STANDARD: Spillway does not parse
	// GraphQL). JSONCustomConfig.ContentTypes are media types read as
	// JSON besides application/json and application/*+json, with
	// STANDARD.
	JSONParsing      string                    `json:"jsonParsing,omitempty"`
	JSONCustomConfig *SecurityJSONCustomConfig `json:"jsonCustomConfig,omitempty"`
	// LogLevel is NORMAL (the default) or VERBOSE: the access log says
	// where a preconfigured WAF signature matched.
	LogLevel             string   `json:"logLevel,omitempty"`
	UserIPRequestHeaders []string `json:"userIpRequestHeaders,omitempty"`
	// RequestBodyInspectionSize is how much of a request body the
	// policy's preconfigured WAF rules inspect: 8KB (the default), 16KB,
	// 32KB, 48KB or 64KB, in any case (Google's values; KB is 1,024
	// bytes).
	RequestBodyInspectionSize string `json:"requestBodyInspectionSize,omitempty"`
}

// SecurityJSONCustomConfig is advancedOptionsConfig.jsonCustomConfig.
type SecurityJSONCustomConfig struct {
	// ContentTypes are media types (type/subtype, without parameters)
	// whose bodies are read as JSON when jsonParsing is STANDARD.
	ContentTypes []string `json:"contentTypes,omitempty"`
}

// DefaultRequestBodyInspectionBytes is requestBodyInspectionSize's
// default, 8KB, in bytes.
const DefaultRequestBodyInspectionBytes = 8 << 10

// requestBodyInspectionSizes are requestBodyInspectionSize's values.
var requestBodyInspectionSizes = []string{"8KB", "16KB", "32KB", "48KB", "64KB"}

// RequestBodyInspectionBytes returns a requestBodyInspectionSize in
// bytes: "" is the default, 8,192; false for a value Google does not
// take.
func RequestBodyInspectionBytes(size string) (int, bool) {
	if size == "" {
		return DefaultRequestBodyInspectionBytes, true
	}
	up := strings.ToUpper(size)
	if !slices.Contains(requestBodyInspectionSizes, up) {
		return 0, false
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(up, "KB"))
	return n << 10, true
}

// SecurityPolicyRule is one rule: the first rule in priority order
// (lowest number first) whose match is true decides the request.
type SecurityPolicyRule struct {
	Kind        string `json:"kind,omitempty"`
	Description string `json:"description,omitempty"`
	// Priority is 0 (evaluated first) to 2147483647 (the default rule,
	// which every policy must have).
	Priority *int64 `json:"priority,omitempty"`
	// Action is allow, deny(403), deny(404), deny(502), redirect,
	// throttle or rate_based_ban.
	Action string `json:"action"`
	// Preview evaluates the rule and logs what it would have done,
	// enforcing nothing.
	Preview          bool                      `json:"preview,omitempty"`
	Match            *SecurityRuleMatcher      `json:"match,omitempty"`
	RateLimitOptions *SecurityRateLimitOptions `json:"rateLimitOptions,omitempty"`
	RedirectOptions  *SecurityRedirectOptions  `json:"redirectOptions,omitempty"`
	HeaderAction     *SecurityRuleHeaderAction `json:"headerAction,omitempty"`
	// PreconfiguredWafConfig (field exclusions of WAF sets) is refused
	// by validation: opt out of rule IDs in the expression instead.
	PreconfiguredWafConfig *Ignored `json:"preconfiguredWafConfig,omitempty"`
}

// SecurityRuleMatcher is rule.match: either versionedExpr SRC_IPS_V1 with
// config.srcIpRanges, or expr.expression in Cloud Armor's rules language.
type SecurityRuleMatcher struct {
	VersionedExpr string                     `json:"versionedExpr,omitempty"`
	Config        *SecurityRuleMatcherConfig `json:"config,omitempty"`
	Expr          *SecurityExpr              `json:"expr,omitempty"`
	// ExprOptions (reCAPTCHA options) is refused by validation.
	ExprOptions *Ignored `json:"exprOptions,omitempty"`
}

// SecurityRuleMatcherConfig is match.config.
type SecurityRuleMatcherConfig struct {
	SrcIPRanges []string `json:"srcIpRanges,omitempty"`
}

// SecurityExpr is match.expr (a google.type.Expr).
type SecurityExpr struct {
	Expression  string `json:"expression"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Location    string `json:"location,omitempty"`
}

// SecurityRateLimitOptions is rule.rateLimitOptions (throttle and
// rate_based_ban).
type SecurityRateLimitOptions struct {
	RateLimitThreshold    *SecurityThreshold       `json:"rateLimitThreshold,omitempty"`
	ConformAction         string                   `json:"conformAction,omitempty"`
	ExceedAction          string                   `json:"exceedAction,omitempty"`
	ExceedRedirectOptions *SecurityRedirectOptions `json:"exceedRedirectOptions,omitempty"`
	BanThreshold          *SecurityThreshold       `json:"banThreshold,omitempty"`
	BanDurationSec        int64                    `json:"banDurationSec,omitempty"`
	EnforceOnKey          string                   `json:"enforceOnKey,omitempty"`
	EnforceOnKeyName      string                   `json:"enforceOnKeyName,omitempty"`
	EnforceOnKeyConfigs   []SecurityKeyConfig      `json:"enforceOnKeyConfigs,omitempty"`
}

// SecurityThreshold is a count of requests over intervalSec seconds.
type SecurityThreshold struct {
	Count       int64 `json:"count"`
	IntervalSec int64 `json:"intervalSec"`
}

// SecurityKeyConfig is one enforceOnKeyConfigs[] entry.
type SecurityKeyConfig struct {
	EnforceOnKeyType string `json:"enforceOnKeyType"`
	EnforceOnKeyName string `json:"enforceOnKeyName,omitempty"`
}

// SecurityRedirectOptions is a redirect: EXTERNAL_302 to target
// (GOOGLE_RECAPTCHA is refused: Spillway has no reCAPTCHA).
type SecurityRedirectOptions struct {
	Type   string `json:"type"`
	Target string `json:"target,omitempty"`
}

// SecurityRuleHeaderAction is rule.headerAction: request headers added
// when the rule allows the request.
type SecurityRuleHeaderAction struct {
	RequestHeadersToAdds []SecurityHeader `json:"requestHeadersToAdds,omitempty"`
}

// SecurityHeader is one header to add.
type SecurityHeader struct {
	HeaderName  string `json:"headerName"`
	HeaderValue string `json:"headerValue,omitempty"`
}
