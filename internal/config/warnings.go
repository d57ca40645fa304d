package config

import (
	"fmt"
	"slices"
	"strings"
)

// Warnings lists what Spillway accepts but Google Cloud's global external
// Application Load Balancer would reject, so a config that works here may
// not import there as is; settings that leave a documented gap in the
// edge's defences (docs/security.md) or let a retry policy replay
// non-idempotent requests; and settings both accept that leave
// a backend service unable to serve; and fields that are set and accepted
// but have no effect in Spillway (or less than in Google Cloud), with what
// Google Cloud would do. Each entry starts with the field path, its
// elements named as in FieldError.Path.
//
// A config with no frontends is valid (simulate and validate need none)
// but serves nothing: that warning comes first.
func (c *Config) Warnings() []string {
	var w []string
	if len(c.Frontends) == 0 {
		w = append(w, "frontends: nothing is served: the config has no frontends, so spillway serve listens on its admin address only; add an HTTP frontend, e.g. frontends: [{name: web, address: 0.0.0.0:8080, urlMap: URL_MAP}], or a DNS frontend with dnsZones (docs/extensions.md)")
	}
	w = append(w, c.warnings()...)
	w = append(w, c.bgpWarnings()...)
	n := newNamer(c)
	for i, s := range w {
		if path, rest, ok := strings.Cut(s, ": "); ok && !strings.Contains(path, " ") {
			w[i] = n.path(path) + ": " + rest
		}
	}
	return w
}

// warnings lists the warnings, their paths with indexes.
func (c *Config) warnings() []string {
	var w []string
	// Every backend at capacityScaler 0 is how a whole service is drained,
	// so it is valid, but the service then has no capacity at all. A single
	// backend at 0 is already an error.
	for i := range c.BackendServices {
		bs := &c.BackendServices[i]
		if len(bs.Backends) < 2 {
			continue
		}
		drained := true
		for _, b := range bs.Backends {
			if b.CapacityScaler == nil || *b.CapacityScaler != 0 {
				drained = false
				break
			}
		}
		if drained {
			w = append(w, fmt.Sprintf("backendServices[%d].backends: every backend of backend service %s has capacityScaler 0, so every request routed to it gets 503 until a capacityScaler is raised above 0", i, bs.Name))
		}
	}
	if c.Spillway != nil && c.Spillway.HTTP1Server == "NET_HTTP" {
		for i := range c.Frontends {
			if c.Frontends[i].Protocol == "HTTPS" {
				w = append(w, fmt.Sprintf("spillway.http1Server: NET_HTTP does not refuse ambiguous request framing (Content-Length with Transfer-Encoding) on TLS connections, so HTTPS frontend frontends[%d] (%s) forwards such requests re-framed instead of answering 400; the default SPILLWAY server refuses them (docs/security.md)", i, c.Frontends[i].Name))
			}
		}
	}
	regex := func(path string) {
		w = append(w, path+": Google Cloud's global external Application Load Balancer rejects regexMatch; Spillway accepts it, but this URL map will not import into Google Cloud as is")
	}
	for i := range c.URLMaps {
		m := &c.URLMaps[i]
		for j := range m.PathMatchers {
			pm := &m.PathMatchers[j]
			for k := range pm.RouteRules {
				rr := &pm.RouteRules[k]
				for l := range rr.MatchRules {
					mr := &rr.MatchRules[l]
					base := fmt.Sprintf("urlMaps[%d].pathMatchers[%d].routeRules[%d].matchRules[%d]", i, j, k, l)
					if mr.RegexMatch != "" {
						regex(base + ".regexMatch")
					}
					for h := range mr.HeaderMatches {
						if mr.HeaderMatches[h].RegexMatch != nil {
							regex(fmt.Sprintf("%s.headerMatches[%d].regexMatch", base, h))
						}
					}
					for q := range mr.QueryParameterMatches {
						if mr.QueryParameterMatches[q].RegexMatch != nil {
							regex(fmt.Sprintf("%s.queryParameterMatches[%d].regexMatch", base, q))
						}
					}
				}
			}
		}
	}
	w = append(w, c.retryWarnings()...)
	return append(w, c.ignoredWarnings()...)
}

// retryWarnings warns, once per retryPolicy, about conditions that retry
// a request the backend got (after a response or a reset; not
// connect-failure, nor refused-stream, RFC 9113 §8.7): they replay
// body-less POST and PATCH requests, which Spillway never does without
// a policy (RFC 9110 §9.2.2). A route rule whose every match rule admits
// only idempotent methods (a :method headerMatch) is not warned.
func (c *Config) retryWarnings() []string {
	var w []string
	check := func(p string, ra *HTTPRouteAction, matches []HTTPRouteRuleMatch) {
		if ra == nil || ra.RetryPolicy == nil || idempotentOnly(matches) {
			return
		}
		var replay []string
		for _, cond := range ra.RetryPolicy.RetryConditions {
			if cond != "connect-failure" && cond != "refused-stream" {
				replay = append(replay, cond)
			}
		}
		if len(replay) > 0 {
			w = append(w, fmt.Sprintf("%s.retryPolicy: retryConditions %s replay body-less POST, PATCH and other non-idempotent requests after a backend answered or reset them, so a backend may act on one twice (RFC 9110 §9.2.2; without a retryPolicy they are not retried); restrict retryConditions to connect-failure and refused-stream, or set the policy on a route rule whose matchRules admit only idempotent methods (headerMatches: [{headerName: ':method', exactMatch: GET}])",
				p, strings.Join(replay, ", ")))
		}
	}
	for i := range c.URLMaps {
		m := &c.URLMaps[i]
		check(fmt.Sprintf("urlMaps[%d].defaultRouteAction", i), m.DefaultRouteAction, nil)
		for j := range m.PathMatchers {
			pm := &m.PathMatchers[j]
			base := fmt.Sprintf("urlMaps[%d].pathMatchers[%d]", i, j)
			check(base+".defaultRouteAction", pm.DefaultRouteAction, nil)
			for k := range pm.PathRules {
				check(fmt.Sprintf("%s.pathRules[%d].routeAction", base, k), pm.PathRules[k].RouteAction, nil)
			}
			for k := range pm.RouteRules {
				rr := &pm.RouteRules[k]
				check(fmt.Sprintf("%s.routeRules[%d].routeAction", base, k), rr.RouteAction, rr.MatchRules)
			}
		}
	}
	for i := range c.DNSZones {
		z := &c.DNSZones[i]
		if z.DNSSEC != nil && z.Transfer != nil {
			w = append(w, fmt.Sprintf("dnsZones[%d].transfer: zone %s is signed, and the signatures a secondary transfers expire 7 days after they were made; secondaries transfer again only when soa.serial changes, so bump it at least every 3 days (a daily reload with a date-based serial does) or the secondaries' copy stops validating (docs/dns.md)", i, z.Name))
		}
	}
	return w
}

// idempotentOnly reports match rules that each admit a single idempotent
// method: a :method headerMatch with exactMatch, not inverted.
func idempotentOnly(matches []HTTPRouteRuleMatch) bool {
	for _, mr := range matches {
		if !slices.ContainsFunc(mr.HeaderMatches, func(h HTTPHeaderMatch) bool {
			return h.HeaderName == ":method" && !h.InvertMatch && h.ExactMatch != nil && IdempotentMethod(*h.ExactMatch)
		}) {
			return false
		}
	}
	return len(matches) > 0
}

// IdempotentMethod reports the idempotent methods of RFC 9110 §9.2.2:
// GET, HEAD, OPTIONS, TRACE, PUT and DELETE.
func IdempotentMethod(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}
