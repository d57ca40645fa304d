package config

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"
)

// tlsEdits turn baseConfig's frontend into an HTTPS one that names an SSL
// policy and a server TLS policy, and define them.
var tlsEdits = []edit{
	{"  urlMap: web-map\n", `  urlMap: web-map
  protocol: HTTPS
  certificates: [{certificateFile: cert.pem, privateKeyFile: key.pem}]
  sslPolicy: projects/p/global/sslPolicies/tls12
  serverTlsPolicy: mtls
sslPolicies:
- {name: tls12, profile: MODERN, minTlsVersion: TLS_1_2}
serverTlsPolicies:
- name: mtls
  mtlsPolicy: {clientValidationMode: REJECT_INVALID, clientValidationTrustConfig: projects/p/locations/global/trustConfigs/cas}
trustConfigs:
- name: cas
  trustStores:
  - trustAnchors: [{pemCertificateFile: ca.pem}]
`},
}

func TestTLSConfigIsValid(t *testing.T) {
	c, err := Parse([]byte(apply(t, tlsEdits)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := c.SslPolicies[0]
	if p.MinVersion() != tls.VersionTLS12 {
		t.Errorf("min version %x", p.MinVersion())
	}
	if got := p.CipherSuites(); slices.Contains(got, tls.TLS_RSA_WITH_AES_128_GCM_SHA256) || !slices.Contains(got, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA) {
		t.Errorf("MODERN suites %v", got)
	}
}

func TestSslPolicyCipherSuites(t *testing.T) {
	tests := []struct {
		policy    SslPolicy
		want, not []uint16
	}{
		{SslPolicy{}, []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}, nil},
		{SslPolicy{Profile: "MODERN"}, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256}},
		{SslPolicy{Profile: "RESTRICTED"}, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_RSA_WITH_AES_128_GCM_SHA256}},
		{SslPolicy{Profile: "CUSTOM", CustomFeatures: []string{"TLS_RSA_WITH_AES_128_CBC_SHA"}}, []uint16{tls.TLS_RSA_WITH_AES_128_CBC_SHA}, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}},
	}
	for _, tt := range tests {
		got := tt.policy.CipherSuites()
		for _, id := range tt.want {
			if !slices.Contains(got, id) {
				t.Errorf("%+v lacks %s", tt.policy, tls.CipherSuiteName(id))
			}
		}
		for _, id := range tt.not {
			if slices.Contains(got, id) {
				t.Errorf("%+v has %s", tt.policy, tls.CipherSuiteName(id))
			}
		}
	}
}

func TestInvalidTLSConfigs(t *testing.T) {
	tests := []struct {
		name string
		edit edit
		want string
	}{
		{"unknown profile", edit{"profile: MODERN", "profile: MODREN"},
			`sslPolicies[tls12].profile: unknown value "MODREN" (fix: did you mean "MODERN"? use one of COMPATIBLE, MODERN, RESTRICTED, CUSTOM)`},
		{"unknown TLS version", edit{"minTlsVersion: TLS_1_2", "minTlsVersion: TLS1.2"},
			`sslPolicies[tls12].minTlsVersion: unknown value "TLS1.2"`},
		{"custom features without CUSTOM", edit{"profile: MODERN", "profile: MODERN, customFeatures: [TLS_RSA_WITH_AES_128_CBC_SHA]"},
			`sslPolicies[tls12].customFeatures: customFeatures are only used with profile CUSTOM (fix: remove them, or set profile: CUSTOM)`},
		{"CUSTOM without features", edit{"profile: MODERN", "profile: CUSTOM"},
			`sslPolicies[tls12].customFeatures: profile CUSTOM needs customFeatures`},
		{"unknown feature", edit{"profile: MODERN", "profile: CUSTOM, customFeatures: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA265]"},
			`sslPolicies[tls12].customFeatures[0]: unknown value "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA265" (fix: did you mean "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"?`},
		{"unknown SSL policy", edit{"sslPolicies/tls12", "sslPolicies/tls13"},
			`frontends[web].sslPolicy: unknown SSL policy "tls13" (fix: did you mean "tls12"?`},
		{"unknown validation mode", edit{"clientValidationMode: REJECT_INVALID", "clientValidationMode: REJECT"},
			`serverTlsPolicies[mtls].mtlsPolicy.clientValidationMode: unknown value "REJECT" (fix: use one of ALLOW_INVALID_OR_MISSING_CLIENT_CERT, REJECT_INVALID)`},
		{"reject without trust config", edit{", clientValidationTrustConfig: projects/p/locations/global/trustConfigs/cas}", "}"},
			`serverTlsPolicies[mtls].mtlsPolicy.clientValidationTrustConfig: REJECT_INVALID needs a trust config`},
		{"unknown trust config", edit{"trustConfigs/cas}", "trustConfigs/cax}"},
			`serverTlsPolicies[mtls].mtlsPolicy.clientValidationTrustConfig: unknown trust config "cax"`},
		{"anchor with both forms", edit{"{pemCertificateFile: ca.pem}", "{pemCertificateFile: ca.pem, pemCertificate: x}"},
			`trustConfigs[cas].trustStores[0].trustAnchors[0]: pemCertificate and pemCertificateFile are both set`},
		{"inline anchor that is not PEM", edit{"{pemCertificateFile: ca.pem}", "{pemCertificate: not-a-certificate}"},
			`trustConfigs[cas].trustStores[0].trustAnchors[0].pemCertificate: no PEM CERTIFICATE block`},
		{"no trust anchor", edit{"  - trustAnchors: [{pemCertificateFile: ca.pem}]\n", "  - intermediateCas: [{pemCertificateFile: ca.pem}]\n"},
			`trustConfigs[cas].trustStores: a trust config needs at least one trust anchor`},
		{"SSL policy on HTTP", edit{"  protocol: HTTPS\n  certificates: [{certificateFile: cert.pem, privateKeyFile: key.pem}]\n", ""},
			`frontends[web].sslPolicy: an SSL policy is only used with HTTPS (fix: remove it, or use protocol HTTPS)`},
		{"unknown quicOverride", edit{"  serverTlsPolicy: mtls\n", "  serverTlsPolicy: mtls\n  quicOverride: ENABLED\n"},
			`frontends[web].quicOverride: unknown value "ENABLED" (fix: did you mean "ENABLE"?`},
		{"quicOverride on HTTP", edit{"  protocol: HTTPS\n  certificates: [{certificateFile: cert.pem, privateKeyFile: key.pem}]\n  sslPolicy: projects/p/global/sslPolicies/tls12\n  serverTlsPolicy: mtls\n", "  quicOverride: ENABLE\n"},
			`frontends[web].quicOverride: quicOverride (HTTP/3) is only used with HTTPS (fix: remove it, or use protocol HTTPS)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := apply(t, tlsEdits)
			if n := strings.Count(y, tt.edit.old); n != 1 {
				t.Fatalf("edit %q matches %d times", tt.edit.old, n)
			}
			y = strings.Replace(y, tt.edit.old, tt.edit.new, 1)
			_, err := Parse([]byte(y), "test.yaml")
			if err == nil {
				t.Fatalf("Parse succeeded, want %s", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error:\n got: %s\nwant: %s", err, tt.want)
			}
		})
	}
}
