package route

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// Table is a compiled URL map. It is immutable and safe for concurrent use.
type Table struct {
	name     string
	exact    map[string]*pathMatcher // lower-cased host or host:port
	wild     []wildHost              // "*.x" / "*-x" without port, longest suffix first
	wildPort []wildHost              // the same with ":port"
	star     *pathMatcher            // host "*"
	hasPorts bool                    // some host rule lists host:port
	def      *Action                 // the URL map default
}

// wildHost is a suffix wildcard host: "*.example.com" has suffix ".example.com".
type wildHost struct {
	suffix string
	pm     *pathMatcher
}

// pathMatcher is a compiled pathMatchers[] entry.
type pathMatcher struct {
	def      *Action
	exact    map[string]*Action // path rules without '*'
	prefixes []prefixRule       // "P/*" path rules, longest first
	routes   []matchRule        // route rules' matchRules, by priority then order
}

type prefixRule struct {
	prefix string // "P/" of "P/*"
	action *Action
}

type pathKind uint8

const (
	pathAny pathKind = iota // no path predicate
	pathPrefix
	pathFull
	pathRegex
	pathTmpl
)

// matchRule is one compiled matchRules[] entry with the action of its
// route rule. The matchRules of one route rule are adjacent in
// pathMatcher.routes, so a linear scan is priority order and OR.
type matchRule struct {
	kind       pathKind
	value      string // prefix or full path
	ignoreCase bool
	re         *regexp.Regexp
	tmpl       *pathTemplate
	headers    []headerMatch
	queries    []queryMatch
	action     *Action
}

// Compile compiles a URL map. It checks what matching depends on (one
// default per level, unique hosts and path rules, known path matchers,
// regexes, templates, redirect codes, weights) and reports the first
// problem with its field path. Range checks that do not affect matching
// are config.Validate's job.
func Compile(m *config.URLMap) (*Table, error) {
	base := "urlMaps[" + m.Name + "]"
	t := &Table{name: m.Name, exact: map[string]*pathMatcher{}}
	var urlMapHA []*config.HTTPHeaderAction
	if m.HeaderAction != nil {
		urlMapHA = []*config.HTTPHeaderAction{m.HeaderAction}
	}
	def, err := compileAction(base+".default", m.DefaultService, m.DefaultRouteAction, m.DefaultURLRedirect, urlMapHA, defaultMatch())
	if err != nil {
		return nil, err
	}
	if def == nil {
		return nil, fmt.Errorf("%s: no default: set defaultService, defaultRouteAction.weightedBackendServices or defaultUrlRedirect", base)
	}
	t.def = def

	matchers := map[string]*pathMatcher{}
	for i := range m.PathMatchers {
		pm := &m.PathMatchers[i]
		if _, dup := matchers[pm.Name]; dup {
			return nil, fmt.Errorf("%s.pathMatchers[%s]: duplicate path matcher name", base, pm.Name)
		}
		c, err := compilePathMatcher(base+".pathMatchers["+pm.Name+"]", pm, urlMapHA, def)
		if err != nil {
			return nil, err
		}
		matchers[pm.Name] = c
	}

	seen := map[string]bool{}
	for i, hr := range m.HostRules {
		pm := matchers[hr.PathMatcher]
		if pm == nil {
			return nil, fmt.Errorf("%s.hostRules[%d].pathMatcher: unknown path matcher %q", base, i, hr.PathMatcher)
		}
		for _, h := range hr.Hosts {
			host := strings.ToLower(h)
			if name, port, ok := splitPort(host); ok {
				host = strings.TrimSuffix(name, ".") + ":" + port
				t.hasPorts = true
			} else {
				host = strings.TrimSuffix(host, ".")
			}
			if seen[host] {
				return nil, fmt.Errorf("%s.hostRules[%d].hosts: host %q is listed in more than one host rule", base, i, h)
			}
			seen[host] = true
			switch {
			case host == "*":
				t.star = pm
			case strings.HasPrefix(host, "*"):
				if host[1] != '.' && host[1] != '-' || strings.Contains(host[1:], "*") {
					return nil, fmt.Errorf("%s.hostRules[%d].hosts: %q: '*' must be followed by '.' or '-' and appear only first", base, i, h)
				}
				w := wildHost{suffix: host[1:], pm: pm}
				if strings.Contains(w.suffix, ":") {
					t.wildPort = append(t.wildPort, w)
				} else {
					t.wild = append(t.wild, w)
				}
			case host == "" || strings.Contains(host, "*"):
				return nil, fmt.Errorf("%s.hostRules[%d].hosts: %q is not a host name or wildcard", base, i, h)
			default:
				t.exact[host] = pm
			}
		}
	}
	longestFirst := func(w []wildHost) {
		sort.SliceStable(w, func(i, j int) bool { return len(w[i].suffix) > len(w[j].suffix) })
	}
	longestFirst(t.wild)
	longestFirst(t.wildPort)
	return t, nil
}

