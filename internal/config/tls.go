package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
)

// SslPolicy is a compute#sslPolicy: the TLS versions and cipher suites an
// HTTPS frontend accepts. A frontend names it in sslPolicy, as a target
// HTTPS proxy does. TLS 1.3 cipher suites are not configurable (as in
// Google Cloud); the policy's features govern TLS 1.0 to 1.2.
type SslPolicy struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	OutputOnly
	// Profile is COMPATIBLE (the default), MODERN, RESTRICTED or CUSTOM.
	Profile string `json:"profile,omitempty"`
	// MinTLSVersion is TLS_1_0 (the default), TLS_1_1, TLS_1_2 or TLS_1_3.
	MinTLSVersion string `json:"minTlsVersion,omitempty"`
	// CustomFeatures lists the cipher suites of profile CUSTOM.
	CustomFeatures []string `json:"customFeatures,omitempty"`
	// EnabledFeatures is output only in Google Cloud; it is accepted so
	// exported policies load, and ignored.
	EnabledFeatures []string `json:"enabledFeatures,omitempty"`
}

// ServerTLSPolicy is a networksecurity ServerTlsPolicy. A frontend names
// it in serverTlsPolicy, as a target HTTPS proxy does; Spillway uses its
// mtlsPolicy (client certificate validation).
type ServerTLSPolicy struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	MTLSPolicy  *MTLSPolicy `json:"mtlsPolicy,omitempty"`
	CreateTime  string      `json:"createTime,omitempty"`
	UpdateTime  string      `json:"updateTime,omitempty"`
	OutputOnly
}

// MTLSPolicy is serverTlsPolicies[].mtlsPolicy.
type MTLSPolicy struct {
	// ClientValidationMode is ALLOW_INVALID_OR_MISSING_CLIENT_CERT (ask
	// for a certificate, accept any or none) or REJECT_INVALID (require a
	// certificate that chains to the trust config).
	ClientValidationMode string `json:"clientValidationMode,omitempty"`
	// ClientValidationTrustConfig names a trustConfigs[] entry (or links
	// to one, …/trustConfigs/NAME).
	ClientValidationTrustConfig string `json:"clientValidationTrustConfig,omitempty"`
}

// TrustConfig is a certificatemanager TrustConfig: the CA certificates
// client certificates are validated against.
type TrustConfig struct {
	Name        string       `json:"name"`
	Description string       `json:"description,omitempty"`
	TrustStores []TrustStore `json:"trustStores,omitempty"`
	CreateTime  string       `json:"createTime,omitempty"`
	UpdateTime  string       `json:"updateTime,omitempty"`
	OutputOnly
}

// TrustStore is trustConfigs[].trustStores[].
type TrustStore struct {
	TrustAnchors    []TrustAnchor `json:"trustAnchors,omitempty"`
	IntermediateCas []TrustAnchor `json:"intermediateCas,omitempty"`
}

// TrustAnchor is one CA: trustStores[].trustAnchors[] or
// trustStores[].intermediateCas[].
type TrustAnchor struct {
	// PemCertificate is the CA certificate in PEM, inline (Google Cloud).
	PemCertificate string `json:"pemCertificate,omitempty"`
	// PemCertificateFile is a Spillway extension: the path of a PEM file
	// (one or more certificates), read on every (re)load and whenever it
	// changes.
	PemCertificateFile string `json:"pemCertificateFile,omitempty"`
}

// TLS versions of sslPolicies[].minTlsVersion.
var tlsVersions = map[string]uint16{
	"TLS_1_0": tls.VersionTLS10,
	"TLS_1_1": tls.VersionTLS11,
	"TLS_1_2": tls.VersionTLS12,
	"TLS_1_3": tls.VersionTLS13,
}

