package config

import (
	"fmt"
	"regexp"
	"strings"
)

// urlMaps validates urlMaps[].
func (v *validator) urlMaps() {
	for i := range v.c.URLMaps {
		v.urlMap(at("urlMaps[%d]", i), &v.c.URLMaps[i])
	}
}

func (v *validator) urlMap(p string, um *URLMap) {
	v.defaults(p, um.DefaultService, um.DefaultRouteAction, um.DefaultURLRedirect)
	v.headerAction(p+".headerAction", um.HeaderAction)

	matchers := map[string]int{}
	for j := range um.PathMatchers {
		pm := &um.PathMatchers[j]
		pp := at("%s.pathMatchers[%d]", p, j)
		if v.name(pp+".name", pm.Name, "path matcher", "web-paths") {
			if first, dup := matchers[pm.Name]; dup {
				v.add(pp+".name", "give each path matcher its own name", "%q is already the name of pathMatchers[%d]", pm.Name, first)
			} else {
				matchers[pm.Name] = j
			}
		}
		v.pathMatcher(pp, pm)
	}

	hosts := map[string]int{}
	for j, hr := range um.HostRules {
		hp := at("%s.hostRules[%d]", p, j)
		if len(hr.Hosts) == 0 {
			v.add(hp+".hosts", "list at least one host, e.g. hosts: [example.com]", "no hosts are listed")
		}
		for k, h := range hr.Hosts {
			v.host(at("%s.hosts[%d]", hp, k), h, j, hosts)
		}
		switch {
		case hr.PathMatcher == "":
			v.add(hp+".pathMatcher", "name one of this URL map's pathMatchers", "a path matcher is required")
		default:
			if _, ok := matchers[hr.PathMatcher]; !ok {
				v.unknownRef(hp+".pathMatcher", hr.PathMatcher, "path matcher", p+".pathMatchers", matchers)
			}
		}
	}

	if len(um.Tests) > 100 {
		v.add(p+".tests", "keep at most 100 tests", "%d tests are listed", len(um.Tests))
	}
	for j, t := range um.Tests {
		tp := at("%s.tests[%d]", p, j)
		switch {
		case t.Path == "":
			v.add(tp+".path", "set the request path to test, e.g. path: /", "a path is required")
		case !strings.HasPrefix(t.Path, "/"):
			v.add(tp+".path", fmt.Sprintf("write it as %q", "/"+t.Path), "%q does not start with '/'", t.Path)
		}
		if t.Service == "" && t.ExpectedOutputURL == "" && t.ExpectedRedirectResponseCode == 0 {
			v.add(tp, "set service (the backend service expected), or expectedOutputUrl and expectedRedirectResponseCode for a redirect",
				"the test expects nothing")
		}
		if t.Service != "" {
			v.backendRef(tp+".service", t.Service)
			if t.ExpectedRedirectResponseCode != 0 {
				v.add(tp+".expectedRedirectResponseCode", "remove service, or remove expectedRedirectResponseCode",
					"a redirect test cannot also expect a service")
			}
		}
		if c := t.ExpectedRedirectResponseCode; c != 0 {
			switch c {
			case 301, 302, 303, 307, 308:
			default:
				v.add(tp+".expectedRedirectResponseCode", "use 301, 302, 303, 307 or 308", "%d is not a redirect status", c)
			}
		}
	}
}

// defaults checks the "exactly one default action" rule of a URL map or
// path matcher at p.
func (v *validator) defaults(p, service string, ra *HTTPRouteAction, redirect *HTTPRedirectAction) {
	v.exactlyOne(p, "default action", []string{"defaultService", "defaultUrlRedirect", "defaultRouteAction.weightedBackendServices"},
		service != "", redirect != nil, ra != nil && len(ra.WeightedBackendServices) > 0)
	if service != "" {
		v.backendRef(p+".defaultService", service)
	}
	v.routeAction(p+".defaultRouteAction", ra)
	v.redirect(p+".defaultUrlRedirect", redirect)
}

