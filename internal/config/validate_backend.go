package config

import (
	"fmt"
	"slices"
	"strings"
)

// backendServices validates backendServices[].
func (v *validator) backendServices() {
	for i := range v.c.BackendServices {
		v.backendService(at("backendServices[%d]", i), &v.c.BackendServices[i])
	}
}

func (v *validator) backendService(p string, bs *BackendService) {
	switch bs.LoadBalancingScheme {
	case "", "EXTERNAL_MANAGED", "EXTERNAL":
	case "INTERNAL", "INTERNAL_MANAGED", "INTERNAL_SELF_MANAGED", "EXTERNAL_PASSTHROUGH":
		v.add(p+".loadBalancingScheme", "use EXTERNAL_MANAGED",
			"%s is not supported: Spillway is a global external load balancer", bs.LoadBalancingScheme)
	default:
		v.enum(p+".loadBalancingScheme", bs.LoadBalancingScheme, "EXTERNAL_MANAGED", "EXTERNAL")
	}
	v.enum(p+".protocol", bs.Protocol, "HTTP", "HTTPS", "HTTP2", "H2C")
	v.intRange(p+".timeoutSec", bs.TimeoutSec, 1, 86400)
	if bs.Port != 0 {
		v.port(p+".port", bs.Port)
	}
	if len(bs.HealthChecks) > 1 {
		v.add(p+".healthChecks", "keep one health check", "%d health checks are listed; a backend service takes at most one", len(bs.HealthChecks))
	}
	for j, hc := range bs.HealthChecks {
		v.ref(at("%s.healthChecks[%d]", p, j), hc, "health check", map[string]map[string]int{"healthChecks": v.hcs})
	}
	if bs.ServiceLbPolicy != "" {
		v.ref(p+".serviceLbPolicy", bs.ServiceLbPolicy, "service LB policy", map[string]map[string]int{"serviceLbPolicies": v.policies})
		if bs.LoadBalancingScheme == "EXTERNAL" {
			v.add(p+".serviceLbPolicy", "remove it, or use loadBalancingScheme EXTERNAL_MANAGED",
				"serviceLbPolicy cannot be set with loadBalancingScheme EXTERNAL (the classic Application Load Balancer)")
		}
	}
	v.enum(p+".localityLbPolicy", bs.LocalityLbPolicy,
		"ROUND_ROBIN", "LEAST_REQUEST", "RING_HASH", "RANDOM", "MAGLEV", "WEIGHTED_ROUND_ROBIN")
	v.sessionAffinity(p, bs)
	if od := bs.OutlierDetection; od != nil {
		v.outlierDetection(p+".outlierDetection", od)
	}
	if lc := bs.LogConfig; lc != nil {
		v.floatRange(p+".logConfig.sampleRate", lc.SampleRate, 0, 1)
		v.enum(p+".logConfig.optionalMode", lc.OptionalMode, "INCLUDE_ALL_OPTIONAL", "EXCLUDE_ALL_OPTIONAL", "CUSTOM")
	}
	if cd := bs.ConnectionDraining; cd != nil {
		v.inRange(p+".connectionDraining.drainingTimeoutSec", int64(cd.DrainingTimeoutSec), 0, 3600)
	}
	for j, h := range bs.CustomRequestHeaders {
		v.customHeader(at("%s.customRequestHeaders[%d]", p, j), h)
	}
	for j, h := range bs.CustomResponseHeaders {
		v.customHeader(at("%s.customResponseHeaders[%d]", p, j), h)
	}
	if bs.EnableCDN {
		v.cdnPolicy(p+".cdnPolicy", bs.CdnPolicy, false)
	}
	if bs.Iap != nil && bs.Iap.Enabled {
		v.add(p+".iap.enabled", "set it to false, or remove iap, and put an authenticating proxy in front of the backends",
			"Spillway has no Identity-Aware Proxy: with IAP on, the backends would be served without the identity check")
	}
	v.backends(p, bs)
}

