package config

import (
	"fmt"
	"strings"
)

// healthChecks validates healthChecks[].
func (v *validator) healthChecks() {
	for i := range v.c.HealthChecks {
		v.healthCheck(at("healthChecks[%d]", i), &v.c.HealthChecks[i])
	}
}

func (v *validator) healthCheck(p string, hc *HealthCheck) {
	subs := []struct {
		field, typ string
		set        bool
	}{
		{"httpHealthCheck", "HTTP", hc.HTTPHealthCheck != nil},
		{"httpsHealthCheck", "HTTPS", hc.HTTPSHealthCheck != nil},
		{"http2HealthCheck", "HTTP2", hc.HTTP2HealthCheck != nil},
		{"tcpHealthCheck", "TCP", hc.TCPHealthCheck != nil},
		{"grpcHealthCheck", "GRPC", hc.GRPCHealthCheck != nil},
		{"grpcTlsHealthCheck", "GRPC_WITH_TLS", hc.GRPCTLSHealthCheck != nil},
	}
	switch hc.Type {
	case "":
		v.add(p+".type", "set type: HTTP, HTTPS, HTTP2, TCP, GRPC or GRPC_WITH_TLS", "a type is required")
	case "HTTP", "HTTPS", "HTTP2", "TCP", "GRPC", "GRPC_WITH_TLS":
		for _, s := range subs {
			if s.set && s.typ != hc.Type {
				v.add(p+"."+s.field, fmt.Sprintf("rename it to %s, or set type: %s", subField(hc.Type), s.typ),
					"%s does not match type %s", s.field, hc.Type)
			}
		}
	case "SSL":
		v.add(p+".type", "use HTTP, HTTPS, HTTP2, TCP, GRPC or GRPC_WITH_TLS", "type %s is not supported yet", hc.Type)
	default:
		v.enum(p+".type", hc.Type, "HTTP", "HTTPS", "HTTP2", "TCP", "GRPC", "GRPC_WITH_TLS")
	}

	v.intRange(p+".checkIntervalSec", hc.CheckIntervalSec, 1, 300)
	v.intRange(p+".timeoutSec", hc.TimeoutSec, 1, 300)
	v.intRange(p+".healthyThreshold", hc.HealthyThreshold, 1, 10)
	v.intRange(p+".unhealthyThreshold", hc.UnhealthyThreshold, 1, 10)
	v.intRange(p+".checkIntervalMs", hc.CheckIntervalMs, 10, 300000)
	if hc.TimeoutMs != nil && *hc.TimeoutMs < 1 {
		v.add(p+".timeoutMs", "use at least 1", "%d is out of range", *hc.TimeoutMs)
	}
	v.probeTiming(p, hc)

	for _, h := range []struct {
		field string
		hc    *HTTPHealthCheck
	}{{"httpHealthCheck", hc.HTTPHealthCheck}, {"httpsHealthCheck", hc.HTTPSHealthCheck}, {"http2HealthCheck", hc.HTTP2HealthCheck}} {
		if h.hc == nil {
			continue
		}
		sp := p + "." + h.field
		v.probePort(sp, h.hc.Port, h.hc.PortName, h.hc.PortSpecification)
		v.enum(sp+".proxyHeader", h.hc.ProxyHeader, "NONE", "PROXY_V1")
		if h.hc.RequestPath != "" && !strings.HasPrefix(h.hc.RequestPath, "/") {
			v.add(sp+".requestPath", fmt.Sprintf("write it as %q", "/"+h.hc.RequestPath), "%q does not start with '/'", h.hc.RequestPath)
		}
		v.maxLen(sp+".response", h.hc.Response, 1024)
	}
	if t := hc.TCPHealthCheck; t != nil {
		sp := p + ".tcpHealthCheck"
		v.probePort(sp, t.Port, t.PortName, t.PortSpecification)
		v.enum(sp+".proxyHeader", t.ProxyHeader, "NONE", "PROXY_V1")
		v.maxLen(sp+".request", t.Request, 1024)
		v.maxLen(sp+".response", t.Response, 1024)
	}
	v.grpcHealthChecks(p, hc)
}

// grpcHealthChecks checks the grpcHealthCheck and grpcTlsHealthCheck
// blocks: their port fields, and a service name of at most 1024 ASCII
// characters (Google's limits).
func (v *validator) grpcHealthChecks(p string, hc *HealthCheck) {
	for _, g := range []struct {
		field string
		hc    *GRPCHealthCheck
	}{{"grpcHealthCheck", hc.GRPCHealthCheck}, {"grpcTlsHealthCheck", hc.GRPCTLSHealthCheck}} {
		if g.hc == nil {
			continue
		}
		sp := p + "." + g.field
		v.probePort(sp, g.hc.Port, g.hc.PortName, g.hc.PortSpecification)
		v.maxLen(sp+".grpcServiceName", g.hc.GRPCServiceName, 1024)
		for _, r := range g.hc.GRPCServiceName {
			if r > 0x7e || r < 0x20 {
				v.add(sp+".grpcServiceName", "use printable ASCII characters only, e.g. grpc.health.v1.Health or my.pkg.Service",
					"%+q has a character outside printable ASCII", g.hc.GRPCServiceName)
				break
			}
		}
	}
}

