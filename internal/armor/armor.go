// Package armor enforces Cloud Armor security policies: rules in
// priority order, first match wins, each matching source ranges
// (SRC_IPS_V1, on a prefix trie) or an expression in Cloud Armor's rules
// language (a CEL subset, compiled once with cel-go), with the actions
// allow, deny, redirect, throttle and rate_based_ban, preview, and
// request headers to add. docs/security-policies.md describes the model.
//
// The package is pure: it does no I/O and reads no clock (Evaluate takes
// now); its only mutable state is the rate limiters' counts, bounded in
// memory, and in fleet mode the other instances' counts they add
// (share.go), which the fleet replaces whole.
package armor

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/spillwaylb/spillway/internal/config"
)

// Request is what rules see of a request.
type Request struct {
	Method, Path, Query, Scheme string
	// Target is the request target as the client sent it (the WAF
	// inspects it undecoded); "" to build it from Path and Query.
	Target string
	// Host is the request's host; SNI the TLS server name ("" for
	// cleartext).
	Host, SNI string
	// Header holds the request headers, canonical keys (net/http's).
	Header map[string][]string
	// Peer is the address of the connection's client; UserIP the first
	// address in the policy's userIpRequestHeaders, when set.
	Peer netip.Addr
	// RegionCode is the client's ISO 3166-1 alpha-2 region ("" when
	// unknown); when it is "" and Geo is set, Geo places the client's
	// address (after userIpRequestHeaders) the first time a rule asks.
	RegionCode string
	Geo        func(netip.Addr) string
	// Body is the start of the request body, for the WAF: at least the
	// first BodyInspectionSize bytes of a policy that NeedsBody, or the
	// whole body when shorter (nil when none was read).
	Body []byte
}

// Outcome is what a policy decided for a request.
type Outcome struct {
	// Policy and Priority name the rule; zero when no policy applies.
	Policy   string
	Priority int64
	// ConfiguredAction is Google's: ALLOW, DENY, REDIRECT, THROTTLE or
	// RATE_BASED_BAN.
	ConfiguredAction string
	// Result is ACCEPT, DENY or REDIRECT: what happened to the request.
	Result string
	// Status is the response status of a DENY (403, 404, 429, 502) or a
	// REDIRECT (302); Location a redirect's target.
	Status   int
	Location string
	// RateLimitAction says how a throttle or rate_based_ban rule counted
	// the request: RATE_LIMIT_THRESHOLD_CONFORM,
	// RATE_LIMIT_THRESHOLD_EXCEED or BAN_THRESHOLD_EXCEED; RateLimitKey
	// is the key it counted under.
	RateLimitAction, RateLimitKey string
	// WAFIDs are the preconfigured WAF rule IDs that matched; WAFField,
	// when the policy's logLevel is VERBOSE, where the first matched.
	WAFIDs   []string
	WAFField *MatchedField
	// Headers are the request headers an allowing rule adds.
	Headers []config.SecurityHeader
}

// Denied reports whether the request is refused (deny or redirect).
func (o *Outcome) Denied() bool { return o.Result == "DENY" || o.Result == "REDIRECT" }

// Decision is a policy's outcome for a request: the enforced rule's and,
// when a preview rule matched first, what it would have done.
type Decision struct {
	Enforced Outcome
	Preview  *Outcome
}

// Policy is one compiled security policy.
type Policy struct {
	Name  string
	Edge  bool
	rules []*rule
	// userIP are the headers holding the client's address.
	userIP []string
	// ips, when the policy has at most 64 source-range rules, holds them
	// all: one walk per request answers every one (rule.ipBit).
	ips *policyTrie
	// needsBody: some rule calls the preconfigured WAF, which inspects
	// the first bodyBytes of the request body.
	needsBody bool
	bodyBytes int
	// verbose: logLevel VERBOSE, outcomes carry WAFField.
	verbose bool
}

// NeedsBody reports whether the policy inspects request bodies: some
// rule's expression calls the preconfigured WAF. For the others,
// Request.Body is not read and the body need not be read before
// Evaluate.
func (p *Policy) NeedsBody() bool { return p.needsBody }