// sessionAffinity checks a backend service's sessionAffinity,
// affinityCookieTtlSec and consistentHash.
func (v *validator) sessionAffinity(p string, bs *BackendService) {
	switch bs.SessionAffinity {
	case "CLIENT_IP_PROTO", "CLIENT_IP_PORT_PROTO", "CLIENT_IP_NO_DESTINATION":
		v.add(p+".sessionAffinity", "use CLIENT_IP", "%s is for network load balancers, not HTTP", bs.SessionAffinity)
	case "STRONG_COOKIE_AFFINITY":
		v.add(p+".sessionAffinity", "use GENERATED_COOKIE or HTTP_COOKIE", "STRONG_COOKIE_AFFINITY is not supported yet")
	case "HEADER_FIELD":
		if bs.ConsistentHash == nil || bs.ConsistentHash.HTTPHeaderName == "" {
			v.add(p+".sessionAffinity", "name the header to hash, e.g. consistentHash: {httpHeaderName: X-User}",
				"HEADER_FIELD needs consistentHash.httpHeaderName")
		}
	default:
		v.enum(p+".sessionAffinity", bs.SessionAffinity, "NONE", "CLIENT_IP", "GENERATED_COOKIE", "HTTP_COOKIE", "HEADER_FIELD")
	}
	v.intRange(p+".affinityCookieTtlSec", bs.AffinityCookieTTLSec, 0, 1209600)
	if ch := bs.ConsistentHash; ch != nil {
		if ch.MinimumRingSize != nil {
			v.inRange(p+".consistentHash.minimumRingSize", *ch.MinimumRingSize, 1, 8388608)
		}
		if ch.HTTPCookie != nil {
			v.duration(p+".consistentHash.httpCookie.ttl", ch.HTTPCookie.TTL)
		}
	}
}

// outlierDetection validates backendService.outlierDetection.
func (v *validator) outlierDetection(p string, od *OutlierDetection) {
	atLeast1 := func(field string, n *int) {
		if n != nil && *n < 1 {
			v.add(p+"."+field, "use 1 or more", "%d is out of range", *n)
		}
	}
	notNeg := func(field string, n *int) {
		if n != nil && *n < 0 {
			v.add(p+"."+field, "use 0 or more", "%d is out of range", *n)
		}
	}
	atLeast1("consecutiveErrors", od.ConsecutiveErrors)
	atLeast1("consecutiveGatewayFailure", od.ConsecutiveGatewayFailure)
	v.intRange(p+".enforcingConsecutiveErrors", od.EnforcingConsecutiveErrors, 0, 100)
	v.intRange(p+".enforcingConsecutiveGatewayFailure", od.EnforcingConsecutiveGatewayFailure, 0, 100)
	v.intRange(p+".enforcingSuccessRate", od.EnforcingSuccessRate, 0, 100)
	v.intRange(p+".maxEjectionPercent", od.MaxEjectionPercent, 0, 100)
	notNeg("successRateMinimumHosts", od.SuccessRateMinimumHosts)
	notNeg("successRateRequestVolume", od.SuccessRateRequestVolume)
	notNeg("successRateStdevFactor", od.SuccessRateStdevFactor)
	v.duration(p+".interval", od.Interval)
	v.duration(p+".baseEjectionTime", od.BaseEjectionTime)
}

// customHeader checks a "Name: value" header line.
func (v *validator) customHeader(path, h string) {
	name, _, ok := strings.Cut(h, ":")
	if !ok || !isToken(strings.TrimSpace(name)) {
		v.add(path, `write it as "Name: value", e.g. "X-TLS-Version: {tls_version}"`, "%q is not of the form \"Name: value\"", h)
	}
}

// isToken reports whether s is a valid HTTP header name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		ch := s[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", ch) >= 0 {
			continue
		}
		return false
	}
	return true
}

// backends validates the backends of one backend service.
func (v *validator) backends(p string, bs *BackendService) {
	type seenGroup struct {
		kind groupKind
		name string
	}
	seen := map[seenGroup]int{}
	firstKind, firstAt := kindUnknown, -1
	for j := range bs.Backends {
		b := &bs.Backends[j]
		bp := at("%s.backends[%d]", p, j)
		kind, name := v.groupRef(bp+".group", b.Group)
		if kind != kindUnknown {
			key := seenGroup{kind, name}
			if first, dup := seen[key]; dup {
				v.add(bp+".group", "list each group once per backend service",
					"group %q is already backends[%d]", name, first)
			}
			seen[key] = j
			switch {
			case firstKind == kindUnknown:
				firstKind, firstAt = kind, j
			case kind != firstKind:
				v.add(bp+".group", "use a separate backend service for instance groups and for network endpoint groups",
					"%s %q cannot be mixed with the %s of backends[%d]", kindName(kind), name, kindName(firstKind), firstAt)
			}
			if kind == kindInstanceGroup {
				v.namedPort(p, bp, bs, name)
			}
			if kind == kindNEG {
				v.serverlessBackend(p, bp, bs, name)
			}
		}
		v.backend(bp, b, kind, bs, kind == kindNEG && v.serverlessNEG(name))
	}
}