// Name is the URL map's name.
func (t *Table) Name() string { return t.name }

// Default is the URL map default action, used when no host rule matches.
func (t *Table) Default() *Action { return t.def }

// Services returns the names of every backend service (or backend
// bucket) some rule of the URL map can send a request to, sorted: the
// services a frontend serving it depends on.
func (t *Table) Services() []string {
	seen := map[string]bool{}
	add := func(a *Action) {
		if a != nil {
			for _, s := range a.Services {
				seen[s.Name] = true
			}
		}
	}
	add(t.def)
	pms := []*pathMatcher{t.star}
	for _, pm := range t.exact {
		pms = append(pms, pm)
	}
	for _, w := range append(slices.Clone(t.wild), t.wildPort...) {
		pms = append(pms, w.pm)
	}
	for _, pm := range pms {
		if pm == nil {
			continue
		}
		add(pm.def)
		for _, a := range pm.exact {
			add(a)
		}
		for _, r := range pm.prefixes {
			add(r.action)
		}
		for _, r := range pm.routes {
			add(r.action)
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func compilePathMatcher(base string, pm *config.PathMatcher, urlMapHA []*config.HTTPHeaderAction, urlMapDef *Action) (*pathMatcher, error) {
	has := urlMapHA
	if pm.HeaderAction != nil {
		has = append([]*config.HTTPHeaderAction{pm.HeaderAction}, urlMapHA...)
	}
	c := &pathMatcher{}
	def, err := compileAction(base+".default", pm.DefaultService, pm.DefaultRouteAction, pm.DefaultURLRedirect, has, defaultMatch())
	if err != nil {
		return nil, err
	}
	if def == nil {
		def = urlMapDef // Google requires a default; be lenient and fall through
	}
	c.def = def
	if len(pm.PathRules) > 0 && len(pm.RouteRules) > 0 {
		return nil, fmt.Errorf("%s: a path matcher has either pathRules or routeRules, not both", base)
	}
	for i := range pm.PathRules {
		pr := &pm.PathRules[i]
		for _, p := range pr.Paths {
			if err := c.addPathRule(fmt.Sprintf("%s.pathRules[%d](%s)", base, i, p), p, pr, has); err != nil {
				return nil, err
			}
		}
	}
	sort.SliceStable(c.prefixes, func(i, j int) bool { return len(c.prefixes[i].prefix) > len(c.prefixes[j].prefix) })
	if err := c.addRouteRules(base, pm.RouteRules, has); err != nil {
		return nil, err
	}
	return c, nil
}

// pathRulePattern checks one path of a path rule ("/exact" or "/prefix/*")
// and returns what its rewrite and redirect see as matched: the prefix
// before the trailing '*', or the whole path (prefixLen -1).
func pathRulePattern(src, p string) (matchInfo, error) {
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?#") {
		return matchInfo{}, fmt.Errorf("%s: a path must start with '/' and contain no '?' or '#'", src)
	}
	star := strings.IndexByte(p, '*')
	if star < 0 {
		return matchInfo{prefixLen: -1}, nil
	}
	if star != len(p)-1 || p[star-1] != '/' {
		return matchInfo{}, fmt.Errorf("%s: '*' is allowed only as the last character, right after '/'", src)
	}
	return matchInfo{prefixLen: len(p) - 1, prefix: p[:len(p)-1]}, nil
}

// addPathRule compiles one path p of path rule pr and adds it to the
// exact paths or to the prefixes; a path listed twice is an error.
func (c *pathMatcher) addPathRule(src, p string, pr *config.PathRule, has []*config.HTTPHeaderAction) error {
	mi, err := pathRulePattern(src, p)
	if err != nil {
		return err
	}
	a, err := compileAction(src, pr.Service, pr.RouteAction, pr.URLRedirect, has, mi)
	if err != nil {
		return err
	}
	if a == nil {
		return fmt.Errorf("%s: no service: set service, routeAction.weightedBackendServices or urlRedirect", src)
	}
	if mi.prefixLen < 0 {
		if c.exact == nil {
			c.exact = map[string]*Action{}
		}
		if c.exact[p] != nil {
			return fmt.Errorf("%s: path listed in more than one path rule", src)
		}
		c.exact[p] = a
		return nil
	}
	for _, q := range c.prefixes {
		if q.prefix == mi.prefix {
			return fmt.Errorf("%s: path listed in more than one path rule", src)
		}
	}
	c.prefixes = append(c.prefixes, prefixRule{prefix: mi.prefix, action: a})
	return nil
}

// addRouteRules compiles the route rules in priority order (stable, so
// the matchRules of one rule stay in order); two rules may not share a
// priority.
func (c *pathMatcher) addRouteRules(base string, rules []config.HTTPRouteRule, has []*config.HTTPHeaderAction) error {
	order := make([]int, len(rules))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return rules[order[i]].Priority < rules[order[j]].Priority })
	for k, i := range order {
		rr := &rules[i]
		src := fmt.Sprintf("%s.routeRules[priority=%d]", base, rr.Priority)
		if k > 0 && rules[order[k-1]].Priority == rr.Priority {
			return fmt.Errorf("%s: priority used by more than one route rule", src)
		}
		if err := c.addRouteRule(src, rr, has); err != nil {
			return err
		}
	}
	return nil
}

