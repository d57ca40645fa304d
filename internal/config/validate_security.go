package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// DefaultRulePriority is the priority of a security policy's default
// rule, which every policy must have and which matches every request.
const DefaultRulePriority = 2147483647

// Rate limit bounds, as Google documents them: intervals and ban
// durations take these values only; a policy has at most 10 source
// ranges per rule and 3 enforceOnKeyConfigs.
var (
	rateIntervals        = []int64{10, 30, 60, 120, 180, 240, 300, 600, 900, 1200, 1800, 2700, 3600}
	maxSrcIPRanges       = 10
	maxEnforceOnKeyConfs = 3
)

// RateKeyTypes are the enforceOnKey types Spillway counts by.
var RateKeyTypes = []string{"ALL", "IP", "HTTP_HEADER", "XFF_IP", "HTTP_COOKIE", "HTTP_PATH", "SNI", "REGION_CODE", "USER_IP"}

// securityPolicies validates securityPolicies[] and the backend
// services' references to them.
func (v *validator) securityPolicies() {
	for i := range v.c.SecurityPolicies {
		v.securityPolicy(at("securityPolicies[%d]", i), &v.c.SecurityPolicies[i])
	}
	for i := range v.c.BackendServices {
		bs := &v.c.BackendServices[i]
		v.securityPolicyRef(at("backendServices[%d].securityPolicy", i), bs.SecurityPolicy, "CLOUD_ARMOR")
		v.securityPolicyRef(at("backendServices[%d].edgeSecurityPolicy", i), bs.EdgeSecurityPolicy, "CLOUD_ARMOR_EDGE")
	}
}

// securityPolicyRef resolves a backend service's policy reference and
// checks the policy's type.
func (v *validator) securityPolicyRef(path, ref, typ string) {
	if ref == "" {
		return
	}
	_, name := v.ref(path, ref, "security policy", map[string]map[string]int{"securityPolicies": v.securityPolicyNames})
	if name == "" {
		return
	}
	sp := &v.c.SecurityPolicies[v.securityPolicyNames[name]]
	if got := SecurityPolicyType(sp); got != typ {
		field := "securityPolicy"
		if typ == "CLOUD_ARMOR_EDGE" {
			field = "edgeSecurityPolicy"
		}
		v.add(path, fmt.Sprintf("attach a policy of type %s here, or change securityPolicies[%s].type", typ, name),
			"security policy %s has type %s; %s takes type %s", name, got, field, typ)
	}
}

// SecurityPolicyType returns sp's type, CLOUD_ARMOR when unset.
func SecurityPolicyType(sp *SecurityPolicy) string {
	if sp.Type == "" {
		return "CLOUD_ARMOR"
	}
	return sp.Type
}

func (v *validator) securityPolicy(p string, sp *SecurityPolicy) {
	switch sp.Type {
	case "", "CLOUD_ARMOR", "CLOUD_ARMOR_EDGE":
	case "CLOUD_ARMOR_NETWORK":
		v.add(p+".type", "use CLOUD_ARMOR or CLOUD_ARMOR_EDGE", "network edge security policies (CLOUD_ARMOR_NETWORK) filter packets, not HTTP requests; Spillway does not support them")
	default:
		v.enum(p+".type", sp.Type, "CLOUD_ARMOR", "CLOUD_ARMOR_EDGE")
	}
	if ao := sp.AdvancedOptionsConfig; ao != nil {
		for j, h := range ao.UserIPRequestHeaders {
			if !isToken(h) {
				v.add(at("%s.advancedOptionsConfig.userIpRequestHeaders[%d]", p, j), "write a header name, e.g. X-Real-IP", "%q is not a header name", h)
			}
		}
		v.advancedOptions(p+".advancedOptionsConfig", ao)
		if _, ok := RequestBodyInspectionBytes(ao.RequestBodyInspectionSize); !ok {
			v.add(p+".advancedOptionsConfig.requestBodyInspectionSize", "use one of "+strings.Join(requestBodyInspectionSizes, ", "),
				"unknown request body inspection size %q", ao.RequestBodyInspectionSize)
		}
	}
	edge := sp.Type == "CLOUD_ARMOR_EDGE"
	seen := map[int64]int{}
	hasDefault := false
	for j := range sp.Rules {
		rp := at("%s.rules[%d]", p, j)
		r := &sp.Rules[j]
		if r.Priority == nil {
			v.add(rp+".priority", "set a priority: 0 is evaluated first, 2147483647 is the default rule", "a priority is required")
		} else if v.inRange(rp+".priority", *r.Priority, 0, DefaultRulePriority) {
			if k, dup := seen[*r.Priority]; dup {
				v.add(rp+".priority", "give each rule its own priority", "priority %d is already rules[%d]'s", *r.Priority, k)
			}
			seen[*r.Priority] = j
			if *r.Priority == DefaultRulePriority {
				hasDefault = true
				v.defaultRule(rp, r)
			}
		}
		v.securityRule(rp, r, edge)
	}
	if !hasDefault {
		v.add(p+".rules", "add the default rule: {priority: 2147483647, action: allow (or deny(403)), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}",
			"security policy %s has no default rule (priority 2147483647); Google Cloud requires one", sp.Name)
	}
}