// kindName names a group kind for messages.
func kindName(k groupKind) string {
	if k == kindNEG {
		return "network endpoint group"
	}
	return "instance group"
}

// namedPort checks that the instance group has the service's portName.
func (v *validator) namedPort(p, bp string, bs *BackendService, group string) {
	portName := bs.PortName
	path := p + ".portName"
	if portName == "" {
		portName, path = DefaultPortName, bp+".group"
	}
	ig := &v.c.InstanceGroups[v.igs[group]]
	var names []string
	for _, np := range ig.NamedPorts {
		if np.Name == portName {
			return
		}
		names = append(names, np.Name)
	}
	fix := fmt.Sprintf("add namedPorts: [{name: %s, port: 80}] to instance group %q", portName, group)
	if len(names) > 0 {
		fix += ", or set portName to one of " + strings.Join(names, ", ")
	}
	v.add(path, fix, "instance group %q has no named port %q", group, portName)
}

// backend validates one backends[] entry of bs; kind is its group's kind
// (kindUnknown when the group did not resolve).
// serverless marks a SERVERLESS group, whose balancingMode is not
// checked: gcloud writes UTILIZATION (add-backend's default) for it, and
// a serverless group is one endpoint with no capacity to balance by.
func (v *validator) backend(bp string, b *Backend, kind groupKind, bs *BackendService, serverless bool) {
	declared := b.BalancingMode
	if serverless && declared == "UTILIZATION" {
		declared = ""
	}
	mode := v.balancingMode(bp, declared, kind, bs.Protocol)
	v.capacityScaler(bp, b.CapacityScaler, len(bs.Backends))
	v.backendTargets(bp, b, kind)
	if mode == "RATE" {
		v.rateTargets(bp, b, kind)
	}
	if b.MaxUtilization != nil {
		v.floatRange(bp+".maxUtilization", b.MaxUtilization, 0, 1)
		if mode != "UTILIZATION" && mode != "" {
			v.add(bp+".maxUtilization", "remove it, or use balancingMode UTILIZATION", "maxUtilization does not apply with balancingMode %s", mode)
		}
	}
	if b.Preference != "" {
		if v.enum(bp+".preference", b.Preference, "PREFERRED", "DEFAULT", "PREFERENCE_UNSPECIFIED") && bs.LoadBalancingScheme == "EXTERNAL" {
			v.add(bp+".preference", "remove it, or use loadBalancingScheme EXTERNAL_MANAGED",
				"preference cannot be set with loadBalancingScheme EXTERNAL")
		}
	}
}

// balancingMode checks a backend's balancingMode and returns the mode
// in effect ("" when it is not one Spillway balances by).
func (v *validator) balancingMode(bp, mode string, kind groupKind, protocol string) string {
	switch mode {
	case "":
		switch kind {
		case kindInstanceGroup:
			mode = "UTILIZATION"
		case kindNEG:
			mode = "RATE"
		}
	case "RATE", "UTILIZATION":
		if kind == kindNEG && mode == "UTILIZATION" {
			v.add(bp+".balancingMode", "use RATE with maxRatePerEndpoint",
				"UTILIZATION is not available for network endpoint groups")
		}
	case "CONNECTION":
		// Google takes CONNECTION only for TCP, SSL and UDP backend
		// services (proxy and passthrough Network Load Balancers); every
		// protocol Spillway accepts is an HTTP one. An unknown protocol is
		// reported on its own.
		if protocol == "" {
			protocol = "HTTP"
		}
		if slices.Contains([]string{"HTTP", "HTTPS", "HTTP2", "H2C"}, protocol) {
			fix := "use RATE or UTILIZATION"
			switch kind {
			case kindNEG:
				fix = "use RATE with maxRatePerEndpoint"
			case kindInstanceGroup:
				fix = "use RATE with maxRatePerInstance, or UTILIZATION"
			}
			v.add(bp+".balancingMode", fix+"; CONNECTION is for TCP, SSL and UDP backend services",
				"CONNECTION is not available for backend services with protocol %s", protocol)
		}
		mode = ""
	case "IN_FLIGHT", "CUSTOM_METRICS":
		v.add(bp+".balancingMode", "use RATE or UTILIZATION", "%s is not supported yet", mode)
		mode = ""
	default:
		v.enum(bp+".balancingMode", mode, "RATE", "UTILIZATION")
		mode = ""
	}

	return mode
}

