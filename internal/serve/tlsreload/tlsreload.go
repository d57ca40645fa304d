// Package tlsreload holds the TLS of a server's HTTPS frontends: each
// frontend's certificates, SSL policy and client validation, loaded from
// the config's files, swapped in place on reload or when the files change,
// without touching the listener.
package tlsreload

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// Frontend is the TLS of one HTTPS frontend. Its listener's tls.Config
// asks for the current state on every handshake (GetConfigForClient), so
// certificates, SSL policy and client validation change on reload, or when
// their files change, without touching the listener: open connections
// keep the TLS session they negotiated.
type Frontend struct {
	cur atomic.Pointer[State]
	// failed is the files' content that last failed to load, so a broken
	// file is reported once.
	failed map[string][32]byte
}

// NewFrontend returns the TLS of a frontend serving st. Set and Reload
// must not run concurrently (the server calls both under its listener
// lock); handshakes may run at any time.
func NewFrontend(st *State) *Frontend {
	f := &Frontend{}
	f.cur.Store(st)
	return f
}

// Set swaps in st (a reload's loaded state) and forgets a failed load.
func (ft *Frontend) Set(st *State) {
	ft.cur.Store(st)
	ft.failed = nil
}

// Reload loads the frontend's files again when any of them reads
// differently from the state in force. It reports whether it tried: not
// when nothing changed, a file cannot be read right now, or the files are
// the ones that last failed. A failed load (err) keeps the old state
// serving.
func (ft *Frontend) Reload() (tried bool, err error) {
	st := ft.cur.Load()
	diff, now := st.changed()
	if !diff || sameSums(now, ft.failed) {
		return false, nil
	}
	next, err := load(st.spec)
	if err != nil {
		ft.failed = now
		return true, err
	}
	ft.Set(next)
	return true, nil
}

// State is one loaded generation of a frontend's TLS settings.
type State struct {
	spec source
	cfg  *tls.Config
	// files maps every file read to the SHA-256 of what was read.
	files map[string][32]byte
}

// Managed serves the certificates of MANAGED sslCertificates (package
// managedcert's Manager).
type Managed interface {
	// Certificate returns the certificate of hello's server name, a
	// managed domain, or an error while there is none.
	Certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error)
	// ChallengeConfig is the config of a TLS-ALPN-01 validation's
	// handshake (ALPN acme-tls/1).
	ChallengeConfig() *tls.Config
}

// source is what a frontend's TLS is built from, resolved from the config.
type source struct {
	frontend string
	certs    []config.Certificate
	// sslCerts are the frontend's sslCertificates, in order.
	sslCerts []*config.SslCertificate
	managed  Managed            // nil: no MANAGED certificate
	policy   *config.SslPolicy  // nil: Go's defaults
	mtls     *config.MTLSPolicy // nil: no client certificates
	trust    *config.TrustConfig
}

// ServerConfig is the listener's tls.Config: it hands each handshake the
// current state's config.
func (ft *Frontend) ServerConfig() *tls.Config {
	return &tls.Config{
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			st := ft.cur.Load()
			if st.spec.managed != nil && slices.Contains(hello.SupportedProtos, acmeTLS1) {
				return st.spec.managed.ChallengeConfig(), nil
			}
			return st.cfg, nil
		},
	}
}

// acmeTLS1 is the ALPN protocol of TLS-ALPN-01 validations (RFC 8737).
const acmeTLS1 = "acme-tls/1"