// defaultRule checks that the default rule matches every request.
func (v *validator) defaultRule(rp string, r *SecurityPolicyRule) {
	m := r.Match
	if m == nil || m.VersionedExpr != "SRC_IPS_V1" || m.Config == nil || !slices.Equal(m.Config.SrcIPRanges, []string{"*"}) {
		v.add(rp+".match", "match every request: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}", "the default rule must match every request")
	}
}

// securityRule checks one rule's action, match and options.
func (v *validator) securityRule(rp string, r *SecurityPolicyRule, edge bool) {
	v.ruleAction(rp, r, edge)
	v.ruleMatch(rp, r.Match)
	if r.PreconfiguredWafConfig != nil {
		v.add(rp+".preconfiguredWafConfig", "remove it, and opt out of rule IDs in the expression instead ('opt_out_rule_ids')", "WAF field exclusions are not supported")
	}
	if ha := r.HeaderAction; ha != nil {
		if edge || !(r.Action == "allow" || r.Action == "throttle" || r.Action == "rate_based_ban") {
			v.add(rp+".headerAction", "remove it, or use it on an allow, throttle or rate_based_ban rule of a CLOUD_ARMOR policy", "headerAction applies only to requests a backend policy's rule lets through")
		}
		for k, h := range ha.RequestHeadersToAdds {
			if !isToken(h.HeaderName) {
				v.add(at("%s.headerAction.requestHeadersToAdds[%d].headerName", rp, k), "write a header name, e.g. X-Armor-Rule", "%q is not a header name", h.HeaderName)
			}
			if strings.ContainsAny(h.HeaderValue, "\r\n\x00") {
				v.add(at("%s.headerAction.requestHeadersToAdds[%d].headerValue", rp, k), "remove the line break", "a header value cannot hold CR, LF or NUL")
			}
		}
	}
}

// ruleAction checks a rule's action and the options it needs.
func (v *validator) ruleAction(rp string, r *SecurityPolicyRule, edge bool) {
	limited := r.Action == "throttle" || r.Action == "rate_based_ban"
	switch {
	case r.Action == "allow", DenyStatus(r.Action) != 0:
	case r.Action == "redirect":
		if edge {
			v.add(rp+".action", "use allow or deny(403|404|502) in an edge policy", "an edge security policy cannot redirect")
		}
		v.redirectOptions(rp+".redirectOptions", r.RedirectOptions)
	case limited:
		if edge {
			v.add(rp+".action", "use allow or deny(403|404|502) in an edge policy; rate limits belong in a CLOUD_ARMOR policy", "an edge security policy cannot rate-limit")
		}
		v.rateLimit(rp+".rateLimitOptions", r.Action, r.RateLimitOptions)
	case r.Action == "deny":
		v.add(rp+".action", "write the status: deny(403), deny(404) or deny(502)", "deny needs a status")
	case r.Action == "":
		v.add(rp+".action", "set an action: allow, deny(403), redirect, throttle or rate_based_ban", "an action is required")
	default:
		v.add(rp+".action", "use allow, deny(403), deny(404), deny(502), redirect, throttle or rate_based_ban", "unknown action %q", r.Action)
	}
	if r.RateLimitOptions != nil && !limited {
		v.add(rp+".rateLimitOptions", "remove it, or set action: throttle or rate_based_ban", "rateLimitOptions applies only to throttle and rate_based_ban rules")
	}
	if r.RedirectOptions != nil && r.Action != "redirect" {
		v.add(rp+".redirectOptions", "remove it, or set action: redirect", "redirectOptions applies only to redirect rules")
	}
}

// DenyStatus returns the status of a deny(403|404|502) action, 0 for any
// other action.
func DenyStatus(action string) int {
	s, ok := strings.CutPrefix(action, "deny(")
	if !ok {
		return 0
	}
	s, ok = strings.CutSuffix(s, ")")
	if !ok {
		return 0
	}
	switch n, _ := strconv.Atoi(s); n {
	case 403, 404, 502:
		return n
	}
	return 0
}

