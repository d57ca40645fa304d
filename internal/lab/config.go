package lab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/examples"
	"github.com/spillwaylb/spillway/internal/config"
)

// Config is one configuration the lab runs: a name for the report and the
// config's source. The source is parsed afresh for every scenario, so no
// state leaks between scenarios through a shared *config.Config.
type Config struct {
	// Name labels the report rows ("with-policy", "no-policy",
	// "baseline" for the seed's configs; seed numbers are shown for those
	// names).
	Name string
	// File names the source in error messages.
	File string
	// Data is the YAML or JSON text.
	Data []byte
}

// Parse decodes and validates the config.
func (c Config) Parse() (*config.Config, error) {
	cfg, err := config.Parse(c.Data, c.File)
	if err != nil {
		return nil, fmt.Errorf("lab config %s: %w", c.Name, err)
	}
	return cfg, nil
}

// seedConfigNames are the seed's configurations in report order.
func seedConfigNames() []string { return []string{"with-policy", "no-policy", "baseline"} }

// SeedConfigs returns the three embedded configs of seed 000
// (examples/seed-70-30): with-policy, no-policy and baseline, in that
// order. only, when not empty, keeps the named ones (in the same order)
// and rejects unknown names.
func SeedConfigs(only []string) ([]Config, error) {
	names := seedConfigNames()
	want := map[string]bool{}
	for _, n := range only {
		found := false
		for _, s := range names {
			found = found || s == n
		}
		if !found {
			return nil, fmt.Errorf("unknown lab config %q (choose from %s)", n, strings.Join(names, ", "))
		}
		want[n] = true
	}
	fsys := examples.Seed7030()
	var out []Config
	for _, n := range names {
		if len(want) > 0 && !want[n] {
			continue
		}
		data, err := fs.ReadFile(fsys, n+".yaml")
		if err != nil {
			return nil, fmt.Errorf("embedded example %s.yaml: %w", n, err)
		}
		out = append(out, Config{Name: n, File: "examples/seed-70-30/" + n + ".yaml", Data: data})
	}
	return out, nil
}

// LoadConfig reads a config file for the lab. The report names it after
// the file's base name without extension.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("lab: %w", err)
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return Config{Name: name, File: path, Data: data}, nil
}

// settings are the lab's rewrites of a config, applied before serve
// starts (see rewrite).
type settings struct {
	// Interval is every health check's checkIntervalMs (the Spillway
	// extension); the timeout becomes min(150 ms, ¾ interval). Thresholds
	// stay as configured (2/2 in the seed).
	Interval time.Duration
	// CertFile and KeyFile are the frontend's self-signed certificate.
	CertFile, KeyFile string
}

// rewrite adapts cfg for the lab, in place, and returns the frontend the
// lab sends traffic to:
//
//   - health checks probe every Interval instead of every 5 s, so a
//     failure converges in well under a second instead of 10 s (the
//     thresholds, and so the number of probes to converge, are unchanged);
//   - the first HTTP(S) frontend with a URL map listens on 127.0.0.1:0 (an
//     ephemeral port, so the lab never collides with a running serve) with
//     HTTPS and a self-signed certificate, because the seed sent HTTPS
//     requests; other frontends are dropped;
//   - spillway.undrainHoldSec is left alone: every scenario starts a fresh
//     serve, so nothing ever needs to undrain.
func rewrite(cfg *config.Config, s settings) (*config.Frontend, error) {
	ms := max(1, int(s.Interval/time.Millisecond))
	timeout := min(150, max(1, ms*3/4))
	for i := range cfg.HealthChecks {
		hc := &cfg.HealthChecks[i]
		hc.CheckIntervalMs = ptr(ms)
		hc.TimeoutMs = ptr(timeout)
	}
	var fe *config.Frontend
	for i := range cfg.Frontends {
		f := cfg.Frontends[i]
		p := strings.ToUpper(f.Protocol)
		if f.URLMap != "" && (p == "" || p == "HTTP" || p == "HTTPS") {
			fe = &f
			break
		}
	}
	if fe == nil {
		return nil, fmt.Errorf("lab: the config has no HTTP or HTTPS frontend with a urlMap to send requests to (fix: add frontends: [{name: fe, address: 127.0.0.1:8080, urlMap: NAME, region: REGION}])")
	}
	fe.Address = "127.0.0.1:0"
	fe.Protocol = "HTTPS"
	fe.Certificates = []config.Certificate{{CertificateFile: s.CertFile, PrivateKeyFile: s.KeyFile}}
	cfg.Frontends = []config.Frontend{*fe}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("lab: the rewritten config is invalid: %w", err)
	}
	return &cfg.Frontends[0], nil
}

func ptr[T any](v T) *T { return &v }

// SelfSigned returns a fresh ECDSA P-256 certificate for 127.0.0.1, ::1
// and localhost, valid for a day, as a tls.Certificate (with its Leaf) and
// as PEM (certificate, key): the lab's frontend certificate, and the soak
// test's rotations.
func SelfSigned() (tls.Certificate, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("lab: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("lab: certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "spillway lab", Organization: []string{"Spillway lab (self-signed)"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("lab: create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("lab: marshal key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("lab: load certificate: %w", err)
	}
	return cert, certPEM, keyPEM, nil
}

// newSettings returns the lab settings for health checks every interval,
// with a self-signed frontend certificate written into a temporary
// directory that cleanup removes.
func newSettings(interval time.Duration) (set settings, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "spillway-lab-")
	if err != nil {
		return settings{}, nil, fmt.Errorf("lab: temp dir for the frontend certificate: %w", err)
	}
	cleanup = func() { os.RemoveAll(dir) }
	_, certPEM, keyPEM, err := SelfSigned()
	if err != nil {
		cleanup()
		return settings{}, nil, err
	}
	set = settings{Interval: interval, CertFile: filepath.Join(dir, "frontend.crt"), KeyFile: filepath.Join(dir, "frontend.key")}
	if err := os.WriteFile(set.CertFile, certPEM, 0o600); err != nil {
		cleanup()
		return settings{}, nil, fmt.Errorf("lab: write certificate: %w", err)
	}
	if err := os.WriteFile(set.KeyFile, keyPEM, 0o600); err != nil {
		cleanup()
		return settings{}, nil, fmt.Errorf("lab: write key: %w", err)
	}
	return set, cleanup, nil
}