// BodyInspectionSize is how many bytes of a request body the policy
// inspects when it NeedsBody: its advancedOptionsConfig's
// requestBodyInspectionSize, 8,192 by default. Evaluate inspects at most
// that much of Request.Body.
func (p *Policy) BodyInspectionSize() int { return p.bodyBytes }

// rule is one compiled rule.
type rule struct {
	priority int64
	action   string // the configured action, lower case as written
	preview  bool
	ips      *policyTrie // the rule's own ranges (bit 1), when not in Policy.ips
	ipBit    uint64      // the rule's bit in Policy.ips (0: not there)
	ranges   []string    // srcIpRanges
	expr     *program
	status   int    // deny status
	location string // redirect target
	headers  []config.SecurityHeader
	limit    *limiter // throttle and rate_based_ban
	// limitID identifies the rate limit's settings, for Carry.
	limitID string
	// hits counts the requests the rule decided, by result; previews
	// those it would have (preview rules).
	hits *ruleHits
}

// ruleHits are a rule's counts by result (ACCEPT, DENY, REDIRECT).
type ruleHits [len(results)]atomic.Uint64

// results are the Outcome.Result values, in ruleHits order.
var results = [...]string{"ACCEPT", "DENY", "REDIRECT"}

// count counts one result.
func (h *ruleHits) count(result string) {
	for i, r := range results {
		if r == result {
			h[i].Add(1)
		}
	}
}

// RuleCount is how many requests one rule decided with one result.
type RuleCount struct {
	Policy   string `json:"policy"`
	Priority int64  `json:"priority"`
	Preview  bool   `json:"preview,omitempty"`
	Result   string `json:"result"`
	Count    uint64 `json:"count"`
}

// Counts lists every rule's counts by result (zero counts left out),
// for metrics.
func (s *Set) Counts() []RuleCount {
	if s == nil {
		return nil
	}
	var out []RuleCount
	for _, name := range slices.Sorted(maps.Keys(s.policies)) {
		for _, r := range s.policies[name].rules {
			for i, res := range results {
				if n := r.hits[i].Load(); n > 0 {
					out = append(out, RuleCount{Policy: name, Priority: r.priority, Preview: r.preview, Result: res, Count: n})
				}
			}
		}
	}
	return out
}

// Set is the compiled policies of a config, by name.
type Set struct {
	policies map[string]*Policy
	// services are each backend service's policies, by service ID:
	// [0] edge, [1] backend.
	services [][2]*Policy
}

// Compile compiles cfg's security policies; waf compiles the WAF rule
// sets their expressions name (nil: expressions that call the WAF are
// refused). It returns nil, nil when no backend service has a policy.
// Errors name the policy and rule.
func Compile(cfg *config.Config, waf WAF) (*Set, error) {
	attached := false
	for _, bs := range cfg.BackendServices {
		attached = attached || bs.SecurityPolicy != "" || bs.EdgeSecurityPolicy != ""
	}
	if !attached {
		return nil, nil
	}
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("security policies: %w", err)
	}
	s := &Set{policies: map[string]*Policy{}}
	for i := range cfg.SecurityPolicies {
		sp := &cfg.SecurityPolicies[i]
		p, err := compilePolicy(env, sp, waf)
		if err != nil {
			return nil, err
		}
		s.policies[sp.Name] = p
	}
	s.services = make([][2]*Policy, len(cfg.BackendServices))
	for i, bs := range cfg.BackendServices {
		s.services[i] = [2]*Policy{s.policies[config.RefName(bs.EdgeSecurityPolicy)], s.policies[config.RefName(bs.SecurityPolicy)]}
	}
	return s, nil
}

// ForService returns backend service i's edge and backend policies (nil
// when none).
func (s *Set) ForService(i int) (edge, backend *Policy) {
	if s == nil || i >= len(s.services) {
		return nil, nil
	}
	return s.services[i][0], s.services[i][1]
}