// addRouteRule appends one compiled matchRule per matchRules[] entry of
// rr (a rule without matchRules matches everything), each with its own
// action: the rewrite and redirect depend on what the entry matched.
func (c *pathMatcher) addRouteRule(src string, rr *config.HTTPRouteRule, has []*config.HTTPHeaderAction) error {
	rhas := has
	if rr.HeaderAction != nil {
		rhas = append([]*config.HTTPHeaderAction{rr.HeaderAction}, has...)
	}
	matches := rr.MatchRules
	if len(matches) == 0 {
		matches = []config.HTTPRouteRuleMatch{{}} // matches everything
	}
	for j := range matches {
		msrc := src
		if len(matches) > 1 {
			msrc = fmt.Sprintf("%s.matchRules[%d]", src, j)
		}
		mr, mi, err := compileMatch(msrc, &matches[j])
		if err != nil {
			return err
		}
		a, err := compileAction(msrc, rr.Service, rr.RouteAction, rr.URLRedirect, rhas, mi)
		if err != nil {
			return err
		}
		if a == nil {
			return fmt.Errorf("%s: no service: set service, routeAction.weightedBackendServices or urlRedirect", src)
		}
		mr.action = a
		c.routes = append(c.routes, mr)
	}
	return nil
}

// matchInfo is what a rule's path predicate tells its rewrite and redirect.
type matchInfo struct {
	prefixLen int    // bytes of the path the rule matched as a prefix; -1 = whole path
	prefix    string // the matched prefix as configured ("" = whole path)
	tmpl      *pathTemplate
}

// defaultMatch is the matched portion of a default: "/".
func defaultMatch() matchInfo { return matchInfo{prefixLen: 1, prefix: "/"} }

