package proxy

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"fmt"
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
// customResponseHeaders (each "Name: value") for a request from r, with
// the {variables} in values expanded. Two entries with one name both
// appear.
func applyCustom(h http.Header, custom []string, r *http.Request) {
	var set []string // names set so far, so a repeated name appends
	for _, c := range custom {
		name, value, ok := splitCustomHeader(c)
		if !ok {
			continue
		}
		value = expandVariables(value, r)
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

// expandVariables replaces the {variables} of a custom header value
// (config.HeaderVariable): those Spillway knows by their value for r,
// those Google Cloud defines and Spillway cannot know by "" (what Google
// Cloud sends when it cannot determine a value), and leaves any other
// {text} as it is.
func expandVariables(value string, r *http.Request) string {
	if strings.IndexByte(value, '{') < 0 {
		return value
	}
	var b strings.Builder
	for {
		open := strings.IndexByte(value, '{')
		end := -1
		if open >= 0 {
			end = strings.IndexByte(value[open:], '}')
		}
		if end < 0 {
			b.WriteString(value)
			return b.String()
		}
		name := value[open+1 : open+end]
		b.WriteString(value[:open])
		switch config.HeaderVariable(name) {
		case config.HeaderVariableExpanded:
			b.WriteString(variable(name, r))
		case config.HeaderVariableEmpty:
		default:
			b.WriteString(value[open : open+end+1])
		}
		value = value[open+end+1:]
	}
}

// variable is the value of one expanded header variable, in Google
// Cloud's format: tls_version TLSv1.2 or TLSv1.3, tls_cipher_suite the
// IANA id in four hex digits (C02F), client_protocol HTTP/1.1 or HTTP/2,
// client_encrypted and client_cert_present true or false,
// client_cert_sha256_fingerprint the base64 SHA-256 of the leaf. TLS
// variables are empty on cleartext connections.
func variable(name string, r *http.Request) string {
	if r == nil {
		return ""
	}
	cs := r.TLS
	switch name {
	case "client_encrypted":
		return fmt.Sprint(cs != nil)
	case "client_protocol":
		switch r.ProtoMajor {
		case 2:
			return "HTTP/2"
		case 3:
			return "HTTP/3"
		}
		return r.Proto
	case "client_cert_present":
		return fmt.Sprint(cs != nil && len(cs.PeerCertificates) > 0)
	}
	if cs == nil {
		return ""
	}
	switch name {
	case "tls_sni_hostname":
		// The client's: Go's TLS server accepts any bytes, line breaks
		// included, and only a host name goes into a header.
		if config.IsHostName(cs.ServerName) {
			return cs.ServerName
		}
	case "tls_version":
		switch cs.Version {
		case tls.VersionTLS10:
			return "TLSv1"
		case tls.VersionTLS11:
			return "TLSv1.1"
		case tls.VersionTLS12:
			return "TLSv1.2"
		case tls.VersionTLS13:
			return "TLSv1.3"
		}
	case "tls_cipher_suite":
		return fmt.Sprintf("%04X", cs.CipherSuite)
	case "client_cert_sha256_fingerprint":
		if len(cs.PeerCertificates) > 0 {
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			return base64.StdEncoding.EncodeToString(sum[:])
		}
	}
	return ""
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
	req     *http.Request // the client's, for custom header variables
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
		applyCustom(h, p.svc.CustomRequestHeaders, p.req)
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
		applyCustom(h, p.svc.CustomResponseHeaders, p.req)
	}
	if a := p.weight; a != nil {
		applyAdds(h, a.ResponseHeadersToRemove, a.ResponseHeadersToAdd)
	}
	for _, a := range p.actions {
		applyAdds(h, a.ResponseHeadersToRemove, a.ResponseHeadersToAdd)
	}
}
