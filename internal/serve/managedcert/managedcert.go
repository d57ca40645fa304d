// Package managedcert obtains and renews the certificates of MANAGED
// sslCertificates over ACME, with certmagic: HTTP-01 challenges answered
// on the HTTP frontends (ServeChallenge), TLS-ALPN-01 on the HTTPS ones
// (ChallengeConfig), accounts, keys and certificates kept in a directory,
// renewal ahead of expiry, and each domain's status as Google reports a
// managed certificate's (PROVISIONING, ACTIVE, FAILED_NOT_VISIBLE …).
//
// A Manager lives as long as the server; Apply hands it each (re)load's
// settings and domains: new domains are ordered, removed ones are no
// longer renewed, and changed settings start a new certmagic cache.
package managedcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3"
	"go.uber.org/zap"
)

// Settings are what the ACME client is built from (spillway.acme plus
// the frontends' ports). Settings are comparable: a reload that changes
// none of them keeps the running client.
type Settings struct {
	DirectoryURL string
	Email        string
	// StorageDir is the directory for accounts, keys and certificates
	// ("" = certmagic's default data directory).
	StorageDir string
	// RootsPEM are extra CA certificates trusted for the directory's TLS.
	RootsPEM string
	// HTTP01 and TLSALPN01 enable the challenge types.
	HTTP01, TLSALPN01 bool
	// HTTPAddr and TLSAddr are the host:port of the HTTP and HTTPS
	// frontends that answer the challenges ("" = none: certmagic then
	// binds :80 or :443 itself while it solves one).
	HTTPAddr, TLSAddr  string
	RenewalWindowRatio float64
	// RenewCheckInterval is how often certificates are checked for
	// renewal (0 = certmagic's default, 10 minutes).
	RenewCheckInterval time.Duration
}

// Manager obtains and renews the certificates of managed domains.
type Manager struct {
	log *slog.Logger
	// storage, when set (a fleet's etcd), replaces Settings.StorageDir.
	storage certmagic.Storage

	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelFunc
	settings Settings
	cache    *certmagic.Cache
	cfg      *certmagic.Config
	issuer   *certmagic.ACMEIssuer
	domains  []string
	status   map[string]*domainState
}

// domainState is one domain's standing.
type domainState struct {
	status string // PROVISIONING, ACTIVE or FAILED_…
	// renewalFailed is set when the last renewal failed (the domain stays
	// ACTIVE while its certificate is valid).
	renewalFailed bool
	detail        string
}

// New returns a Manager that manages nothing until Apply. storage, when
// not nil, keeps the accounts, keys, certificates, challenge tokens and
// locks instead of Settings.StorageDir: a fleet's shared storage, through
// which instances take turns ordering (certmagic locks each order and
// renewal, then finds what another instance stored) and answer each
// other's challenges.
func New(log *slog.Logger, storage certmagic.Storage) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{log: log, storage: storage, ctx: ctx, cancel: cancel, status: map[string]*domainState{}}
}

// Apply manages domains with settings s: a new ACME client when s
// differs from the running one's, orders for new domains, and no more
// renewals for domains that left. No domains stops the client.
func (m *Manager) Apply(s Settings, domains []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return errors.New("managed certificates: stopped")
	}
	domains = normalize(domains)
	if len(domains) == 0 || m.cache != nil && s != m.settings {
		m.stopCache()
	}
	if len(domains) == 0 {
		m.status = map[string]*domainState{}
		return nil
	}
	if m.cache == nil {
		if err := m.start(s); err != nil {
			return err
		}
	}
	var removed []certmagic.SubjectIssuer
	for _, d := range m.domains {
		if !slices.Contains(domains, d) {
			removed = append(removed, certmagic.SubjectIssuer{Subject: d})
			delete(m.status, d)
		}
	}
	m.cache.RemoveManaged(removed)
	var added []string
	for _, d := range domains {
		if !slices.Contains(m.domains, d) {
			added = append(added, d)
			m.status[d] = &domainState{status: "PROVISIONING"}
		}
	}
	m.domains = domains
	if len(added) > 0 {
		// ManageAsync loads certificates from storage, else orders them,
		// retrying with backoff, and renews them in the cache's loop.
		return m.cfg.ManageAsync(m.ctx, added)
	}
	return nil
}