// subField is the sub-object that goes with a health check type.
func subField(typ string) string {
	switch typ {
	case "HTTPS":
		return "httpsHealthCheck"
	case "HTTP2":
		return "http2HealthCheck"
	case "TCP":
		return "tcpHealthCheck"
	case "GRPC":
		return "grpcHealthCheck"
	case "GRPC_WITH_TLS":
		return "grpcTlsHealthCheck"
	}
	return "httpHealthCheck"
}

// probeTiming checks that a probe's timeout fits in its interval, in
// milliseconds, counting unset fields as their defaults.
func (v *validator) probeTiming(p string, hc *HealthCheck) {
	interval, intervalField := DefaultCheckIntervalSec*1000, "checkIntervalSec"
	intervalSet := false
	if hc.CheckIntervalSec != nil {
		interval, intervalSet = *hc.CheckIntervalSec*1000, true
	}
	if hc.CheckIntervalMs != nil {
		interval, intervalField, intervalSet = *hc.CheckIntervalMs, "checkIntervalMs", true
	}
	timeout, timeoutField := DefaultTimeoutSec*1000, "timeoutSec"
	timeoutSet := false
	if hc.TimeoutSec != nil {
		timeout, timeoutSet = *hc.TimeoutSec*1000, true
	}
	if hc.TimeoutMs != nil {
		timeout, timeoutField, timeoutSet = *hc.TimeoutMs, "timeoutMs", true
	}
	if timeout <= interval || timeout < 1 || interval < 1 {
		return
	}
	show := func(field string, ms int, set bool) string {
		s := fmt.Sprintf("%s %d", field, ms)
		if strings.HasSuffix(field, "Sec") {
			s = fmt.Sprintf("%s %d", field, ms/1000)
		}
		if !set {
			s += " (the default)"
		}
		return s
	}
	if timeoutSet || !intervalSet {
		v.add(p+"."+timeoutField, "make the timeout at most the check interval",
			"%s is longer than %s", show(timeoutField, timeout, timeoutSet), show(intervalField, interval, intervalSet))
		return
	}
	v.add(p+"."+intervalField, "set "+timeoutField+" to at most the check interval",
		"%s is shorter than %s", show(intervalField, interval, intervalSet), show(timeoutField, timeout, timeoutSet))
}

// probePort checks the port fields of a health check sub-object.
func (v *validator) probePort(p string, port *int, portName, spec string) {
	if port != nil {
		v.port(p+".port", *port)
	}
	if portName != "" {
		v.add(p+".portName", "remove it; use portSpecification: USE_SERVING_PORT to probe the backend service's port",
			"portName is not supported by the load balancer")
	}
	switch spec {
	case "", "USE_FIXED_PORT":
	case "USE_SERVING_PORT":
		if port != nil {
			v.add(p+".port", "remove port, or use portSpecification: USE_FIXED_PORT",
				"port is set but portSpecification is USE_SERVING_PORT")
		}
	case "USE_NAMED_PORT":
		v.add(p+".portSpecification", "use USE_SERVING_PORT (the backend service's port) or USE_FIXED_PORT",
			"USE_NAMED_PORT is not supported by the load balancer")
	default:
		v.enum(p+".portSpecification", spec, "USE_FIXED_PORT", "USE_SERVING_PORT")
	}
}

// maxLen checks a string's length in characters.
func (v *validator) maxLen(path, s string, n int) {
	if l := len([]rune(s)); l > n {
		v.add(path, fmt.Sprintf("shorten it to at most %d characters", n), "%d characters is too long", l)
	}
}

// serviceLbPolicies validates serviceLbPolicies[].
func (v *validator) serviceLbPolicies() {
	for i := range v.c.ServiceLbPolicies {
		sp := &v.c.ServiceLbPolicies[i]
		p := at("serviceLbPolicies[%d]", i)
		switch sp.LoadBalancingAlgorithm {
		case "SPRAY_TO_WORLD":
			v.add(p+".loadBalancingAlgorithm", "use WATERFALL_BY_REGION, SPRAY_TO_REGION or WATERFALL_BY_ZONE",
				"SPRAY_TO_WORLD is not supported by Spillway yet")
		default:
			v.enum(p+".loadBalancingAlgorithm", sp.LoadBalancingAlgorithm,
				"WATERFALL_BY_REGION", "SPRAY_TO_REGION", "WATERFALL_BY_ZONE", "LOAD_BALANCING_ALGORITHM_UNSPECIFIED")
		}
		if fc := sp.FailoverConfig; fc != nil {
			v.intRange(p+".failoverConfig.failoverHealthThreshold", fc.FailoverHealthThreshold, 1, 99)
		}
		if ic := sp.IsolationConfig; ic != nil {
			v.enum(p+".isolationConfig.isolationGranularity", ic.IsolationGranularity, "ISOLATION_GRANULARITY_UNSPECIFIED", "REGION")
			v.enum(p+".isolationConfig.isolationMode", ic.IsolationMode, "ISOLATION_MODE_UNSPECIFIED", "NEAREST", "STRICT")
		}
		v.maxLen(p+".description", sp.Description, 1024)
	}
}

// GRPCBlock is the gRPC block that goes with the health check's type:
// grpcTlsHealthCheck for GRPC_WITH_TLS, grpcHealthCheck otherwise (nil
// when unset).
func (hc *HealthCheck) GRPCBlock() *GRPCHealthCheck {
	if hc.Type == "GRPC_WITH_TLS" {
		return hc.GRPCTLSHealthCheck
	}
	return hc.GRPCHealthCheck
}