func compileMatch(src string, m *config.HTTPRouteRuleMatch) (matchRule, matchInfo, error) {
	var (
		mr matchRule
		mi = defaultMatch()
		n  int
	)
	mr.ignoreCase = m.IgnoreCase
	if m.PrefixMatch != "" {
		n++
		mr.kind, mr.value = pathPrefix, m.PrefixMatch
		mi = matchInfo{prefixLen: len(m.PrefixMatch), prefix: m.PrefixMatch}
	}
	if m.FullPathMatch != "" {
		n++
		mr.kind, mr.value = pathFull, m.FullPathMatch
		mi = matchInfo{prefixLen: -1}
	}
	if m.RegexMatch != "" {
		n++
		re, err := anchored(m.RegexMatch)
		if err != nil {
			return mr, mi, fmt.Errorf("%s.regexMatch: %v", src, err)
		}
		mr.kind, mr.re = pathRegex, re
		mi = matchInfo{prefixLen: -1}
	}
	if m.PathTemplateMatch != "" {
		n++
		tmpl, err := compileTemplate(m.PathTemplateMatch)
		if err != nil {
			return mr, mi, fmt.Errorf("%s.pathTemplateMatch: %v", src, err)
		}
		mr.kind, mr.tmpl = pathTmpl, tmpl
		mi = matchInfo{prefixLen: -1, tmpl: tmpl}
	}
	if n > 1 {
		return mr, mi, fmt.Errorf("%s: set only one of prefixMatch, fullPathMatch, regexMatch, pathTemplateMatch", src)
	}
	for i := range m.HeaderMatches {
		h, err := compileHeaderMatch(&m.HeaderMatches[i])
		if err != nil {
			return mr, mi, fmt.Errorf("%s.headerMatches[%d]: %v", src, i, err)
		}
		mr.headers = append(mr.headers, h)
	}
	for i := range m.QueryParameterMatches {
		q, err := compileQueryMatch(&m.QueryParameterMatches[i])
		if err != nil {
			return mr, mi, fmt.Errorf("%s.queryParameterMatches[%d]: %v", src, i, err)
		}
		mr.queries = append(mr.queries, q)
	}
	return mr, mi, nil
}

