package serve

import (
	"fmt"
	"os"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve/managedcert"
	"github.com/spillwaylb/spillway/internal/serve/report"
	"github.com/spillwaylb/spillway/internal/serve/tlsreload"
)

// frontendTLS is what a (re)load prepares for the frontends' TLS before
// the swap: each HTTPS frontend's loaded state, and the ACME settings
// and domains of the MANAGED certificates they name.
type frontendTLS struct {
	states  map[string]*tlsreload.State
	acme    managedcert.Settings
	domains []string
}

// loadTLS reads the certificates and CA files of p's HTTPS frontends and
// the ACME settings; an error rejects the (re)load.
func (fs *frontends) loadTLS(p *plan.Plan) (*frontendTLS, error) {
	states, err := tlsreload.LoadAll(p, fs.acme)
	if err != nil {
		return nil, err
	}
	t := &frontendTLS{states: states, domains: managedDomains(p)}
	if len(t.domains) > 0 {
		if t.acme, err = acmeSettings(p); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// managedDomains lists the domains of the MANAGED certificates that
// HTTPS frontends name (Google provisions only those a proxy uses).
func managedDomains(p *plan.Plan) []string {
	var domains []string
	for _, pf := range p.Frontends {
		if pf.Protocol != "HTTPS" {
			continue
		}
		for _, ref := range pf.Config.SslCertificates {
			if sc := p.Config.SslCertificate(ref); sc != nil && sc.IsManaged() {
				domains = append(domains, sc.Managed.Domains...)
			}
		}
	}
	return domains
}

// acmeSettings resolves spillway.acme (the challenge addresses are added
// once the frontends are bound: applyACME).
func acmeSettings(p *plan.Plan) (managedcert.Settings, error) {
	var a *config.ACME
	if t := p.Config.Spillway; t != nil {
		a = t.ACME
	}
	s := managedcert.Settings{DirectoryURL: config.DefaultACMEDirectory, RenewalWindowRatio: 1.0 / 3,
		HTTP01: a.ACMEChallenge("HTTP_01"), TLSALPN01: a.ACMEChallenge("TLS_ALPN_01")}
	if a != nil {
		if a.DirectoryURL != "" {
			s.DirectoryURL = a.DirectoryURL
		}
		s.Email, s.StorageDir = a.Email, a.StorageDir
		if a.RenewalWindowRatio != nil {
			s.RenewalWindowRatio = *a.RenewalWindowRatio
		}
		if a.DirectoryCAFile != "" {
			b, err := os.ReadFile(a.DirectoryCAFile)
			if err != nil {
				return s, fmt.Errorf("spillway.acme.directoryCaFile: %w (fix: give the path of the ACME server's CA certificate in PEM)", err)
			}
			s.RootsPEM = string(b)
		}
	}
	return s, nil
}

// applyACME hands the manager the settings and domains of t, with the
// bound addresses of the frontends that answer the challenges: the first
// HTTP frontend HTTP-01, the first HTTPS one TLS-ALPN-01. fs.mu is held.
func (fs *frontends) applyACME(p *plan.Plan, t *frontendTLS) error {
	s := t.acme
	for _, pf := range p.Frontends {
		f := fs.m[pf.Name]
		if f == nil || f.ln == nil {
			continue
		}
		switch {
		case pf.Protocol == "HTTP" && s.HTTPAddr == "":
			s.HTTPAddr = f.ln.Addr().String()
		case pf.Protocol == "HTTPS" && s.TLSAddr == "":
			s.TLSAddr = f.ln.Addr().String()
		}
	}
	return fs.acme.Apply(s, t.domains)
}

// certificates is the get-health view of the SSL certificates HTTPS
// frontends name: a MANAGED one's status as Google reports it.
func (fs *frontends) certificates(p *plan.Plan) []report.SslCertificate {
	var out []report.SslCertificate
	used := map[string]bool{}
	for _, d := range managedDomains(p) {
		used[d] = true
	}
	for i := range p.Config.SslCertificates {
		sc := &p.Config.SslCertificates[i]
		r := report.SslCertificate{Name: sc.Name, Type: "SELF_MANAGED"}
		if sc.IsManaged() {
			r.Type = "MANAGED"
			r.Managed = &report.ManagedStatus{Domains: sc.Managed.Domains, Status: "PROVISIONING"}
			if used[sc.Managed.Domains[0]] {
				st := fs.acme.Status(sc.Managed.Domains)
				r.Managed.Status, r.Managed.DomainStatus, r.Managed.Detail = st.Status, st.DomainStatus, st.Detail
				if !st.ExpireTime.IsZero() {
					r.ExpireTime = st.ExpireTime.UTC().Format("2006-01-02T15:04:05Z")
				}
			}
		}
		out = append(out, r)
	}
	return out
}
