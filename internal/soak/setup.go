package soak

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/lab"
	"github.com/spillwaylb/spillway/internal/plan"
)

// Frontend names in the soak's configs.
const (
	feHTTPS = "fe-https"
	feHTTP  = "fe-http"
)

// files are the soak's on-disk inputs to the proxy.
type files struct {
	dir                 string
	configPath          string
	certPath, keyPath   string
	valid               [2][]byte // with-policy and no-policy, rewritten
	invalid             []byte    // with-policy with an unknown urlMap
	validNames          [2]string
	algorithms          [2]string // the first service's algorithm in each valid config
	httpsAddr, httpAddr string
	adminAddr           string
	backendPort         int
	// unhealthyThreshold is the health check's (for the windows).
	unhealthyThreshold int
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("soak: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// prepare writes the certificate and the first config into dir and
// returns the three configs' texts. Backend addresses move from the
// seed's 127.1.Z.I/127.2.Z.I:18080 to 127.(60+o).Z.I on a free port, so a
// soak never collides with `spillway lab` or the lab's tests running at
// the same time on the same machine.
func prepare(dir string, interval, timeout time.Duration) (*files, error) {
	f := &files{
		dir:        dir,
		configPath: filepath.Join(dir, "config.json"),
		certPath:   filepath.Join(dir, "frontend.crt"),
		keyPath:    filepath.Join(dir, "frontend.key"),
		validNames: [2]string{"with-policy", "no-policy"},
	}
	if _, err := f.rotateCertMode(false); err != nil {
		return nil, err
	}
	ports := make([]int, 4)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	f.httpsAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	f.httpAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	f.adminAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
	backendPort := ports[3]
	f.backendPort = backendPort

	seeds, err := lab.SeedConfigs(f.validNames[:])
	if err != nil {
		return nil, err
	}
	var first *config.Config
	for i, sc := range seeds {
		cfg, err := sc.Parse()
		if err != nil {
			return nil, err
		}
		if err := f.rewrite(cfg, interval, timeout, backendPort); err != nil {
			return nil, fmt.Errorf("soak: config %s: %w", sc.Name, err)
		}
		data, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("soak: encode config %s: %w", sc.Name, err)
		}
		if _, err := config.Parse(data, sc.Name); err != nil {
			return nil, fmt.Errorf("soak: rewritten config %s does not load: %w", sc.Name, err)
		}
		f.valid[i] = data
		p, err := plan.Compile(cfg)
		if err != nil {
			return nil, fmt.Errorf("soak: config %s: %w", sc.Name, err)
		}
		f.algorithms[i] = p.Services[0].Algorithm.String()
		if i == 0 {
			first = cfg
		}
	}
	// The invalid config: a frontend naming a urlMap that does not exist
	// (a validation error, not a syntax error: the file decodes).
	bad := *first
	bad.Frontends = append([]config.Frontend(nil), first.Frontends...)
	bad.Frontends[0].URLMap = "um-does-not-exist"
	if f.invalid, err = json.MarshalIndent(&bad, "", "  "); err != nil {
		return nil, fmt.Errorf("soak: encode the invalid config: %w", err)
	}
	if _, err := config.Parse(f.invalid, "invalid"); err == nil {
		return nil, fmt.Errorf("soak: the invalid config loads; it must not")
	}
	if f.algorithms[0] == f.algorithms[1] {
		return nil, fmt.Errorf("soak: the two valid configs have the same algorithm %s; the soak cannot tell them apart", f.algorithms[0])
	}
	if err := writeAtomic(f.configPath, f.valid[0]); err != nil {
		return nil, err
	}
	return f, nil
}

// rewrite adapts a seed config like the lab does (health checks every
// interval, with the given timeout, thresholds as configured) and gives it
// the soak's addresses: an HTTPS and an HTTP frontend on free ports, and
// backends on 127.(60+o).Z.I:backendPort.
func (f *files) rewrite(cfg *config.Config, interval, timeout time.Duration, backendPort int) error {
	ms := max(1, int(interval/time.Millisecond))
	tms := max(1, int(timeout/time.Millisecond))
	for i := range cfg.HealthChecks {
		hc := &cfg.HealthChecks[i]
		hc.CheckIntervalMs = &ms
		hc.TimeoutMs = &tms
		if hc.UnhealthyThreshold != nil {
			f.unhealthyThreshold = max(f.unhealthyThreshold, *hc.UnhealthyThreshold)
		}
	}
	if f.unhealthyThreshold == 0 {
		f.unhealthyThreshold = 2 // Google Cloud's default
	}
	for i := range cfg.InstanceGroups {
		g := &cfg.InstanceGroups[i]
		for j := range g.NamedPorts {
			g.NamedPorts[j].Port = backendPort
		}
		for j := range g.Instances {
			a, err := netip.ParseAddr(g.Instances[j].IPAddress)
			if err != nil || !a.Is4() || !a.IsLoopback() {
				return fmt.Errorf("instance %s: address %q is not an IPv4 loopback address", g.Instances[j].Name, g.Instances[j].IPAddress)
			}
			b := a.As4()
			b[1] = 60 + b[1]%100
			g.Instances[j].IPAddress = netip.AddrFrom4(b).String()
		}
	}
	if len(cfg.Frontends) == 0 || cfg.Frontends[0].URLMap == "" {
		return fmt.Errorf("the config has no frontend with a urlMap")
	}
	base := cfg.Frontends[0]
	cfg.Frontends = []config.Frontend{
		{Name: feHTTPS, Address: f.httpsAddr, Protocol: "HTTPS", URLMap: base.URLMap, Region: base.Region,
			Certificates: []config.Certificate{{CertificateFile: f.certPath, PrivateKeyFile: f.keyPath}}},
		{Name: feHTTP, Address: f.httpAddr, Protocol: "HTTP", URLMap: base.URLMap, Region: base.Region},
	}
	return nil
}

// rotateCertMode writes a fresh self-signed ECDSA certificate and key for
// 127.0.0.1 over the frontend's files, key first, and returns its serial
// number. inPlace truncates and rewrites the files (same inode, as `cp`
// does); otherwise each is renamed over the old path (as most tools
// and Kubernetes secret updates do).
func (f *files) rotateCertMode(inPlace bool) (*big.Int, error) {
	cert, certPEM, keyPEM, err := lab.SelfSigned()
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	write := writeAtomic
	if inPlace {
		write = func(path string, data []byte) error {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				return fmt.Errorf("soak: write %s: %w", path, err)
			}
			return nil
		}
	}
	if err := write(f.keyPath, keyPEM); err != nil {
		return nil, err
	}
	if err := write(f.certPath, certPEM); err != nil {
		return nil, err
	}
	return cert.Leaf.SerialNumber, nil
}

// writeAtomic replaces path with data through a temporary file and a
// rename, so a concurrent reader sees the old or the new file, whole.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("soak: write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("soak: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("soak: write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("soak: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("soak: write %s: %w", path, err)
	}
	return nil
}