// pathMatcher validates one pathMatchers[] entry.
func (v *validator) pathMatcher(pp string, pm *PathMatcher) {
	v.defaults(pp, pm.DefaultService, pm.DefaultRouteAction, pm.DefaultURLRedirect)
	v.headerAction(pp+".headerAction", pm.HeaderAction)
	if len(pm.PathRules) > 0 && len(pm.RouteRules) > 0 {
		v.add(pp+".routeRules", "move the pathRules into routeRules (prefixMatch or fullPathMatch), or use a second path matcher",
			"a path matcher takes pathRules or routeRules, not both")
	}
	paths := map[string]int{}
	for j := range pm.PathRules {
		pr := &pm.PathRules[j]
		rp := at("%s.pathRules[%d]", pp, j)
		if len(pr.Paths) == 0 {
			v.add(rp+".paths", "list at least one path, e.g. paths: [/api/*]", "no paths are listed")
		}
		for k, path := range pr.Paths {
			v.rulePath(at("%s.paths[%d]", rp, k), path, j, paths)
		}
		v.action(rp, pr.Service, pr.RouteAction, pr.URLRedirect)
	}
	priorities := map[int]int{}
	for j := range pm.RouteRules {
		rr := &pm.RouteRules[j]
		rp := at("%s.routeRules[%d]", pp, j)
		if v.inRange(rp+".priority", int64(rr.Priority), 0, 2147483647) {
			if first, dup := priorities[rr.Priority]; dup {
				v.add(rp+".priority", "give each route rule of the path matcher its own priority (gaps are fine)",
					"priority %d is already used by routeRules[%d]", rr.Priority, first)
			} else {
				priorities[rr.Priority] = j
			}
		}
		v.maxLen(rp+".description", rr.Description, 1024)
		for k := range rr.MatchRules {
			v.matchRule(at("%s.matchRules[%d]", rp, k), &rr.MatchRules[k])
		}
		v.action(rp, rr.Service, rr.RouteAction, rr.URLRedirect)
		v.headerAction(rp+".headerAction", rr.HeaderAction)
	}
}

// action checks the "exactly one of service, urlRedirect,
// routeAction.weightedBackendServices" rule of a path or route rule.
func (v *validator) action(p, service string, ra *HTTPRouteAction, redirect *HTTPRedirectAction) {
	v.exactlyOne(p, "action", []string{"service", "urlRedirect", "routeAction.weightedBackendServices"},
		service != "", redirect != nil, ra != nil && len(ra.WeightedBackendServices) > 0)
	if service != "" {
		v.backendRef(p+".service", service)
	}
	v.routeAction(p+".routeAction", ra)
	v.redirect(p+".urlRedirect", redirect)
}

// rulePath checks one pathRules[].paths[] entry; seen maps paths to the
// rule that first listed them.
func (v *validator) rulePath(path, s string, rule int, seen map[string]int) {
	switch {
	case !strings.HasPrefix(s, "/"):
		v.add(path, fmt.Sprintf("write it as %q", "/"+s), "%q does not start with '/'", s)
		return
	case strings.ContainsAny(s, "?#"):
		v.add(path, "remove the query or fragment; paths match without them", "%q contains '?' or '#'", s)
		return
	case strings.Contains(s, "*") && (strings.Index(s, "*") != len(s)-1 || !strings.HasSuffix(s, "/*")):
		v.add(path, "use '*' only as the last character, right after '/', e.g. /videos/*", "%q has a misplaced '*'", s)
		return
	}
	if first, dup := seen[s]; dup {
		what := "pathRules[" + fmt.Sprint(first) + "]"
		if first == rule {
			what = "this rule"
		}
		v.add(path, "list each path in one rule only", "%q is already listed in %s", s, what)
		return
	}
	seen[s] = rule
}

// host checks one hostRules[].hosts[] entry; seen maps hosts to the rule
// that first listed them.
func (v *validator) host(path, h string, rule int, seen map[string]int) {
	if h == "" {
		v.add(path, "write a host name such as example.com or *.example.com", "the host is empty")
		return
	}
	if i := strings.IndexByte(h, '*'); i >= 0 {
		if i != 0 || strings.Count(h, "*") > 1 || len(h) > 1 && h[1] != '.' && h[1] != '-' {
			v.add(path, "use '*' only as the first character, followed by '.' or '-' (e.g. *.example.com), or alone",
				"%q has a misplaced '*'", h)
			return
		}
	}
	if first, dup := seen[h]; dup {
		v.add(path, "list each host in one host rule only", "%q is already listed in hostRules[%d]", h, first)
		return
	}
	seen[h] = rule
}