// redirectOptions checks a redirect: EXTERNAL_302 to an absolute URL.
func (v *validator) redirectOptions(p string, ro *SecurityRedirectOptions) {
	if ro == nil {
		v.add(p, "add redirectOptions: {type: EXTERNAL_302, target: https://example.com/blocked}", "a redirect rule needs redirectOptions")
		return
	}
	switch ro.Type {
	case "EXTERNAL_302":
		if !strings.HasPrefix(ro.Target, "https://") && !strings.HasPrefix(ro.Target, "http://") || strings.ContainsAny(ro.Target, " \r\n\x00") {
			v.add(p+".target", "write an absolute http(s) URL, e.g. https://example.com/blocked", "target %q is not an absolute URL", ro.Target)
		}
	case "GOOGLE_RECAPTCHA":
		v.add(p+".type", "use EXTERNAL_302 to a page of your own", "reCAPTCHA redirects need Google's reCAPTCHA Enterprise, which Spillway does not have")
	default:
		v.enum(p+".type", ro.Type, "EXTERNAL_302")
	}
}

// rateLimit checks a throttle or rate_based_ban rule's options.
func (v *validator) rateLimit(p, action string, o *SecurityRateLimitOptions) {
	if o == nil {
		v.add(p, "add rateLimitOptions: {rateLimitThreshold: {count: 100, intervalSec: 60}, conformAction: allow, exceedAction: deny(429)}", "a %s rule needs rateLimitOptions", action)
		return
	}
	v.threshold(p+".rateLimitThreshold", o.RateLimitThreshold, true)
	if o.ConformAction != "allow" {
		v.add(p+".conformAction", "set conformAction: allow", "conformAction must be allow, got %q", o.ConformAction)
	}
	switch {
	case o.ExceedAction == "redirect":
		v.redirectOptions(p+".exceedRedirectOptions", o.ExceedRedirectOptions)
	case ExceedStatus(o.ExceedAction) != 0:
	default:
		v.add(p+".exceedAction", "use deny(429), deny(403), deny(404), deny(502) or redirect", "exceedAction %q is not one Cloud Armor takes", o.ExceedAction)
	}
	if action == "rate_based_ban" {
		if o.BanThreshold != nil {
			v.threshold(p+".banThreshold", o.BanThreshold, false)
		}
		if !slices.Contains(rateIntervals, o.BanDurationSec) {
			v.add(p+".banDurationSec", "use one of "+joinInts(rateIntervals), "banDurationSec %d is not one Cloud Armor takes", o.BanDurationSec)
		}
	} else if o.BanThreshold != nil || o.BanDurationSec != 0 {
		v.add(p+".banThreshold", "remove banThreshold and banDurationSec, or set action: rate_based_ban", "bans apply only to rate_based_ban rules")
	}
	v.rateKeys(p, o)
}

// ExceedStatus returns the status of a deny exceedAction (deny(429) as
// well as deny's statuses), 0 for any other.
func ExceedStatus(action string) int {
	if action == "deny(429)" {
		return 429
	}
	return DenyStatus(action)
}

// threshold checks a {count, intervalSec} threshold.
func (v *validator) threshold(p string, t *SecurityThreshold, required bool) {
	if t == nil {
		if required {
			v.add(p, "add rateLimitThreshold: {count: 100, intervalSec: 60}", "a threshold is required")
		}
		return
	}
	if t.Count < 1 {
		v.add(p+".count", "use at least 1", "count %d is out of range", t.Count)
	}
	if !slices.Contains(rateIntervals, t.IntervalSec) {
		v.add(p+".intervalSec", "use one of "+joinInts(rateIntervals), "intervalSec %d is not one Cloud Armor takes", t.IntervalSec)
	}
}

// rateKeys checks enforceOnKey, enforceOnKeyName and enforceOnKeyConfigs.
func (v *validator) rateKeys(p string, o *SecurityRateLimitOptions) {
	if len(o.EnforceOnKeyConfigs) > 0 {
		if o.EnforceOnKey != "" || o.EnforceOnKeyName != "" {
			v.add(p+".enforceOnKey", "keep enforceOnKey or enforceOnKeyConfigs, not both", "enforceOnKey and enforceOnKeyConfigs exclude each other")
		}
		if len(o.EnforceOnKeyConfigs) > maxEnforceOnKeyConfs {
			v.add(p+".enforceOnKeyConfigs", "keep at most 3", "%d keys; Cloud Armor combines at most 3", len(o.EnforceOnKeyConfigs))
		}
		for k, kc := range o.EnforceOnKeyConfigs {
			v.rateKey(at("%s.enforceOnKeyConfigs[%d]", p, k), "enforceOnKeyType", kc.EnforceOnKeyType, kc.EnforceOnKeyName)
		}
		return
	}
	if o.EnforceOnKey != "" {
		v.rateKey(p, "enforceOnKey", o.EnforceOnKey, o.EnforceOnKeyName)
	}
}

