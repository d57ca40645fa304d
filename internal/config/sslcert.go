package config

import (
	"crypto/tls"
	"net/url"
	"slices"
	"strings"
)

// SslCertificate is a compute#sslCertificate: a certificate an HTTPS
// frontend serves, named in the frontend's sslCertificates as a target
// HTTPS proxy names it. SELF_MANAGED (the default) holds the PEM
// certificate chain and private key inline; MANAGED lists domains that
// Spillway obtains and renews certificates for over ACME (spillway.acme,
// docs/extensions.md), as Google's managed certificates.
type SslCertificate struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	OutputOnly
	// Type is SELF_MANAGED (the default) or MANAGED.
	Type string `json:"type,omitempty"`
	// Certificate and PrivateKey are the PEM chain and key (SELF_MANAGED).
	Certificate string `json:"certificate,omitempty"`
	PrivateKey  string `json:"privateKey,omitempty"`
	// Managed lists the domains of a MANAGED certificate.
	Managed *ManagedSslCertificate `json:"managed,omitempty"`
	// SubjectAlternativeNames and ExpireTime are output only in Google
	// Cloud; accepted so exported certificates load, and ignored.
	SubjectAlternativeNames []string `json:"subjectAlternativeNames,omitempty"`
	ExpireTime              string   `json:"expireTime,omitempty"`
}

// ManagedSslCertificate is sslCertificates[].managed.
type ManagedSslCertificate struct {
	// Domains are the names the certificate covers (at most 100; no
	// wildcards, as in Google Cloud).
	Domains []string `json:"domains,omitempty"`
	// Status and DomainStatus are output only (get-health reports them);
	// accepted so exported certificates load, and ignored.
	Status       string            `json:"status,omitempty"`
	DomainStatus map[string]string `json:"domainStatus,omitempty"`
}

// ACME is spillway.acme: how MANAGED certificates are obtained.
type ACME struct {
	// DirectoryURL is the ACME server's directory. Default
	// DefaultACMEDirectory (Let's Encrypt's production CA).
	DirectoryURL string `json:"directoryUrl,omitempty"`
	// Email is the ACME account's contact (optional).
	Email string `json:"email,omitempty"`
	// StorageDir is where accounts, keys and certificates are kept.
	// Default: $XDG_DATA_HOME/certmagic, else ~/.local/share/certmagic.
	StorageDir string `json:"storageDir,omitempty"`
	// DirectoryCAFile is a PEM file of CA certificates trusted, besides
	// the system's, for the directory's own TLS (a private or test CA).
	DirectoryCAFile string `json:"directoryCaFile,omitempty"`
	// Challenges are the challenge types offered: HTTP_01 (answered on
	// HTTP frontends) and TLS_ALPN_01 (on HTTPS frontends). Default both.
	Challenges []string `json:"challenges,omitempty"`
	// RenewalWindowRatio is the fraction of a certificate's lifetime,
	// before its expiry, in which it is renewed. Default 1/3.
	RenewalWindowRatio *float64 `json:"renewalWindowRatio,omitempty"`
}

// DefaultACMEDirectory is spillway.acme.directoryUrl's default: Let's
// Encrypt's production directory.
const DefaultACMEDirectory = "https://acme-v02.api.letsencrypt.org/directory"

// SslCertificate returns the sslCertificates[] entry named name (a name
// or a link), or nil.
func (c *Config) SslCertificate(name string) *SslCertificate {
	name = RefName(name)
	for i := range c.SslCertificates {
		if c.SslCertificates[i].Name == name {
			return &c.SslCertificates[i]
		}
	}
	return nil
}

// IsManaged reports whether the certificate is MANAGED.
func (sc *SslCertificate) IsManaged() bool { return sc.Type == "MANAGED" }

// sslCertificates validates sslCertificates[].
func (v *validator) sslCertificates() {
	for i := range v.c.SslCertificates {
		sc := &v.c.SslCertificates[i]
		p := at("sslCertificates[%d]", i)
		if !v.enum(p+".type", sc.Type, "SELF_MANAGED", "MANAGED") {
			continue
		}
		if sc.IsManaged() {
			v.managedCertificate(p, sc)
			continue
		}
		v.selfManagedCertificate(p, sc)
	}
}

// selfManagedCertificate checks a SELF_MANAGED certificate's PEM.
func (v *validator) selfManagedCertificate(p string, sc *SslCertificate) {
	if sc.Managed != nil {
		v.add(p+".managed", "remove it, or set type: MANAGED", "managed is only used with type MANAGED")
	}
	switch {
	case sc.Certificate == "":
		v.add(p+".certificate", "paste the PEM certificate chain (or use type: MANAGED)", "a SELF_MANAGED certificate needs certificate")
	case sc.PrivateKey == "":
		v.add(p+".privateKey", "paste the PEM private key of the certificate", "a SELF_MANAGED certificate needs privateKey")
	default:
		if _, err := tls.X509KeyPair([]byte(sc.Certificate), []byte(sc.PrivateKey)); err != nil {
			v.add(p+".certificate", "give a PEM certificate chain and its matching PEM private key", "%v", err)
		}
	}
}

