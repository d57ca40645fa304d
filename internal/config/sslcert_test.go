package config

import (
	"strings"
	"testing"
)

// managedEdits turn baseConfig's frontend into an HTTPS one serving a
// MANAGED certificate obtained over ACME.
var managedEdits = []edit{
	{"  urlMap: web-map\n", `  urlMap: web-map
  protocol: HTTPS
  sslCertificates: [projects/p/global/sslCertificates/www]
sslCertificates:
- {name: www, type: MANAGED, managed: {domains: [www.example.com, example.com], status: ACTIVE, domainStatus: {www.example.com: ACTIVE}}}
`},
	{"spillway: {undrainHoldSec: 60}", `spillway:
  undrainHoldSec: 60
  acme: {directoryUrl: "https://acme.example.net/dir", email: ops@example.com, storageDir: /var/lib/spillway/acme, challenges: [HTTP_01, TLS_ALPN_01], renewalWindowRatio: 0.3}`},
}

func TestManagedCertificateConfigIsValid(t *testing.T) {
	c, err := Parse([]byte(apply(t, managedEdits)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc := c.SslCertificate(c.Frontends[0].SslCertificates[0])
	if sc == nil || !sc.IsManaged() || len(sc.Managed.Domains) != 2 {
		t.Fatalf("frontend's certificate %+v, want the MANAGED www", sc)
	}
	a := c.Spillway.ACME
	if !a.ACMEChallenge("HTTP_01") || !a.ACMEChallenge("TLS_ALPN_01") || (*ACME)(nil).ACMEChallenge("X") != true {
		t.Errorf("challenges of %+v", a)
	}
}

func TestInvalidSslCertificates(t *testing.T) {
	tests := []struct {
		name string
		edit edit
		want string
	}{
		{"unknown type", edit{"type: MANAGED", "type: GOOGLE_MANAGED"},
			`sslCertificates[www].type: unknown value "GOOGLE_MANAGED"`},
		{"managed without domains", edit{"managed: {domains: [www.example.com, example.com], ", "managed: {"},
			`sslCertificates[www].managed.domains: a MANAGED certificate needs domains`},
		{"wildcard", edit{"[www.example.com, example.com]", "[www.example.com, '*.example.com']"},
			`sslCertificates[www].managed.domains[1]: "*.example.com" is a wildcard`},
		{"not a domain", edit{"[www.example.com, example.com]", "[www.example.com, 'exa mple.com']"},
			`sslCertificates[www].managed.domains[1]: "exa mple.com" is not a domain name`},
		{"duplicate domain", edit{"[www.example.com, example.com]", "[www.example.com, WWW.example.com]"},
			`sslCertificates[www].managed.domains[1]: "WWW.example.com" is listed twice`},
		{"self-managed without PEM", edit{"type: MANAGED, ", "type: SELF_MANAGED, "},
			`sslCertificates[www].certificate: a SELF_MANAGED certificate needs certificate`},
		{"self-managed with bad PEM", edit{"type: MANAGED, managed: {domains: [www.example.com, example.com], status: ACTIVE, domainStatus: {www.example.com: ACTIVE}}", "certificate: x, privateKey: y"},
			`sslCertificates[www].certificate: tls: failed to find any PEM data in certificate input`},
		{"managed with a key", edit{"type: MANAGED, ", "type: MANAGED, privateKey: x, "},
			`sslCertificates[www].certificate: certificate and privateKey are only used with SELF_MANAGED`},
		{"unknown certificate", edit{"sslCertificates/www]", "sslCertificates/wwx]"},
			`frontends[web].sslCertificates[0]: unknown SSL certificate "wwx" (fix: did you mean "www"?`},
		{"certificates on HTTP", edit{"  protocol: HTTPS\n", ""},
			`frontends[web].sslCertificates: sslCertificates are only used with HTTPS`},
		{"http directory", edit{`"https://acme.example.net/dir"`, `"http://acme.example.net/dir"`},
			`spillway.acme.directoryUrl: "http://acme.example.net/dir" is not an https URL`},
		{"unknown challenge", edit{"[HTTP_01, TLS_ALPN_01]", "[HTTP_01, DNS_01]"},
			`spillway.acme.challenges[1]: unknown value "DNS_01"`},
		{"no challenge", edit{"[HTTP_01, TLS_ALPN_01]", "[]"},
			`spillway.acme.challenges: no challenge type is enabled`},
		{"renewal ratio", edit{"renewalWindowRatio: 0.3", "renewalWindowRatio: 1.5"},
			`spillway.acme.renewalWindowRatio: 1.5 is not between 0 and 1`},
		{"bad email", edit{"email: ops@example.com", "email: ops"},
			`spillway.acme.email: "ops" is not an email address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := apply(t, managedEdits)
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