// matchRule validates one routeRules[].matchRules[] entry.
func (v *validator) matchRule(mp string, m *HTTPRouteRuleMatch) {
	v.exactlyOne(mp, "path match", []string{"prefixMatch", "fullPathMatch", "regexMatch", "pathTemplateMatch"},
		m.PrefixMatch != "", m.FullPathMatch != "", m.RegexMatch != "", m.PathTemplateMatch != "")
	for _, f := range []struct{ field, val string }{
		{"prefixMatch", m.PrefixMatch}, {"fullPathMatch", m.FullPathMatch}, {"pathTemplateMatch", m.PathTemplateMatch},
	} {
		if f.val != "" && !strings.HasPrefix(f.val, "/") {
			v.add(mp+"."+f.field, fmt.Sprintf("write it as %q", "/"+f.val), "%q does not start with '/'", f.val)
		}
		v.maxLen(mp+"."+f.field, f.val, 1024)
	}
	if m.RegexMatch != "" {
		v.regex(mp+".regexMatch", m.RegexMatch)
		if m.IgnoreCase {
			v.add(mp+".ignoreCase", "remove it and write (?i) at the start of the regex", "ignoreCase does not apply to regexMatch")
		}
	}
	for k := range m.HeaderMatches {
		hm := &m.HeaderMatches[k]
		hp := at("%s.headerMatches[%d]", mp, k)
		if hm.HeaderName == "" {
			v.add(hp+".headerName", "name the header to match, e.g. headerName: x-canary", "a header name is required")
		}
		v.exactlyOne(hp, "header matcher", []string{"exactMatch", "prefixMatch", "suffixMatch", "regexMatch", "presentMatch", "rangeMatch"},
			hm.ExactMatch != nil, hm.PrefixMatch != nil, hm.SuffixMatch != nil, hm.RegexMatch != nil, hm.PresentMatch != nil, hm.RangeMatch != nil)
		if hm.RegexMatch != nil {
			v.regex(hp+".regexMatch", *hm.RegexMatch)
		}
		if r := hm.RangeMatch; r != nil && r.RangeStart >= r.RangeEnd {
			v.add(hp+".rangeMatch", "make rangeStart smaller than rangeEnd (rangeEnd is exclusive)",
				"rangeStart %d is not below rangeEnd %d", r.RangeStart, r.RangeEnd)
		}
	}
	for k := range m.QueryParameterMatches {
		qm := &m.QueryParameterMatches[k]
		qp := at("%s.queryParameterMatches[%d]", mp, k)
		if qm.Name == "" {
			v.add(qp+".name", "name the query parameter to match", "a name is required")
		}
		v.exactlyOne(qp, "query parameter matcher", []string{"exactMatch", "presentMatch", "regexMatch"},
			qm.ExactMatch != nil, qm.PresentMatch != nil, qm.RegexMatch != nil)
		if qm.RegexMatch != nil {
			v.regex(qp+".regexMatch", *qm.RegexMatch)
		}
	}
}

// regex checks that s compiles as an RE2 regular expression.
func (v *validator) regex(path, s string) {
	if _, err := regexp.Compile(s); err != nil {
		msg := strings.TrimPrefix(err.Error(), "error parsing regexp: ")
		v.add(path, "write an RE2 regular expression (see https://github.com/google/re2/wiki/Syntax)", "invalid regular expression: %s", msg)
	}
}