// Carry makes s's rules take over the counts of old's where the rule is
// the same (policy name, priority, action, preview), and the rate
// limits' counts and bans where their options are the same too, so a
// reload does not reset them.
func (s *Set) Carry(old *Set) {
	if s == nil || old == nil {
		return
	}
	for name, p := range s.policies {
		op := old.policies[name]
		if op == nil {
			continue
		}
		for _, r := range p.rules {
			for _, or := range op.rules {
				if or.priority != r.priority || or.action != r.action || or.preview != r.preview {
					continue
				}
				r.hits = or.hits
				if r.limit != nil && or.limit != nil && or.limitID == r.limitID {
					r.limit = or.limit
				}
			}
		}
	}
}

// limitID identifies a rate limit's settings.
func limitID(action string, o *config.SecurityRateLimitOptions) string {
	b, _ := json.Marshal(o)
	return action + " " + string(b)
}

func compilePolicy(env *cel.Env, sp *config.SecurityPolicy, waf WAF) (*Policy, error) {
	p := &Policy{Name: sp.Name, Edge: sp.Type == "CLOUD_ARMOR_EDGE", bodyBytes: config.DefaultRequestBodyInspectionBytes}
	var wopts WAFCall
	if ao := sp.AdvancedOptionsConfig; ao != nil {
		p.userIP = ao.UserIPRequestHeaders
		p.verbose = ao.LogLevel == "VERBOSE"
		wopts.JSONParsing = ao.JSONParsing == "STANDARD" || ao.JSONParsing == "STANDARD_WITH_GRAPHQL"
		if wopts.JSONParsing && ao.JSONCustomConfig != nil {
			wopts.JSONContentTypes = ao.JSONCustomConfig.ContentTypes
		}
		n, ok := config.RequestBodyInspectionBytes(ao.RequestBodyInspectionSize)
		if !ok {
			return nil, fmt.Errorf("securityPolicies[%s].advancedOptionsConfig.requestBodyInspectionSize: unknown size %q", sp.Name, ao.RequestBodyInspectionSize)
		}
		p.bodyBytes = n
	}
	for j := range sp.Rules {
		r, err := compileRule(env, &sp.Rules[j], waf, p.Edge, wopts)
		if err != nil {
			return nil, fmt.Errorf("securityPolicies[%s].rules[%d]: %w", sp.Name, j, err)
		}
		if r.limit != nil {
			r.limit.id = ruleShareID(sp.Name, r.priority, r.limitID)
		}
		p.rules = append(p.rules, r)
		p.needsBody = p.needsBody || r.expr != nil && r.expr.wafs != nil
	}
	slices.SortFunc(p.rules, func(a, b *rule) int { return int(a.priority - b.priority) })
	p.indexIPs(sp)
	return p, nil
}

// indexIPs puts the source ranges of up to 64 rules in one trie.
func (p *Policy) indexIPs(sp *config.SecurityPolicy) {
	var ipRules []*rule
	for _, r := range p.rules {
		if r.ips != nil {
			ipRules = append(ipRules, r)
		}
	}
	if len(ipRules) == 0 || len(ipRules) > 64 {
		return
	}
	p.ips = &policyTrie{}
	for i, r := range ipRules {
		r.ipBit = 1 << i
		for _, s := range r.ranges {
			pfx, _ := config.ParseSrcIPRange(s) // checked by compileRule
			p.ips.add(pfx, r.ipBit)
		}
	}
}

func compileRule(env *cel.Env, cr *config.SecurityPolicyRule, waf WAF, edge bool, wopts WAFCall) (*rule, error) {
	r := &rule{action: cr.Action, preview: cr.Preview, status: config.DenyStatus(cr.Action), hits: new(ruleHits)}
	if cr.Priority != nil {
		r.priority = *cr.Priority
	}
	if cr.RedirectOptions != nil {
		r.status, r.location = 302, cr.RedirectOptions.Target
	}
	if cr.HeaderAction != nil {
		r.headers = cr.HeaderAction.RequestHeadersToAdds
	}
	m := cr.Match
	switch {
	case m == nil:
		return nil, fmt.Errorf("match: a match is required")
	case m.Expr != nil:
		if edge {
			waf = nil // edge policies have no WAF
		}
		prg, err := compileExpr(env, m.Expr.Expression, waf, wopts)
		if err != nil {
			return nil, fmt.Errorf("match.expr.expression: %w (fix: see docs/security-policies.md for the attributes and functions)", err)
		}
		r.expr = prg
	default:
		r.ips, r.ranges = &policyTrie{}, m.Config.SrcIPRanges
		for _, s := range m.Config.SrcIPRanges {
			pfx, err := config.ParseSrcIPRange(s)
			if err != nil {
				return nil, fmt.Errorf("match.config.srcIpRanges: %w", err)
			}
			r.ips.add(pfx, 1)
		}
	}
	if o := cr.RateLimitOptions; o != nil {
		r.limit = newLimiter(cr.Action, o)
		r.limitID = limitID(cr.Action, o)
	}
	return r, nil
}

