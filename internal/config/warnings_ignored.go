package config

import (
	"fmt"
	"strings"
)

// ignoredWarnings lists the fields that are set, accepted and have no
// effect in Spillway (or less than in Google Cloud), each with what Google
// Cloud would do. docs/semantics.md keeps the full list of accepted
// fields Spillway ignores, including those that have no effect in Google
// Cloud either (descriptions, labels, output-only fields).
func (c *Config) ignoredWarnings() []string {
	var w []string
	for i := range c.HealthChecks {
		hc := &c.HealthChecks[i]
		if hc.LogConfig != nil && hc.LogConfig.Enable {
			w = append(w, fmt.Sprintf("healthChecks[%d].logConfig.enable: Spillway writes no Cloud Logging health check logs; health transitions go to serve's log (stderr) and GET /health on the admin API", i))
		}
	}
	for i := range c.ServiceLbPolicies {
		if ic := c.ServiceLbPolicies[i].IsolationConfig; ic != nil && (ic.IsolationGranularity != "" || ic.IsolationMode != "") {
			w = append(w, fmt.Sprintf("serviceLbPolicies[%d].isolationConfig: accepted and not enforced: Spillway spills traffic between regions as if it were unset, where Google Cloud would keep it within the isolation granularity", i))
		}
	}
	for i := range c.BackendServices {
		w = append(w, c.backendServiceIgnored(i)...)
	}
	for i, sp := range c.SecurityPolicies {
		if ao := sp.AdvancedOptionsConfig; ao != nil && ao.JSONCustomConfig != nil && !strings.HasPrefix(ao.JSONParsing, "STANDARD") {
			w = append(w, fmt.Sprintf("securityPolicies[%d].advancedOptionsConfig.jsonCustomConfig: has no effect without jsonParsing: STANDARD (Google applies it only then; these bodies are inspected whole): set jsonParsing: STANDARD, or remove jsonCustomConfig", i))
		}
	}
	return w
}

// backendServiceIgnored is ignoredWarnings for backendServices[i].
func (c *Config) backendServiceIgnored(i int) []string {
	var w []string
	bs := &c.BackendServices[i]
	p := fmt.Sprintf("backendServices[%d]", i)
	if cd := bs.ConnectionDraining; cd != nil {
		timeout := DefaultBackendTimeoutSec
		if bs.TimeoutSec != nil {
			timeout = *bs.TimeoutSec
		}
		if cd.DrainingTimeoutSec < timeout {
			w = append(w, fmt.Sprintf("%s.connectionDraining.drainingTimeoutSec: Spillway does not cut requests in flight to an endpoint that a reload removes: they run to completion, up to the request timeout (timeoutSec %d s, or a route's timeout); Google Cloud ends them after drainingTimeoutSec (%d s)", p, timeout, cd.DrainingTimeoutSec))
		}
	}
	if bs.LocalityLbPolicy == "WEIGHTED_ROUND_ROBIN" {
		w = append(w, p+".localityLbPolicy: WEIGHTED_ROUND_ROBIN weighs endpoints by the ORCA load reports backends send; Spillway reads none and balances ROUND_ROBIN")
	}
	if bs.LogConfig != nil && bs.LogConfig.Enable && (c.Spillway == nil || c.Spillway.AccessLog == nil || !c.Spillway.AccessLog.Enable) {
		w = append(w, p+".logConfig.enable: requests are logged only to Spillway's access log, which is off: set spillway.accessLog.enable (docs/operations.md)")
	}
	for j, b := range bs.Backends {
		if b.Failover {
			w = append(w, fmt.Sprintf("%s.backends[%d].failover: failover backends belong to internal passthrough Network Load Balancers; an Application Load Balancer (and Spillway) ignores the flag: use preference or a service LB policy's failoverConfig", p, j))
		}
	}
	for _, side := range []struct {
		field   string
		headers []string
	}{{"customRequestHeaders", bs.CustomRequestHeaders}, {"customResponseHeaders", bs.CustomResponseHeaders}} {
		for j, h := range side.headers {
			w = append(w, headerVariableIgnored(fmt.Sprintf("%s.%s[%d]", p, side.field, j), h)...)
		}
	}
	return w
}

// headerVariableIgnored warns about the variables of custom header h (at
// path) that Spillway cannot know or that are not variables at all.
func headerVariableIgnored(path, h string) []string {
	var w []string
	_, value, _ := strings.Cut(h, ":")
	var empty, literal []string
	for _, name := range HeaderVariables(value) {
		switch HeaderVariable(name) {
		case HeaderVariableEmpty:
			empty = append(empty, "{"+name+"}")
		case HeaderVariableLiteral:
			literal = append(literal, "{"+name+"}")
		}
	}
	if len(empty) > 0 {
		w = append(w, fmt.Sprintf("%s: Spillway cannot know %s (no client geography, RTT, CDN, TLS fingerprint or those client certificate fields): each expands to an empty value, as Google Cloud's does when it cannot determine one", path, strings.Join(empty, ", ")))
	}
	if len(literal) > 0 {
		w = append(w, fmt.Sprintf("%s: %s is not a Google Cloud header variable, so it is sent as written, braces included (Google Cloud rejects the backend service); docs/semantics.md lists the variables", path, strings.Join(literal, ", ")))
	}
	return w
}
