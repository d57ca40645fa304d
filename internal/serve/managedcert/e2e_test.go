package managedcert_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// A MANAGED sslCertificate end to end: spillway serve orders it from
// Pebble, Pebble validates over the frontends on loopback (HTTP-01 on the
// HTTP frontend, TLS-ALPN-01 on the HTTPS one, each type alone), a TLS
// client then gets a certificate chained to Pebble's root and a proxied
// answer, and get-health reports the certificate ACTIVE.
func TestManagedCertificateFromPebble(t *testing.T) {
	for _, tc := range []struct {
		challenge string
		// pebbleLog must appear in Pebble's log (a real validation).
		pebbleLog string
	}{
		{"HTTP_01", "Attempting to validate w/ HTTP"},
		{"TLS_ALPN_01", "set VALID by completed challenge"},
	} {
		t.Run(tc.challenge, func(t *testing.T) {
			ports := freePorts(t, 2)
			httpPort, tlsPort := ports[0], ports[1]
			pb := startPebble(t, httpPort, tlsPort, 0)
			dir := t.TempDir()
			caFile := filepath.Join(dir, "pebble-ca.pem")
			if err := os.WriteFile(caFile, pb.caPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			be := startBackend(t)
			y := fmt.Sprintf(`networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: 127.0.0.1, port: %d}]}
backendServices:
- {name: bs, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 1000}]}
urlMaps:
- {name: um, defaultService: bs}
sslCertificates:
- {name: www, type: MANAGED, managed: {domains: [www.spillway.test]}}
frontends:
- {name: http, address: "127.0.0.1:%d", protocol: HTTP, urlMap: um}
- {name: https, address: "127.0.0.1:%d", protocol: HTTPS, urlMap: um, sslCertificates: [www]}
spillway:
  acme: {directoryUrl: %q, directoryCaFile: %q, storageDir: %q, email: ops@spillway.test, challenges: [%s]}
`, be, httpPort, tlsPort, pb.directory, caFile, filepath.Join(dir, "acme"), tc.challenge)
			s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
			client := pebbleClient(pb, fmt.Sprintf("127.0.0.1:%d", tlsPort))
			var body string
			waitFor(t, 90*time.Second, "served with a Pebble certificate", func() (bool, string) {
				var err error
				body, err = get(client, "https://www.spillway.test/")
				return err == nil, fmt.Sprint(err)
			})
			if body != "ok" {
				t.Errorf("body %q, want the backend's ok", body)
			}
			if !strings.Contains(pb.log.String(), tc.pebbleLog) {
				t.Errorf("Pebble's log has no %q:\n%s", tc.pebbleLog, pb.log.String())
			}
			h := health(t, s.AdminAddr())
			if len(h.SslCertificates) != 1 || h.SslCertificates[0].Managed == nil {
				t.Fatalf("get-health sslCertificates = %+v, want the managed one", h.SslCertificates)
			}
			m := h.SslCertificates[0].Managed
			if m.Status != "ACTIVE" || m.DomainStatus["www.spillway.test"] != "ACTIVE" || h.SslCertificates[0].ExpireTime == "" {
				t.Errorf("get-health: %+v expireTime %q, want ACTIVE with an expiry", m, h.SslCertificates[0].ExpireTime)
			}
		})
	}
}

// pebbleClient trusts Pebble's root only and dials addr whatever the
// URL's host.
func pebbleClient(pb *pebble, addr string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pb.roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		DisableKeepAlives: true,
	}}
}

func get(cl *http.Client, url string) (string, error) {
	resp, err := cl.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), err
}

// health reads the admin API's /health (what get-health prints).
func health(t *testing.T, admin string) report.Health {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h report.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// startBackend serves "ok" on loopback and returns its port.
func startBackend(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}
