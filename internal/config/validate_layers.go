package config

import (
	"net/netip"
	"strings"
	"time"
)

// DefaultLayerConnections is how many HTTP/2 connections an edge keeps to
// each regional-layer endpoint when regionalLayer.maxConnections is unset.
const DefaultLayerConnections = 4

// regionalLayer validates regions[i].regionalLayer (p is its path).
func (v *validator) regionalLayer(p string, l *RegionalLayer) {
	if l == nil {
		return
	}
	if len(l.Endpoints) == 0 {
		v.add(p+".endpoints", "list the regional layer's addresses, e.g. [\"198.51.100.10:8443\"]", "at least one endpoint is required")
	}
	seen := map[string]int{}
	for j, e := range l.Endpoints {
		ep := at("%s.endpoints[%d]", p, j)
		if !v.address(ep, e) {
			continue
		}
		if strings.HasPrefix(e, ":") {
			v.add(ep, "give the host too, e.g. 198.51.100.10:8443", "%q has no host", e)
		}
		if first, dup := seen[e]; dup {
			v.add(ep, "list each endpoint once", "%q is already endpoints[%d]", e, first)
		}
		seen[e] = j
	}
	v.enum(p+".protocol", l.Protocol, "H2C", "HTTP2")
	if l.Protocol != "HTTP2" {
		if l.ClientCertificate != nil {
			v.add(p+".clientCertificate", "remove it, or use protocol HTTP2", "a client certificate is only used with HTTP2 (TLS)")
		}
		if l.CAFile != "" {
			v.add(p+".caFile", "remove it, or use protocol HTTP2", "a CA file is only used with HTTP2 (TLS)")
		}
		if l.ServerName != "" {
			v.add(p+".serverName", "remove it, or use protocol HTTP2", "a server name is only used with HTTP2 (TLS)")
		}
	}
	if c := l.ClientCertificate; c != nil {
		if c.CertificateFile == "" {
			v.add(p+".clientCertificate.certificateFile", "give the path of the edge's PEM client certificate", "a certificate file is required")
		}
		if c.PrivateKeyFile == "" {
			v.add(p+".clientCertificate.privateKeyFile", "give the path of the PEM private key file", "a private key file is required")
		}
	}
	if l.MaxConnections < 0 || l.MaxConnections > 64 {
		v.add(p+".maxConnections", "use 1 to 64 (default 4)", "%d is out of range", l.MaxConnections)
	}
	v.layerHealthCheck(p+".healthCheck", l.HealthCheck)
}

// layerHealthCheck validates a regional layer's healthCheck (p is its
// path; h may be nil).
func (v *validator) layerHealthCheck(hp string, h *LayerHealthCheck) {
	if h == nil {
		return
	}
	if h.CheckIntervalMs < 0 || (h.CheckIntervalMs > 0 && h.CheckIntervalMs < 100) || h.CheckIntervalMs > 300000 {
		v.add(hp+".checkIntervalMs", "use 100 to 300000 (default 2000)", "%d is out of range", h.CheckIntervalMs)
	}
	interval, _, _, _ := h.Values()
	if h.TimeoutMs < 0 || time.Duration(h.TimeoutMs)*time.Millisecond > interval {
		v.add(hp+".timeoutMs", "use 1 up to checkIntervalMs (default 1000, or the interval when shorter)", "%d is out of range", h.TimeoutMs)
	}
	for _, t := range []struct {
		name string
		n    int
	}{{"healthyThreshold", h.HealthyThreshold}, {"unhealthyThreshold", h.UnhealthyThreshold}} {
		if t.n < 0 || t.n > 10 {
			v.add(hp+"."+t.name, "use 1 to 10 (default 2)", "%d is out of range", t.n)
		}
	}
}

// frontendLayer validates a frontend's layer and trustedEdges (p is its
// path).
func (v *validator) frontendLayer(p string, f *Frontend, proto string) {
	if f.Layer == "" {
		if len(f.TrustedEdges) > 0 {
			v.add(p+".trustedEdges", "remove it, or set layer: REGIONAL", "trustedEdges is only used by a REGIONAL frontend")
		}
		return
	}
	if !v.enum(p+".layer", f.Layer, LayerEdge, LayerRegional) {
		return
	}
	if proto == "DNS" {
		v.add(p+".layer", "remove it: DNS frontends have no proxy layer", "layer is only used by HTTP and HTTPS frontends")
		return
	}
	if f.Layer == LayerEdge {
		if len(f.TrustedEdges) > 0 {
			v.add(p+".trustedEdges", "remove it; it belongs on the REGIONAL frontend", "trustedEdges is only used by a REGIONAL frontend")
		}
		return
	}
	if f.Region == "" {
		v.add(p+".region", "name the region whose zones and endpoints this regional layer serves", "a REGIONAL frontend needs a region")
	}
	if len(f.TrustedEdges) == 0 && f.ServerTLSPolicy == "" {
		v.add(p+".trustedEdges", "list the edges' source prefixes (e.g. [\"192.0.2.0/24\"]), or use HTTPS with a serverTlsPolicy that verifies the edges' client certificates", "a REGIONAL frontend must say which edges it trusts")
	}
	for j, s := range f.TrustedEdges {
		if _, ok := ParseTrustedEdge(s); !ok {
			v.add(at("%s.trustedEdges[%d]", p, j), "write an IP prefix such as 192.0.2.0/24 or 2001:db8::/32, or one address", "%q is not an IP prefix", s)
		}
	}
}

// ParseTrustedEdge parses a trustedEdges entry: an IP prefix, or one
// address (a /32 or /128).
func ParseTrustedEdge(s string) (netip.Prefix, bool) {
	if pfx, err := netip.ParsePrefix(s); err == nil {
		return pfx.Masked(), true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), true
}

// Values returns the check's interval, timeout and thresholds with the
// defaults applied (h may be nil; the default timeout is the interval
// when that is shorter).
func (h *LayerHealthCheck) Values() (interval, timeout time.Duration, healthy, unhealthy int) {
	var c LayerHealthCheck
	if h != nil {
		c = *h
	}
	or := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	iv := or(c.CheckIntervalMs, DefaultLayerCheckIntervalMs)
	to := or(c.TimeoutMs, min(DefaultLayerCheckTimeoutMs, iv)) // the default fits a shorter interval
	return time.Duration(iv) * time.Millisecond, time.Duration(to) * time.Millisecond,
		or(c.HealthyThreshold, DefaultLayerHealthyThreshold), or(c.UnhealthyThreshold, DefaultLayerUnhealthyThreshold)
}