// managedCertificate checks a MANAGED certificate's domains.
func (v *validator) managedCertificate(p string, sc *SslCertificate) {
	if sc.Certificate != "" || sc.PrivateKey != "" {
		v.add(p+".certificate", "remove certificate and privateKey: Spillway obtains a MANAGED certificate", "certificate and privateKey are only used with SELF_MANAGED")
	}
	if sc.Managed == nil || len(sc.Managed.Domains) == 0 {
		v.add(p+".managed.domains", "list the domains, e.g. managed: {domains: [www.example.com]}", "a MANAGED certificate needs domains")
		return
	}
	if len(sc.Managed.Domains) > 100 {
		v.add(p+".managed.domains", "split them over several certificates", "%d domains; at most 100", len(sc.Managed.Domains))
	}
	seen := map[string]bool{}
	for j, d := range sc.Managed.Domains {
		dp := at("%s.managed.domains[%d]", p, j)
		switch {
		case strings.Contains(d, "*"):
			v.add(dp, "list each name; managed certificates cannot be wildcards", "%q is a wildcard", d)
		case !IsHostName(d) || !strings.Contains(d, ".") && d != "localhost" || strings.HasSuffix(d, "."):
			v.add(dp, "write a fully qualified domain name without the final dot, e.g. www.example.com", "%q is not a domain name", d)
		case seen[strings.ToLower(d)]:
			v.add(dp, "list each domain once", "%q is listed twice", d)
		}
		seen[strings.ToLower(d)] = true
	}
}

// frontendCertificates checks the certificates of frontend p (f): HTTPS
// needs certificates or sslCertificates; other protocols neither.
func (v *validator) frontendCertificates(p string, f *Frontend, proto string) {
	switch {
	case proto == "HTTPS" && len(f.Certificates) == 0 && len(f.SslCertificates) == 0:
		v.add(p+".certificates", "add certificates: [{certificateFile: cert.pem, privateKeyFile: key.pem}], or sslCertificates: [NAME]", "HTTPS needs at least one certificate")
	case proto != "HTTPS" && proto != "" && len(f.Certificates) > 0:
		v.add(p+".certificates", "remove them, or use protocol HTTPS", "certificates are only used with HTTPS")
	case proto != "HTTPS" && proto != "" && len(f.SslCertificates) > 0:
		v.add(p+".sslCertificates", "remove them, or use protocol HTTPS", "sslCertificates are only used with HTTPS")
	}
	names := map[string]int{}
	for i := range v.c.SslCertificates {
		names[v.c.SslCertificates[i].Name] = i
	}
	for j, ref := range f.SslCertificates {
		v.ref(at("%s.sslCertificates[%d]", p, j), ref, "SSL certificate", map[string]map[string]int{"sslCertificates": names})
	}
}

// acme validates spillway.acme.
func (v *validator) acme(a *ACME) {
	if a == nil {
		return
	}
	if a.DirectoryURL != "" {
		if u, err := url.Parse(a.DirectoryURL); err != nil || u.Scheme != "https" || u.Host == "" {
			v.add("spillway.acme.directoryUrl", "write the https:// URL of the ACME directory, e.g. "+DefaultACMEDirectory, "%q is not an https URL", a.DirectoryURL)
		}
	}
	if a.Email != "" && !strings.Contains(a.Email, "@") {
		v.add("spillway.acme.email", "write an email address, e.g. ops@example.com", "%q is not an email address", a.Email)
	}
	for i, c := range a.Challenges {
		v.enum(at("spillway.acme.challenges[%d]", i), c, "HTTP_01", "TLS_ALPN_01")
	}
	if a.Challenges != nil && len(a.Challenges) == 0 {
		v.add("spillway.acme.challenges", "list HTTP_01, TLS_ALPN_01 or both, or remove the field", "no challenge type is enabled")
	}
	if r := a.RenewalWindowRatio; r != nil && (*r <= 0 || *r >= 1) {
		v.add("spillway.acme.renewalWindowRatio", "use a fraction between 0 and 1, e.g. 0.33", "%s is not between 0 and 1", fmtFloat(*r))
	}
}

// ACMEChallenge reports whether challenge type t (HTTP_01 or
// TLS_ALPN_01) is enabled by a (nil: the defaults, both).
func (a *ACME) ACMEChallenge(t string) bool {
	return a == nil || len(a.Challenges) == 0 || slices.Contains(a.Challenges, t)
}