// anchored compiles an RE2 expression that must match the whole value.
func anchored(expr string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(expr); err != nil {
		return nil, err
	}
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// compileAction builds the action of a rule. It returns nil, nil when the
// rule names no service and no redirect (the caller decides whether that is
// an error).
func compileAction(src, service string, ra *config.HTTPRouteAction, rd *config.HTTPRedirectAction, has []*config.HTTPHeaderAction, mi matchInfo) (*Action, error) {
	a := &Action{Source: src, HeaderActions: has}
	ok, err := a.setTarget(src, service, ra, rd, mi)
	if err != nil || !ok {
		return nil, err
	}
	for _, s := range a.Services {
		a.total += uint64(s.Weight)
		a.cum = append(a.cum, a.total)
	}
	if a.Redirect == nil && a.total == 0 {
		return nil, fmt.Errorf("%s.routeAction.weightedBackendServices: weights sum to 0", src)
	}
	if ra == nil {
		return a, nil
	}
	if rw := ra.URLRewrite; rw != nil {
		if a.Redirect != nil {
			return nil, fmt.Errorf("%s: urlRewrite has no effect on a redirect", src)
		}
		if a.Rewrite, err = compileRewrite(src, rw, mi); err != nil {
			return nil, err
		}
	}
	if d := ra.Timeout; d != nil {
		a.Timeout = time.Duration(d.Seconds)*time.Second + time.Duration(d.Nanos)
	}
	a.Retry = ra.RetryPolicy
	a.Mirror = ra.RequestMirrorPolicy
	a.Fault = ra.FaultInjectionPolicy
	return a, nil
}

// setTarget sets where the action sends a request: exactly one of a
// service, a redirect or routeAction.weightedBackendServices. It reports
// false when the rule sets none of them (an error if it has a
// routeAction, which then lacks its services).
func (a *Action) setTarget(src, service string, ra *config.HTTPRouteAction, rd *config.HTTPRedirectAction, mi matchInfo) (bool, error) {
	var weighted []config.WeightedBackendService
	if ra != nil {
		weighted = ra.WeightedBackendServices
	}
	set := 0
	for _, b := range []bool{service != "", rd != nil, len(weighted) > 0} {
		if b {
			set++
		}
	}
	switch {
	case set == 0:
		if ra != nil {
			return false, fmt.Errorf("%s: a routeAction without weightedBackendServices needs a service", src)
		}
		return false, nil
	case set > 1:
		return false, fmt.Errorf("%s: set exactly one of service, urlRedirect, routeAction.weightedBackendServices", src)
	case service != "":
		a.Services = []WeightedService{{Name: config.RefName(service), Weight: 1}}
	case rd != nil:
		r, err := compileRedirect(src, rd, mi)
		if err != nil {
			return false, err
		}
		a.Redirect = r
	default:
		for i, w := range weighted {
			if w.Weight < 0 || w.Weight > 1000 {
				return false, fmt.Errorf("%s.routeAction.weightedBackendServices[%d].weight: %d is outside 0..1000", src, i, w.Weight)
			}
			a.Services = append(a.Services, WeightedService{Name: config.RefName(w.BackendService), Weight: w.Weight, HeaderAction: w.HeaderAction})
		}
	}
	return true, nil
}

// compileRewrite compiles routeAction.urlRewrite against what the rule
// matched (its prefix, or its path template's variables).
func compileRewrite(src string, rw *config.URLRewrite, mi matchInfo) (*Rewrite, error) {
	c := &Rewrite{Host: rw.HostRewrite, PathPrefix: rw.PathPrefixRewrite, PathTemplate: rw.PathTemplateRewrite, MatchedPrefix: mi.prefix, prefixLen: mi.prefixLen}
	if c.PathPrefix != "" && c.PathTemplate != "" {
		return nil, fmt.Errorf("%s.routeAction.urlRewrite: set only one of pathPrefixRewrite and pathTemplateRewrite", src)
	}
	if c.PathTemplate != "" {
		pieces, err := compileRewriteTemplate(c.PathTemplate, mi.tmpl)
		if err != nil {
			return nil, fmt.Errorf("%s.routeAction.urlRewrite: %v", src, err)
		}
		c.match, c.pieces = mi.tmpl, pieces
	}
	return c, nil
}

// redirectCode maps redirectResponseCode to the status sent.
func redirectCode(s string) (int, bool) {
	switch s {
	case "", "MOVED_PERMANENTLY_DEFAULT":
		return 301, true
	case "FOUND":
		return 302, true
	case "SEE_OTHER":
		return 303, true
	case "TEMPORARY_REDIRECT":
		return 307, true
	case "PERMANENT_REDIRECT":
		return 308, true
	}
	return 0, false
}

func compileRedirect(src string, rd *config.HTTPRedirectAction, mi matchInfo) (*Redirect, error) {
	code, ok := redirectCode(rd.RedirectResponseCode)
	if !ok {
		return nil, fmt.Errorf("%s.urlRedirect.redirectResponseCode: unknown code %q (want MOVED_PERMANENTLY_DEFAULT, FOUND, SEE_OTHER, TEMPORARY_REDIRECT or PERMANENT_REDIRECT)", src, rd.RedirectResponseCode)
	}
	if rd.PathRedirect != "" && rd.PrefixRedirect != "" {
		return nil, fmt.Errorf("%s.urlRedirect: set only one of pathRedirect and prefixRedirect", src)
	}
	return &Redirect{
		Code:          code,
		HTTPS:         rd.HTTPSRedirect,
		Host:          rd.HostRedirect,
		Path:          rd.PathRedirect,
		Prefix:        rd.PrefixRedirect,
		MatchedPrefix: mi.prefix,
		StripQuery:    rd.StripQuery,
		prefixLen:     mi.prefixLen,
	}, nil
}