// normalize lower-cases, sorts and de-duplicates domains.
func normalize(domains []string) []string {
	out := make([]string, 0, len(domains))
	for _, d := range domains {
		out = append(out, strings.ToLower(d))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// start builds the certmagic cache, config and ACME issuer for s.
func (m *Manager) start(s Settings) error {
	roots, err := rootPool(s.RootsPEM)
	if err != nil {
		return err
	}
	var cfg *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil },
		RenewCheckInterval: s.RenewCheckInterval,
		Logger:             zap.NewNop(),
	})
	var storage certmagic.Storage = certmagic.Default.Storage
	switch {
	case m.storage != nil:
		storage = m.storage
		if s.StorageDir != "" {
			m.log.Warn("managed certificates: spillway.acme.storageDir is not used in fleet mode: the fleet keeps them in etcd", "storageDir", s.StorageDir)
		}
	case s.StorageDir != "":
		storage = &certmagic.FileStorage{Path: s.StorageDir}
	}
	cfg = certmagic.New(cache, certmagic.Config{
		RenewalWindowRatio: s.RenewalWindowRatio,
		Storage:            storage,
		Logger:             zap.NewNop(),
		OnEvent:            m.onEvent,
	})
	issuer := certmagic.NewACMEIssuer(cfg, certmagic.ACMEIssuer{
		CA: s.DirectoryURL, TestCA: s.DirectoryURL, Email: s.Email, Agreed: true,
		DisableHTTPChallenge: !s.HTTP01, DisableTLSALPNChallenge: !s.TLSALPN01,
		TrustedRoots: roots, Logger: zap.NewNop(),
	})
	setListen(issuer, s)
	cfg.Issuers = []certmagic.Issuer{issuer}
	m.settings, m.cache, m.cfg, m.issuer = s, cache, cfg, issuer
	return nil
}

// setListen points certmagic's own challenge listeners at the frontends'
// addresses: it finds them in use and leaves the answers to the
// frontends (ServeChallenge, ChallengeConfig).
func setListen(issuer *certmagic.ACMEIssuer, s Settings) {
	if host, port, err := net.SplitHostPort(s.HTTPAddr); err == nil {
		issuer.ListenHost = host
		issuer.AltHTTPPort, _ = strconv.Atoi(port)
	}
	if host, port, err := net.SplitHostPort(s.TLSAddr); err == nil {
		if s.HTTPAddr == "" {
			issuer.ListenHost = host
		}
		issuer.AltTLSALPNPort, _ = strconv.Atoi(port)
	}
}

// rootPool is the system's CA pool plus the PEM certificates given.
func rootPool(pemCerts string) (*x509.CertPool, error) {
	if pemCerts == "" {
		return nil, nil // certmagic uses the system's
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM([]byte(pemCerts)) {
		return nil, errors.New("spillway.acme.directoryCaFile: no PEM certificate in it (fix: give the ACME server's CA certificate in PEM)")
	}
	return pool, nil
}

// stopCache stops the running certmagic cache (renewals); the lock is held.
func (m *Manager) stopCache() {
	if m.cache != nil {
		m.cache.Stop()
	}
	m.cache, m.cfg, m.issuer, m.domains = nil, nil, nil, nil
}

// Stop cancels orders in flight and stops renewals.
func (m *Manager) Stop() {
	m.cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopCache()
}

// current returns the running config and issuer (nil when none).
func (m *Manager) current() (*certmagic.Config, *certmagic.ACMEIssuer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg, m.issuer
}

// Certificate returns the certificate of hello's server name, a managed
// domain, or an error while it has none.
func (m *Manager) Certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	cfg, _ := m.current()
	if cfg == nil {
		return nil, errors.New("managed certificates: no ACME client running")
	}
	return cfg.GetCertificate(hello)
}

// ChallengeConfig is the TLS config of a handshake that offers ALPN
// acme-tls/1 (a TLS-ALPN-01 validation): it answers with the challenge
// certificate.
func (m *Manager) ChallengeConfig() *tls.Config {
	return &tls.Config{
		NextProtos: []string{acmez.ACMETLS1Protocol},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return m.Certificate(hello)
		},
	}
}

// challengePath is where HTTP-01 validations ask.
const challengePath = "/.well-known/acme-challenge/"

// ServeChallenge answers r if it is an HTTP-01 validation of a challenge
// in progress and reports whether it did.
func (m *Manager) ServeChallenge(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(r.URL.Path, challengePath) {
		return false
	}
	_, issuer := m.current()
	return issuer != nil && issuer.HandleHTTPChallenge(w, r)
}