// routeAction validates a route action (nil is fine).
func (v *validator) routeAction(p string, ra *HTTPRouteAction) {
	if ra == nil {
		return
	}
	// sum counts only weights in range; an out-of-range weight is reported
	// on its own and keeps the all-zero check quiet (1001 is not 0).
	sum, outOfRange := 0, false
	for j, w := range ra.WeightedBackendServices {
		wp := at("%s.weightedBackendServices[%d]", p, j)
		if w.BackendService == "" {
			v.add(wp+".backendService", "name the backend service to send this share to", "a backend service is required")
		} else {
			v.serviceRef(wp+".backendService", w.BackendService)
		}
		if v.inRange(wp+".weight", int64(w.Weight), 0, 1000) {
			sum += w.Weight
		} else {
			outOfRange = true
		}
		v.headerAction(wp+".headerAction", w.HeaderAction)
	}
	if len(ra.WeightedBackendServices) > 0 && sum == 0 && !outOfRange {
		v.add(p+".weightedBackendServices", "give at least one backend service a weight above 0", "all weights are 0, so no traffic can be sent")
	}
	if rw := ra.URLRewrite; rw != nil {
		if rw.PathPrefixRewrite != "" && rw.PathTemplateRewrite != "" {
			v.add(p+".urlRewrite", "keep one of pathPrefixRewrite and pathTemplateRewrite",
				"pathPrefixRewrite and pathTemplateRewrite are both set; they exclude each other")
		}
		v.maxLen(p+".urlRewrite.hostRewrite", rw.HostRewrite, 255)
		v.maxLen(p+".urlRewrite.pathPrefixRewrite", rw.PathPrefixRewrite, 1024)
	}
	v.duration(p+".timeout", ra.Timeout)
	if rp := ra.RetryPolicy; rp != nil {
		v.intRange(p+".retryPolicy.numRetries", rp.NumRetries, 1, 25)
		v.duration(p+".retryPolicy.perTryTimeout", rp.PerTryTimeout)
		for j, cond := range rp.RetryConditions {
			v.enum(at("%s.retryPolicy.retryConditions[%d]", p, j), cond,
				"5xx", "gateway-error", "connect-failure", "retriable-4xx", "refused-stream",
				"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable")
		}
	}
	if mp := ra.RequestMirrorPolicy; mp != nil {
		if mp.BackendService == "" {
			v.add(p+".requestMirrorPolicy.backendService", "name the backend service that receives the copies", "a backend service is required")
		} else {
			v.serviceRef(p+".requestMirrorPolicy.backendService", mp.BackendService)
		}
		v.floatRange(p+".requestMirrorPolicy.mirrorPercent", mp.MirrorPercent, 0, 100)
	}
	if fp := ra.FaultInjectionPolicy; fp != nil {
		if d := fp.Delay; d != nil {
			v.duration(p+".faultInjectionPolicy.delay.fixedDelay", d.FixedDelay)
			v.floatRange(p+".faultInjectionPolicy.delay.percentage", d.Percentage, 0, 100)
		}
		if a := fp.Abort; a != nil {
			if a.HTTPStatus < 200 || a.HTTPStatus > 599 {
				v.add(p+".faultInjectionPolicy.abort.httpStatus", "use an HTTP status between 200 and 599, e.g. 503",
					"%d is out of range", a.HTTPStatus)
			}
			v.floatRange(p+".faultInjectionPolicy.abort.percentage", a.Percentage, 0, 100)
		}
	}
}

// redirect validates a redirect action (nil is fine).
func (v *validator) redirect(p string, r *HTTPRedirectAction) {
	if r == nil {
		return
	}
	if r.PathRedirect != "" && r.PrefixRedirect != "" {
		v.add(p, "keep one of pathRedirect and prefixRedirect", "pathRedirect and prefixRedirect are both set; they exclude each other")
	}
	v.enum(p+".redirectResponseCode", r.RedirectResponseCode,
		"MOVED_PERMANENTLY_DEFAULT", "FOUND", "SEE_OTHER", "TEMPORARY_REDIRECT", "PERMANENT_REDIRECT")
}

// headerAction validates a header action (nil is fine).
func (v *validator) headerAction(p string, ha *HTTPHeaderAction) {
	if ha == nil {
		return
	}
	for _, l := range []struct {
		field string
		opts  []HTTPHeaderOption
	}{{"requestHeadersToAdd", ha.RequestHeadersToAdd}, {"responseHeadersToAdd", ha.ResponseHeadersToAdd}} {
		for j, o := range l.opts {
			v.headerName(at("%s.%s[%d].headerName", p, l.field, j), o.HeaderName)
		}
	}
	for _, l := range []struct {
		field string
		names []string
	}{{"requestHeadersToRemove", ha.RequestHeadersToRemove}, {"responseHeadersToRemove", ha.ResponseHeadersToRemove}} {
		for j, n := range l.names {
			v.headerName(at("%s.%s[%d]", p, l.field, j), n)
		}
	}
}

// headerName checks an HTTP header name.
func (v *validator) headerName(path, name string) {
	if !isToken(name) {
		v.add(path, "use letters, digits and '-', e.g. X-Canary", "%q is not a valid header name", name)
	}
}