// resolve finds the SSL certificates, SSL policy, server TLS policy and
// trust config of HTTPS frontend pf in p's config (validated, so
// references resolve).
func resolve(p *plan.Plan, pf *plan.Frontend, managed Managed) source {
	c, fc := p.Config, pf.Config
	spec := source{frontend: pf.Name, certs: fc.Certificates}
	for _, ref := range fc.SslCertificates {
		if sc := c.SslCertificate(ref); sc != nil {
			spec.sslCerts = append(spec.sslCerts, sc)
			if sc.IsManaged() {
				spec.managed = managed
			}
		}
	}
	if fc.SslPolicy != "" {
		name := config.RefName(fc.SslPolicy)
		for i := range c.SslPolicies {
			if c.SslPolicies[i].Name == name {
				spec.policy = &c.SslPolicies[i]
			}
		}
	}
	if fc.ServerTLSPolicy != "" {
		name := config.RefName(fc.ServerTLSPolicy)
		for i := range c.ServerTLSPolicies {
			if c.ServerTLSPolicies[i].Name == name {
				spec.mtls = c.ServerTLSPolicies[i].MTLSPolicy
			}
		}
	}
	if spec.mtls != nil && spec.mtls.ClientValidationTrustConfig != "" {
		name := config.RefName(spec.mtls.ClientValidationTrustConfig)
		for i := range c.TrustConfigs {
			if c.TrustConfigs[i].Name == name {
				spec.trust = &c.TrustConfigs[i]
			}
		}
	}
	return spec
}

// load reads the certificates and CA files of spec from disk and builds
// the per-handshake config.
func load(spec source) (*State, error) {
	st := &State{spec: spec, files: map[string][32]byte{}}
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		st.files[path] = sha256.Sum256(b)
		return b, nil
	}
	entries, err := st.certificates(read)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: pick(entries, spec.managed),
	}
	if p := spec.policy; p != nil {
		cfg.MinVersion = p.MinVersion()
		cfg.CipherSuites = p.CipherSuites()
	}
	if m := spec.mtls; m != nil {
		if err := st.clientValidation(cfg, m, spec.trust, read); err != nil {
			return nil, err
		}
	}
	st.cfg = cfg
	return st, nil
}

// entry is one certificate a frontend offers: a loaded one (cert) or a
// MANAGED certificate's domains.
type entry struct {
	cert    *tls.Certificate
	domains []string
}

// certificates loads the frontend's certificates[] (files) and its
// sslCertificates, in that order.
func (st *State) certificates(read func(string) ([]byte, error)) ([]entry, error) {
	spec := st.spec
	var entries []entry
	for i, c := range spec.certs {
		certPEM, err := read(c.CertificateFile)
		if err != nil {
			return nil, fmt.Errorf("frontend %s: certificates[%d].certificateFile: %w", spec.frontend, i, err)
		}
		keyPEM, err := read(c.PrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("frontend %s: certificates[%d].privateKeyFile: %w", spec.frontend, i, err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("frontend %s: certificates[%d] (%s, %s): %w (fix: give a PEM certificate chain and its matching PEM private key)",
				spec.frontend, i, c.CertificateFile, c.PrivateKeyFile, err)
		}
		entries = append(entries, entry{cert: &cert})
	}
	for _, sc := range spec.sslCerts {
		if sc.IsManaged() {
			entries = append(entries, entry{domains: lower(sc.Managed.Domains)})
			continue
		}
		cert, err := tls.X509KeyPair([]byte(sc.Certificate), []byte(sc.PrivateKey))
		if err != nil {
			return nil, fmt.Errorf("frontend %s: sslCertificates %s: %w (fix: give a PEM certificate chain and its matching PEM private key)", spec.frontend, sc.Name, err)
		}
		entries = append(entries, entry{cert: &cert})
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("frontend %s: no certificates", spec.frontend)
	}
	return entries, nil
}

func lower(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ToLower(n)
	}
	return out
}

// pick chooses a handshake's certificate, as a target HTTPS proxy does:
// the first whose names and key suit the client's hello (SNI, signature
// algorithms), a MANAGED one once it has been obtained; else the first
// loaded one; else the first MANAGED one obtained.
func pick(entries []entry, managed Managed) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := strings.ToLower(hello.ServerName)
		for i := range entries {
			e := &entries[i]
			if e.cert != nil && hello.SupportsCertificate(e.cert) == nil {
				return e.cert, nil
			}
			if e.cert == nil && slices.Contains(e.domains, name) {
				if c, err := managed.Certificate(hello); err == nil {
					return c, nil
				}
			}
		}
		for i := range entries {
			if entries[i].cert != nil {
				return entries[i].cert, nil
			}
		}
		for i := range entries {
			h := *hello
			h.ServerName = entries[i].domains[0]
			if c, err := managed.Certificate(&h); err == nil {
				return c, nil
			}
		}
		return nil, fmt.Errorf("no certificate for %q yet (managed certificates are provisioning)", hello.ServerName)
	}
}