// activation is one request as the rules see it: the CEL variables,
// each built when first read and kept for the request's other rules.
type activation struct {
	r      *Request
	p      *Policy
	vals   [numAttrs]ref.Val
	userIP netip.Addr
	ip     string // userIP as text, once asked for
	// region is Request.Geo's answer, once regionDone.
	region     string
	regionDone bool
	wafIDs     []string
	wafField   *MatchedField
	// ipSet is the policy trie's answer for the client's address, once
	// ipsDone.
	ipSet   uint64
	ipsDone bool
}

// The attributes' indexes in activation.vals.
const (
	attrMethod = iota
	attrPath
	attrQuery
	attrScheme
	attrHeaders
	attrIP
	attrRegion
	numAttrs
)

// attrIndex maps an attribute's name to its index.
var attrIndex = map[string]int{
	"request.method": attrMethod, "request.path": attrPath, "request.query": attrQuery,
	"request.scheme": attrScheme, "request.headers": attrHeaders,
	"origin.ip": attrIP, "origin.user_ip": attrIP, "origin.region_code": attrRegion,
}

// ResolveName returns a request attribute.
func (a *activation) ResolveName(name string) (any, bool) {
	i, ok := attrIndex[name]
	if !ok {
		return nil, false
	}
	if v := a.vals[i]; v != nil {
		return v, true
	}
	var v ref.Val
	switch i {
	case attrMethod:
		v = types.String(a.r.Method)
	case attrPath:
		v = types.String(a.r.Path)
	case attrQuery:
		v = types.String(a.r.Query)
	case attrScheme:
		v = types.String(a.r.Scheme)
	case attrHeaders:
		v = types.NewStringStringMap(types.DefaultTypeAdapter, a.headers())
	case attrIP:
		v = types.String(a.ipString())
	case attrRegion:
		v = types.String(a.regionCode())
	}
	a.vals[i] = v
	return v, true
}

// headers returns the request headers as the rules read them: lower-case
// names, several values joined by commas, and the Host.
func (a *activation) headers() map[string]string {
	m := make(map[string]string, len(a.r.Header)+1)
	for k, vs := range a.r.Header {
		m[lowerName(k)] = strings.Join(vs, ",")
	}
	if _, ok := m["host"]; !ok && a.r.Host != "" {
		m["host"] = a.r.Host
	}
	return m
}

// commonLower are the lower-case forms of common canonical header names,
// so reading them allocates nothing.
var commonLower = map[string]string{}

func init() {
	for _, h := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control", "Connection",
		"Content-Length", "Content-Type", "Cookie", "Host", "Origin", "Pragma", "Referer", "User-Agent",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "X-Requested-With",
		"Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Ch-Ua", "Sec-Ch-Ua-Mobile", "Sec-Ch-Ua-Platform",
		"Upgrade-Insecure-Requests", "If-None-Match", "If-Modified-Since", "Traceparent", "Tracestate"} {
		commonLower[h] = strings.ToLower(h)
	}
}

// lowerName lower-cases a header name.
func lowerName(k string) string {
	if l, ok := commonLower[k]; ok {
		return l
	}
	return strings.ToLower(k)
}

// regionCode is the client's region (origin.region_code).
func (a *activation) regionCode() string {
	if a.r.RegionCode == "" && a.r.Geo != nil && !a.regionDone {
		a.region, a.regionDone = a.r.Geo(a.clientIP()), true
	}
	if a.regionDone {
		return a.region
	}
	return a.r.RegionCode
}

