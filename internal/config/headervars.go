package config

import "strings"

// HeaderVariableSupport says what Spillway does with a {variable} in a
// backend service's customRequestHeaders or customResponseHeaders value.
type HeaderVariableSupport int

const (
	// HeaderVariableLiteral is a name Google Cloud does not define: the
	// text, braces and all, is sent as it is written (Google Cloud
	// rejects the backend service).
	HeaderVariableLiteral HeaderVariableSupport = iota
	// HeaderVariableExpanded is a variable Spillway fills in, as Google
	// Cloud does (see the proxy's headers.go for each value's format).
	HeaderVariableExpanded
	// HeaderVariableEmpty is a variable Google Cloud defines that
	// Spillway cannot know (client geography, RTT, CDN, TLS
	// fingerprints, most client certificate fields): it expands to an
	// empty value, which is what Google Cloud sends when it cannot
	// determine one, and validate warns.
	HeaderVariableEmpty
)

// HeaderVariable classifies a custom header variable by name (without
// the braces).
func HeaderVariable(name string) HeaderVariableSupport {
	switch name {
	case "tls_sni_hostname", "tls_version", "tls_cipher_suite", "client_encrypted", "client_protocol",
		"client_cert_present", "client_cert_sha256_fingerprint":
		return HeaderVariableExpanded
	case "client_rtt_msec", "client_region", "client_region_subdivision", "client_city", "client_city_lat_long",
		"client_asn", "cdn_cache_id", "cdn_cache_status", "origin_request_header", "device_request_type",
		"user_agent_family", "tls_ja3_fingerprint", "tls_ja4_fingerprint",
		"client_cert_chain_verified", "client_cert_error", "client_cert_serial_number", "client_cert_spiffe_id",
		"client_cert_uri_sans", "client_cert_dnsname_sans", "client_cert_valid_not_before",
		"client_cert_valid_not_after", "client_cert_issuer_dn", "client_cert_subject_dn",
		"client_cert_leaf", "client_cert_chain":
		return HeaderVariableEmpty
	}
	return HeaderVariableLiteral
}

// HeaderVariables returns the names of the {variables} in a custom header
// value, in order, repeats included.
func HeaderVariables(value string) []string {
	var names []string
	for {
		open := strings.IndexByte(value, '{')
		if open < 0 {
			return names
		}
		end := strings.IndexByte(value[open:], '}')
		if end < 0 {
			return names
		}
		if name := value[open+1 : open+end]; name != "" && !strings.ContainsAny(name, "{ ") {
			names = append(names, name)
		}
		value = value[open+end+1:]
	}
}