// clientValidation sets up the mtlsPolicy: REJECT_INVALID requires a
// client certificate chaining to the trust config's anchors (through its
// intermediates or the ones the client sends); ALLOW_INVALID_OR_MISSING_CLIENT_CERT
// asks for one and accepts any or none.
func (st *State) clientValidation(cfg *tls.Config, m *config.MTLSPolicy, trust *config.TrustConfig, read func(string) ([]byte, error)) error {
	if m.ClientValidationMode == "ALLOW_INVALID_OR_MISSING_CLIENT_CERT" {
		cfg.ClientAuth = tls.RequestClientCert
		return nil
	}
	if trust == nil {
		return fmt.Errorf("frontend %s: %s needs a trust config", st.spec.frontend, m.ClientValidationMode)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	load := func(pool *x509.CertPool, a config.TrustAnchor, where string) error {
		data := []byte(a.PemCertificate)
		if a.PemCertificateFile != "" {
			var err error
			if data, err = read(a.PemCertificateFile); err != nil {
				return fmt.Errorf("trustConfigs %s: %s.pemCertificateFile: %w", trust.Name, where, err)
			}
		}
		certs, err := config.ParsePEMCertificates(data)
		if err != nil {
			return fmt.Errorf("trustConfigs %s: %s %s: %w (fix: give PEM CA certificates)", trust.Name, where, a.PemCertificateFile, err)
		}
		for _, c := range certs {
			pool.AddCert(c)
		}
		return nil
	}
	for i, ts := range trust.TrustStores {
		for j, a := range ts.TrustAnchors {
			if err := load(roots, a, fmt.Sprintf("trustStores[%d].trustAnchors[%d]", i, j)); err != nil {
				return err
			}
		}
		for j, a := range ts.IntermediateCas {
			if err := load(inter, a, fmt.Sprintf("trustStores[%d].intermediateCas[%d]", i, j)); err != nil {
				return err
			}
		}
	}
	// RequireAnyClientCert plus VerifyConnection (which also runs on
	// resumed sessions) rather than RequireAndVerifyClientCert, so that
	// configured intermediates count; ClientCAs still tells clients which
	// CAs are accepted.
	cfg.ClientAuth = tls.RequireAnyClientCert
	cfg.ClientCAs = roots
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("client certificate required")
		}
		pool := inter.Clone()
		for _, c := range cs.PeerCertificates[1:] {
			pool.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			Roots: roots, Intermediates: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		return err
	}
	return nil
}

// changed reports whether any file of the state now reads differently; it
// returns the current content sums (nil when a file cannot be read, e.g.
// while it is being replaced).
func (st *State) changed() (bool, map[string][32]byte) {
	now := make(map[string][32]byte, len(st.files))
	diff := false
	for path, sum := range st.files {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, nil
		}
		now[path] = sha256.Sum256(b)
		diff = diff || now[path] != sum
	}
	return diff, now
}

// LoadAll loads the TLS of every HTTPS frontend of p; managed serves
// their MANAGED certificates.
func LoadAll(p *plan.Plan, managed Managed) (map[string]*State, error) {
	states := map[string]*State{}
	for _, pf := range p.Frontends {
		if pf.Protocol != "HTTPS" {
			continue
		}
		st, err := load(resolve(p, pf, managed))
		if err != nil {
			return nil, err
		}
		states[pf.Name] = st
	}
	return states, nil
}

// sameSums reports whether a and b (not nil) hold the same files and sums.
func sameSums(a, b map[string][32]byte) bool {
	if len(a) != len(b) || a == nil {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// SumFiles is the SHA-256 of the contents of files, in order (an
// unreadable file counts by its name, so that it becoming readable is a
// change); zero for none. File watchers compare it to see a change.
func SumFiles(files []string) [32]byte {
	if len(files) == 0 {
		return [32]byte{}
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			b = []byte("unreadable " + f)
		}
		s := sha256.Sum256(b)
		h.Write(s[:])
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
