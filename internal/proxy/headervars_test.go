package proxy

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"testing"
)

// Custom header variables: those Spillway knows are filled in, in Google
// Cloud's formats; those it cannot know are empty; other {text} stays.
func TestExpandVariables(t *testing.T) {
	leaf := &x509.Certificate{Raw: []byte("leaf certificate DER")}
	sum := sha256.Sum256(leaf.Raw)
	tlsReq := &http.Request{Proto: "HTTP/2.0", ProtoMajor: 2, TLS: &tls.ConnectionState{
		Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_128_GCM_SHA256, ServerName: "www.example.com",
		PeerCertificates: []*x509.Certificate{leaf}}}
	plainReq := &http.Request{Proto: "HTTP/1.1", ProtoMajor: 1}
	h3Req := &http.Request{Proto: "HTTP/3.0", ProtoMajor: 3, TLS: tlsReq.TLS}
	tests := []struct {
		value string
		r     *http.Request
		want  string
	}{
		{"no variables", plainReq, "no variables"},
		{"{tls_version},{tls_cipher_suite}", tlsReq, "TLSv1.3,1301"},
		{"{tls_sni_hostname}", tlsReq, "www.example.com"},
		{"{client_protocol} {client_encrypted}", tlsReq, "HTTP/2 true"},
		{"{client_protocol} {client_encrypted}", plainReq, "HTTP/1.1 false"},
		{"{client_protocol} {client_encrypted}", h3Req, "HTTP/3 true"},
		{"{client_cert_present}", tlsReq, "true"},
		{"{client_cert_present}", plainReq, "false"},
		{"{client_cert_sha256_fingerprint}", tlsReq, base64.StdEncoding.EncodeToString(sum[:])},
		{"{tls_version}", plainReq, ""},
		{"geo={client_region},{client_city};rtt={client_rtt_msec}", tlsReq, "geo=,;rtt="},
		{"{not_a_variable} {unclosed", tlsReq, "{not_a_variable} {unclosed"},
		{"{}{tls_version}", tlsReq, "{}TLSv1.3"},
	}
	for _, tt := range tests {
		if got := expandVariables(tt.value, tt.r); got != tt.want {
			t.Errorf("expandVariables(%q) = %q, want %q", tt.value, got, tt.want)
		}
	}
	// The SNI is the client's: one that is not a host name (here with a
	// line break, which Go's TLS server accepts) is not passed on.
	evil := &http.Request{Proto: "HTTP/1.1", ProtoMajor: 1, TLS: &tls.ConnectionState{Version: tls.VersionTLS13, ServerName: "a\r\nX-Evil: 1"}}
	if got := expandVariables("{tls_sni_hostname}", evil); got != "" {
		t.Errorf("a hostile SNI expanded to %q, want empty", got)
	}
	h := http.Header{}
	applyCustom(h, []string{"X-TLS: {tls_version}", "X-TLS: {tls_cipher_suite}"}, tlsReq)
	if got := h["X-Tls"]; len(got) != 2 || got[0] != "TLSv1.3" || got[1] != "1301" {
		t.Errorf("applyCustom: %q", got)
	}
}