// ipString is the client's address as text (origin.ip).
func (a *activation) ipString() string {
	if a.ip == "" {
		a.ip = a.clientIP().String()
	}
	return a.ip
}

// header returns the value of request.headers[name] as CEL sees it (name
// in lower case; several values joined by commas; host from the request
// when no Host header), false when there is none.
func (a *activation) header(name string) (string, bool) {
	if strings.ToLower(name) != name {
		return "", false // the map's keys are lower case
	}
	vs, ok := a.r.Header[textproto.CanonicalMIMEHeaderKey(name)]
	if !ok {
		// A name net/http left as it came (not a valid token).
		for k, v := range a.r.Header {
			if strings.EqualFold(k, name) {
				vs, ok = v, true
				break
			}
		}
	}
	if !ok {
		if name == "host" && a.r.Host != "" {
			return a.r.Host, true
		}
		return "", false
	}
	if len(vs) == 1 {
		return vs[0], true
	}
	return strings.Join(vs, ","), true
}

// Parent returns nil: an activation has no parent.
func (a *activation) Parent() interpreter.Activation { return nil }

// clientIP is the client's address: the first valid address in the
// policy's userIpRequestHeaders, else the connection's peer.
func (a *activation) clientIP() netip.Addr {
	if a.userIP.IsValid() {
		return a.userIP
	}
	a.userIP = a.r.Peer
	for _, h := range a.p.userIP {
		v := headerValue(a.r.Header, h)
		if v == "" {
			continue
		}
		first, _, _ := strings.Cut(v, ",")
		if ip, err := netip.ParseAddr(strings.TrimSpace(first)); err == nil {
			a.userIP = ip.Unmap()
			break
		}
	}
	return a.userIP
}

// headerValue returns the first value of header name (any case).
func headerValue(h map[string][]string, name string) string {
	if vs := h[textproto.CanonicalMIMEHeaderKey(name)]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Evaluate runs the policy on r at now: the first matching rule in
// priority order decides; a matching preview rule is noted (the first
// only) and evaluation goes on. Of r.Body, the first
// BodyInspectionSize bytes are inspected.
func (p *Policy) Evaluate(r *Request, now time.Time) Decision {
	if len(r.Body) > p.bodyBytes {
		short := *r
		short.Body = r.Body[:p.bodyBytes]
		r = &short
	}
	a := activation{r: r, p: p}
	var d Decision
	for _, ru := range p.rules {
		if !ru.matches(&a) {
			continue
		}
		o := ru.outcome(p, &a, now)
		ru.hits.count(o.Result)
		if ru.preview {
			if d.Preview == nil {
				d.Preview = &o
			}
			continue
		}
		d.Enforced = o
		return d
	}
	return d // unreachable with a default rule: validation requires one
}

func (ru *rule) matches(a *activation) bool {
	if ru.ipBit != 0 {
		if !a.ipsDone {
			a.ipSet, a.ipsDone = a.p.ips.match(a.clientIP()), true
		}
		return a.ipSet&ru.ipBit != 0
	}
	if ru.ips != nil {
		return ru.ips.match(a.clientIP())&1 != 0
	}
	a.wafIDs, a.wafField = a.wafIDs[:0], nil
	return ru.expr.eval(a)
}

// outcome applies the rule's action to a matched request.
func (ru *rule) outcome(p *Policy, a *activation, now time.Time) Outcome {
	o := Outcome{Policy: p.Name, Priority: ru.priority}
	if len(a.wafIDs) > 0 {
		o.WAFIDs = slices.Clone(a.wafIDs)
		if p.verbose {
			o.WAFField = a.wafField
		}
	}
	switch {
	case ru.action == "allow":
		o.ConfiguredAction, o.Result, o.Headers = "ALLOW", "ACCEPT", ru.headers
	case ru.action == "redirect":
		o.ConfiguredAction, o.Result, o.Status, o.Location = "REDIRECT", "REDIRECT", ru.status, ru.location
	case ru.limit != nil:
		ru.limit.apply(&o, a, now)
		if o.Result == "ACCEPT" {
			o.Headers = ru.headers
		}
	default:
		o.ConfiguredAction, o.Result, o.Status = "DENY", "DENY", ru.status
	}
	return o
}
