package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve/tlsreload"
)

// A regional layer's TLS files (clientCertificate, caFile) are read when
// its pool is made and again whenever their content changes (serve's file
// watcher calls ReloadTLS), as frontends' certificates are: new
// connections use the new files, and the open ones are retired
// gracefully (their streams finish), so the new certificate and CA apply
// to every request soon after. Files that fail to load keep the old ones
// in use.

// tlsFiles is what a pool last read of its TLS files.
type tlsFiles struct {
	mu  sync.Mutex
	sum [32]byte // of the files' contents
}

// tlsFilesSum is the SHA-256 of the contents of l's TLS files (an
// unreadable one counts as its name).
func tlsFilesSum(l *config.RegionalLayer) [32]byte {
	var files []string
	if c := l.ClientCertificate; c != nil {
		files = append(files, c.CertificateFile, c.PrivateKeyFile)
	}
	if l.CAFile != "" {
		files = append(files, l.CAFile)
	}
	return tlsreload.SumFiles(files)
}

// LayerTLSReload is one region's regional-layer TLS files, changed and
// loaded (Err nil) or changed and failing to load (the old ones stay in
// use).
type LayerTLSReload struct {
	Region string
	Err    error
}

// ReloadTLS reads the TLS files of every pool again and, where their
// content changed, uses the new ones for new connections and retires the
// open ones gracefully. A change that fails to load is reported once,
// and not tried again until the files change again.
func (ls *Layers) ReloadTLS() []LayerTLSReload {
	ls.mu.Lock()
	pools := make([]*layerPool, 0, len(ls.pools))
	for _, p := range ls.pools {
		if p.tls {
			pools = append(pools, p)
		}
	}
	ls.mu.Unlock()
	var out []LayerTLSReload
	for _, p := range pools {
		if r, changed := p.reloadTLS(); changed {
			out = append(out, r)
		}
	}
	return out
}

// reloadTLS is ReloadTLS for one pool.
func (p *layerPool) reloadTLS() (LayerTLSReload, bool) {
	p.tlsf.mu.Lock()
	defer p.tlsf.mu.Unlock()
	sum := tlsFilesSum(p.cfg)
	if sum == p.tlsf.sum {
		return LayerTLSReload{}, false
	}
	p.tlsf.sum = sum
	cfg, err := layerTLS(p.cfg)
	if err != nil {
		return LayerTLSReload{Region: p.region, Err: err}, true
	}
	p.tcfg.Store(cfg)
	p.retire()
	return LayerTLSReload{Region: p.region}, true
}

// layerTLS is the TLS client config towards a regional layer: the edge's
// client certificate, and verification against caFile when given (else
// none, as for backends).
func layerTLS(l *config.RegionalLayer) (*tls.Config, error) {
	cfg := &tls.Config{NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12, ServerName: l.ServerName}
	if c := l.ClientCertificate; c != nil {
		cert, err := tls.LoadX509KeyPair(c.CertificateFile, c.PrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("regional layer client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if l.CAFile == "" {
		cfg.InsecureSkipVerify = true // like backends: not verified
		return cfg, nil
	}
	pem, err := os.ReadFile(l.CAFile)
	if err != nil {
		return nil, fmt.Errorf("regional layer CA file: %w", err)
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("regional layer CA file %s: no PEM certificate", l.CAFile)
	}
	return cfg, nil
}