// sslFeatures are the cipher suites of Google's SSL policies, by their
// customFeatures names, in Google's order (strongest first).
var sslFeatures = []struct {
	name string
	id   uint16
	// profiles lists the pre-defined profiles that enable it.
	profiles []string
}{
	{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, []string{"COMPATIBLE", "MODERN", "RESTRICTED"}},
	{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, []string{"COMPATIBLE", "MODERN", "RESTRICTED"}},
	{"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, []string{"COMPATIBLE", "MODERN", "RESTRICTED"}},
	{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, []string{"COMPATIBLE", "MODERN", "RESTRICTED"}},
	{"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, []string{"COMPATIBLE", "MODERN", "RESTRICTED"}},
	{"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, []string{"COMPATIBLE", "MODERN", "RESTRICTED"}},
	{"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, []string{"COMPATIBLE", "MODERN"}},
	{"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, []string{"COMPATIBLE", "MODERN"}},
	{"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, []string{"COMPATIBLE", "MODERN"}},
	{"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, []string{"COMPATIBLE", "MODERN"}},
	{"TLS_RSA_WITH_AES_128_GCM_SHA256", tls.TLS_RSA_WITH_AES_128_GCM_SHA256, []string{"COMPATIBLE"}},
	{"TLS_RSA_WITH_AES_256_GCM_SHA384", tls.TLS_RSA_WITH_AES_256_GCM_SHA384, []string{"COMPATIBLE"}},
	{"TLS_RSA_WITH_AES_128_CBC_SHA", tls.TLS_RSA_WITH_AES_128_CBC_SHA, []string{"COMPATIBLE"}},
	{"TLS_RSA_WITH_AES_256_CBC_SHA", tls.TLS_RSA_WITH_AES_256_CBC_SHA, []string{"COMPATIBLE"}},
	{"TLS_RSA_WITH_3DES_EDE_CBC_SHA", tls.TLS_RSA_WITH_3DES_EDE_CBC_SHA, []string{"COMPATIBLE"}},
}

// MinVersion returns the policy's minimum TLS version as a crypto/tls
// constant (TLS 1.0 when minTlsVersion is not set, as in Google Cloud).
// The policy must have passed validation.
func (p *SslPolicy) MinVersion() uint16 {
	if v, ok := tlsVersions[p.MinTLSVersion]; ok {
		return v
	}
	return tls.VersionTLS10
}

// CipherSuites returns the TLS 1.0–1.2 cipher suites the policy enables,
// as crypto/tls IDs: its profile's set, or its customFeatures for CUSTOM.
// The policy must have passed validation.
func (p *SslPolicy) CipherSuites() []uint16 {
	profile := p.Profile
	if profile == "" {
		profile = "COMPATIBLE"
	}
	var ids []uint16
	for _, f := range sslFeatures {
		if profile == "CUSTOM" && slices.Contains(p.CustomFeatures, f.name) ||
			slices.Contains(f.profiles, profile) {
			ids = append(ids, f.id)
		}
	}
	return ids
}

// sslPolicies validates sslPolicies[].
func (v *validator) sslPolicies() {
	var features []string
	for _, f := range sslFeatures {
		features = append(features, f.name)
	}
	for i := range v.c.SslPolicies {
		sp := &v.c.SslPolicies[i]
		p := at("sslPolicies[%d]", i)
		v.enum(p+".profile", sp.Profile, "COMPATIBLE", "MODERN", "RESTRICTED", "CUSTOM")
		v.enum(p+".minTlsVersion", sp.MinTLSVersion, "TLS_1_0", "TLS_1_1", "TLS_1_2", "TLS_1_3")
		switch {
		case sp.Profile == "CUSTOM" && len(sp.CustomFeatures) == 0 && sp.MinTLSVersion != "TLS_1_3":
			v.add(p+".customFeatures", "list the cipher suites to enable, e.g. [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]", "profile CUSTOM needs customFeatures")
		case sp.Profile != "CUSTOM" && len(sp.CustomFeatures) > 0:
			v.add(p+".customFeatures", "remove them, or set profile: CUSTOM", "customFeatures are only used with profile CUSTOM")
		}
		for j, f := range sp.CustomFeatures {
			v.enum(at("%s.customFeatures[%d]", p, j), f, features...)
		}
	}
}

// serverTLSPolicies validates serverTlsPolicies[].
func (v *validator) serverTLSPolicies() {
	for i := range v.c.ServerTLSPolicies {
		sp := &v.c.ServerTLSPolicies[i]
		p := at("serverTlsPolicies[%d]", i)
		m := sp.MTLSPolicy
		if m == nil {
			v.add(p+".mtlsPolicy", "add mtlsPolicy: {clientValidationMode: REJECT_INVALID, clientValidationTrustConfig: NAME}", "an mtlsPolicy is required (it is the only part Spillway uses)")
			continue
		}
		mp := p + ".mtlsPolicy"
		switch {
		case m.ClientValidationMode == "":
			v.add(mp+".clientValidationMode", "use ALLOW_INVALID_OR_MISSING_CLIENT_CERT or REJECT_INVALID", "a client validation mode is required")
		case !v.enum(mp+".clientValidationMode", m.ClientValidationMode, "ALLOW_INVALID_OR_MISSING_CLIENT_CERT", "REJECT_INVALID"):
		case m.ClientValidationMode == "REJECT_INVALID" && m.ClientValidationTrustConfig == "":
			v.add(mp+".clientValidationTrustConfig", "name the trustConfigs[] entry whose CAs client certificates must chain to", "REJECT_INVALID needs a trust config")
		}
		if m.ClientValidationTrustConfig != "" {
			v.ref(mp+".clientValidationTrustConfig", m.ClientValidationTrustConfig, "trust config", map[string]map[string]int{"trustConfigs": v.trustConfigNames})
		}
	}
}

// trustConfigs validates trustConfigs[].
func (v *validator) trustConfigs() {
	for i := range v.c.TrustConfigs {
		tc := &v.c.TrustConfigs[i]
		p := at("trustConfigs[%d]", i)
		anchors := 0
		for j, ts := range tc.TrustStores {
			sp := at("%s.trustStores[%d]", p, j)
			anchors += len(ts.TrustAnchors)
			for k := range ts.TrustAnchors {
				v.trustAnchor(at("%s.trustAnchors[%d]", sp, k), &ts.TrustAnchors[k])
			}
			for k := range ts.IntermediateCas {
				v.trustAnchor(at("%s.intermediateCas[%d]", sp, k), &ts.IntermediateCas[k])
			}
		}
		if anchors == 0 {
			v.add(p+".trustStores", "add trustStores: [{trustAnchors: [{pemCertificateFile: ca.pem}]}]", "a trust config needs at least one trust anchor")
		}
	}
}

// trustAnchor checks one CA certificate: inline PEM or a file, not both.
func (v *validator) trustAnchor(p string, a *TrustAnchor) {
	switch {
	case a.PemCertificate == "" && a.PemCertificateFile == "":
		v.add(p, "set pemCertificateFile (a path) or pemCertificate (inline PEM)", "a CA certificate is required")
	case a.PemCertificate != "" && a.PemCertificateFile != "":
		v.add(p, "keep one of pemCertificate, pemCertificateFile", "pemCertificate and pemCertificateFile are both set")
	case a.PemCertificate != "":
		if _, err := ParsePEMCertificates([]byte(a.PemCertificate)); err != nil {
			v.add(p+".pemCertificate", "paste the CA certificate including its -----BEGIN CERTIFICATE----- line", "%v", err)
		}
	}
}

// ParsePEMCertificates parses every CERTIFICATE block of PEM data; it
// fails when there is none or one does not parse.
func ParsePEMCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errNoPEMCertificate
	}
	return certs, nil
}

type pemError string

func (e pemError) Error() string { return string(e) }

const errNoPEMCertificate = pemError("no PEM CERTIFICATE block")

// frontendTLS validates the TLS references of HTTPS frontend p (f).
func (v *validator) frontendTLS(p string, f *Frontend, https bool) {
	if !https {
		if f.SslPolicy != "" {
			v.add(p+".sslPolicy", "remove it, or use protocol HTTPS", "an SSL policy is only used with HTTPS")
		}
		if f.ServerTLSPolicy != "" {
			v.add(p+".serverTlsPolicy", "remove it, or use protocol HTTPS", "a server TLS policy is only used with HTTPS")
		}
		if f.QuicOverride != "" {
			v.add(p+".quicOverride", "remove it, or use protocol HTTPS", "quicOverride (HTTP/3) is only used with HTTPS")
		}
		return
	}
	v.enum(p+".quicOverride", f.QuicOverride, "ENABLE", "DISABLE", "NONE")
	if f.SslPolicy != "" {
		v.ref(p+".sslPolicy", f.SslPolicy, "SSL policy", map[string]map[string]int{"sslPolicies": v.sslPolicyNames})
	}
	if f.ServerTLSPolicy != "" {
		v.ref(p+".serverTlsPolicy", f.ServerTLSPolicy, "server TLS policy", map[string]map[string]int{"serverTlsPolicies": v.serverTLSPolicyNames})
	}
}