// rateKey checks one key type and its name.
func (v *validator) rateKey(p, field, typ, name string) {
	switch typ {
	case "TLS_JA3_FINGERPRINT", "TLS_JA4_FINGERPRINT":
		v.add(p+"."+field, "use IP, HTTP_HEADER, XFF_IP, HTTP_COOKIE, HTTP_PATH, SNI or REGION_CODE", "%s keys are not supported: Spillway does not fingerprint TLS clients", typ)
		return
	}
	if !v.enum(p+"."+field, typ, RateKeyTypes...) {
		return
	}
	named := typ == "HTTP_HEADER" || typ == "HTTP_COOKIE"
	switch {
	case named && name == "":
		v.add(p+".enforceOnKeyName", "name the header or cookie to count by", "%s needs enforceOnKeyName", typ)
	case !named && name != "":
		v.add(p+".enforceOnKeyName", "remove it", "enforceOnKeyName applies only to HTTP_HEADER and HTTP_COOKIE")
	}
}

// ruleMatch checks a rule's match: SRC_IPS_V1 ranges or an expression
// (whose language package armor checks when it compiles the policy).
func (v *validator) ruleMatch(rp string, m *SecurityRuleMatcher) {
	if m == nil {
		v.add(rp+".match", "add match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: [...]}} or match: {expr: {expression: ...}}", "a match is required")
		return
	}
	p := rp + ".match"
	if m.ExprOptions != nil {
		v.add(p+".exprOptions", "remove it", "reCAPTCHA expression options need Google's reCAPTCHA Enterprise, which Spillway does not have")
	}
	v.exactlyOne(p, "match", []string{"versionedExpr", "expr"}, m.VersionedExpr != "", m.Expr != nil)
	if m.Expr != nil && strings.TrimSpace(m.Expr.Expression) == "" {
		v.add(p+".expr.expression", "write an expression, e.g. request.path.startsWith('/admin')", "the expression is empty")
	}
	if m.VersionedExpr == "" {
		if m.Config != nil {
			v.add(p+".config", "remove it, or set versionedExpr: SRC_IPS_V1", "config applies only with versionedExpr")
		}
		return
	}
	if !v.enum(p+".versionedExpr", m.VersionedExpr, "SRC_IPS_V1") {
		return
	}
	if m.Config == nil || len(m.Config.SrcIPRanges) == 0 {
		v.add(p+".config.srcIpRanges", "list addresses or ranges, e.g. ['198.51.100.0/24'], or '*' for every address", "SRC_IPS_V1 needs srcIpRanges")
		return
	}
	if len(m.Config.SrcIPRanges) > maxSrcIPRanges {
		v.add(p+".config.srcIpRanges", "split the ranges over several rules (10 per rule)", "%d ranges; Cloud Armor takes at most 10 per rule", len(m.Config.SrcIPRanges))
	}
	for k, r := range m.Config.SrcIPRanges {
		if _, err := ParseSrcIPRange(r); err != nil {
			v.add(at("%s.config.srcIpRanges[%d]", p, k), "write an address, a CIDR range (198.51.100.0/24, 2001:db8::/32) or '*'", "%v", err)
		}
	}
}

// ParseSrcIPRange parses a srcIpRanges entry: "*" (every address, as
// 0.0.0.0/0 and ::/0 together: the zero Prefix), an address, or a CIDR
// range whose host bits are zero.
func ParseSrcIPRange(s string) (netip.Prefix, error) {
	if s == "*" {
		return netip.Prefix{}, nil
	}
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or range", s)
		}
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP range", s)
	}
	if pfx.Masked() != pfx {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set (did you mean %s?)", s, pfx.Masked())
	}
	return pfx, nil
}

// joinInts joins numbers with ", ".
func joinInts(ns []int64) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, ", ")
}

// advancedOptions checks jsonParsing, jsonCustomConfig and logLevel.
func (v *validator) advancedOptions(p string, ao *SecurityAdvancedOptions) {
	v.enum(p+".jsonParsing", ao.JSONParsing, "DISABLED", "STANDARD", "STANDARD_WITH_GRAPHQL")
	v.enum(p+".logLevel", ao.LogLevel, "NORMAL", "VERBOSE")
	if jc := ao.JSONCustomConfig; jc != nil {
		for j, ct := range jc.ContentTypes {
			typ, sub, ok := strings.Cut(ct, "/")
			if !ok || !isToken(typ) || !isToken(sub) {
				v.add(at("%s.jsonCustomConfig.contentTypes[%d]", p, j), "write a media type without parameters, e.g. application/vnd.api+json", "%q is not a type/subtype", ct)
			}
		}
	}
}
