package proxy

import (
	"net/http"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/h1"
)

// upgradeType returns the protocol a request asks to switch to
// ("websocket"), or "" when it is not an upgrade (Connection: upgrade and
// an Upgrade header are both required; HTTP/2 has no upgrades). An
// Upgrade header that offers h2c is not an upgrade: like net/http, the
// proxy answers such a request as plain HTTP/1.1 and strips Upgrade and
// HTTP2-Settings (hop-by-hop) instead of tunnelling it.
func upgradeType(h http.Header) string {
	up := h["Upgrade"]
	if len(up) == 0 || !h1.Listed(h["Connection"], "upgrade") || h1.Listed(up, "h2c") {
		return ""
	}
	return up[0]
}

// hostOnly returns the host part of a "host:port" or "[v6]:port" address
// without allocating.
func hostOnly(addr string) string {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 || strings.IndexByte(addr[i:], ']') >= 0 {
		return strings.Trim(addr, "[]")
	}
	h := addr[:i]
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1]
	}
	return h
}

// splitCustomHeader parses a backend service custom header "Name: value".
func splitCustomHeader(s string) (name, value string, ok bool) {
	name, value, ok = strings.Cut(s, ":")
	if !ok {
		return "", "", false
	}
	name = strings.TrimSpace(name)
	return http.CanonicalHeaderKey(name), strings.TrimSpace(value), name != ""
}

// applyCustom sets a backend service's customRequestHeaders or
// customResponseHeaders (each "Name: value"). Two entries with one name
// both appear.
func applyCustom(h http.Header, custom []string) {
	var set []string // names set so far, so a repeated name appends
	for _, c := range custom {
		name, value, ok := splitCustomHeader(c)
		if !ok {
			continue
		}
		seen := false
		for _, s := range set {
			if s == name {
				seen = true
			}
		}
		if seen {
			h[name] = append(h[name], value)
		} else {
			h[name] = []string{value}
			set = append(set, name)
		}
	}
}

// applyAdds removes then adds headers as one header action side says.
// replace (default true) sets the header, false appends a value.
func applyAdds(h http.Header, remove []string, add []config.HTTPHeaderOption) {
	for _, name := range remove {
		delete(h, http.CanonicalHeaderKey(name))
	}
	for _, o := range add {
		k := http.CanonicalHeaderKey(o.HeaderName)
		if o.Replace == nil || *o.Replace {
			h[k] = []string{o.HeaderValue}
		} else {
			h[k] = append(h[k], o.HeaderValue)
		}
	}
}

// headerPlan is the set of header transformations for one request: the
// backend service's custom headers, then the weighted service's header
// action, then the route's header actions in order (route rule, path
// matcher, URL map), so URL-map actions win over custom headers on a clash.
type headerPlan struct {
	svc     *config.BackendService
	weight  *config.HTTPHeaderAction
	actions []*config.HTTPHeaderAction
}

// rewritesRequest reports whether request applies any change.
func (p *headerPlan) rewritesRequest() bool {
	if p.svc != nil && len(p.svc.CustomRequestHeaders) > 0 {
		return true
	}
	if a := p.weight; a != nil && len(a.RequestHeadersToRemove)+len(a.RequestHeadersToAdd) > 0 {
		return true
	}
	for _, a := range p.actions {
		if len(a.RequestHeadersToRemove)+len(a.RequestHeadersToAdd) > 0 {
			return true
		}
	}
	return false
}

// request applies the plan to the headers sent to the backend.
func (p *headerPlan) request(h http.Header) {
	if p.svc != nil && len(p.svc.CustomRequestHeaders) > 0 {
		applyCustom(h, p.svc.CustomRequestHeaders)
	}
	if a := p.weight; a != nil {
		applyAdds(h, a.RequestHeadersToRemove, a.RequestHeadersToAdd)
	}
	for _, a := range p.actions {
		applyAdds(h, a.RequestHeadersToRemove, a.RequestHeadersToAdd)
	}
}

// response applies the plan to the headers sent to the client.
func (p *headerPlan) response(h http.Header) {
	if p.svc != nil && len(p.svc.CustomResponseHeaders) > 0 {
		applyCustom(h, p.svc.CustomResponseHeaders)
	}
	if a := p.weight; a != nil {
		applyAdds(h, a.ResponseHeadersToRemove, a.ResponseHeadersToAdd)
	}
	for _, a := range p.actions {
		applyAdds(h, a.ResponseHeadersToRemove, a.ResponseHeadersToAdd)
	}
}