// capacityScaler checks a backend's capacityScaler; n is how many
// backends the service has.
func (v *validator) capacityScaler(bp string, cs *float64, n int) {
	if cs == nil {
		return
	}
	switch {
	case *cs != 0 && (*cs < 0.1 || *cs > 1):
		v.add(bp+".capacityScaler", "use 0 to drain the backend, or a value between 0.1 and 1.0", "%s is out of range", fmtFloat(*cs))
	case *cs == 0 && n == 1:
		v.add(bp+".capacityScaler", "add another backend before draining this one, or use a value between 0.1 and 1.0",
			"0 would drain the only backend of the service")
	}
}

// backendTargets checks that a backend's targets fit its kind of group
// and are not negative.
func (v *validator) backendTargets(bp string, b *Backend, kind groupKind) {
	// Targets that only fit one kind of group.
	perKind := []struct {
		field string
		set   bool
		kind  groupKind
		alt   string
	}{
		{"maxRatePerInstance", b.MaxRatePerInstance != nil, kindInstanceGroup, "maxRatePerEndpoint"},
		{"maxConnectionsPerInstance", b.MaxConnectionsPerInstance != nil, kindInstanceGroup, "maxConnectionsPerEndpoint"},
		{"maxRatePerEndpoint", b.MaxRatePerEndpoint != nil, kindNEG, "maxRatePerInstance"},
		{"maxConnectionsPerEndpoint", b.MaxConnectionsPerEndpoint != nil, kindNEG, "maxConnectionsPerInstance"},
	}
	for _, f := range perKind {
		if f.set && kind != kindUnknown && kind != f.kind {
			v.add(bp+"."+f.field, fmt.Sprintf("use %s instead", f.alt),
				"%s applies to %ss only", f.field, kindName(f.kind))
		}
	}
	v.notNegativeInt(bp+".maxRate", b.MaxRate)
	v.notNegativeFloat(bp+".maxRatePerInstance", b.MaxRatePerInstance)
	v.notNegativeFloat(bp+".maxRatePerEndpoint", b.MaxRatePerEndpoint)
	v.notNegativeInt(bp+".maxConnections", b.MaxConnections)
	v.notNegativeInt(bp+".maxConnectionsPerInstance", b.MaxConnectionsPerInstance)
	v.notNegativeInt(bp+".maxConnectionsPerEndpoint", b.MaxConnectionsPerEndpoint)
}

// rateTargets checks the targets of a backend balanced by RATE: one
// target rate, no connection target.
func (v *validator) rateTargets(bp string, b *Backend, kind groupKind) {
	rates := setNames([]string{"maxRate", "maxRatePerInstance", "maxRatePerEndpoint"},
		b.MaxRate != nil, b.MaxRatePerInstance != nil, b.MaxRatePerEndpoint != nil)
	conns := setNames([]string{"maxConnections", "maxConnectionsPerInstance", "maxConnectionsPerEndpoint"},
		b.MaxConnections != nil, b.MaxConnectionsPerInstance != nil, b.MaxConnectionsPerEndpoint != nil)
	targets := func(kinds ...string) string {
		var out []string
		for _, k := range kinds {
			switch {
			case strings.HasSuffix(k, "PerInstance") && kind == kindNEG, strings.HasSuffix(k, "PerEndpoint") && kind == kindInstanceGroup:
				continue
			}
			out = append(out, k)
		}
		return strings.Join(out, ", ")
	}
	if len(conns) > 0 {
		v.add(bp+"."+conns[0], "remove it; connection targets are for TCP, SSL and UDP backend services", "%s does not apply with balancingMode RATE", conns[0])
	}
	if len(rates) > 1 {
		v.add(bp+"."+rates[1], "keep exactly one of "+targets("maxRate", "maxRatePerInstance", "maxRatePerEndpoint"),
			"%s are both set; balancingMode RATE takes one target", joinAnd(rates))
	} else if len(rates) == 0 && b.BalancingMode == "RATE" {
		v.add(bp+".balancingMode", "set one of "+targets("maxRate", "maxRatePerInstance", "maxRatePerEndpoint"),
			"balancingMode RATE needs a target rate")
	}
}

func (v *validator) notNegativeInt(path string, n *int) {
	if n != nil && *n < 0 {
		v.add(path, "use 0 or more", "%d is negative", *n)
	}
}

func (v *validator) notNegativeFloat(path string, f *float64) {
	if f != nil && *f < 0 {
		v.add(path, "use 0 or more", "%s is negative", fmtFloat(*f))
	}
}
