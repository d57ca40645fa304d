package managedcert_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// TestManagedCertificateFleet: two instances of a fleet share one
// embedded etcd as their certificate storage (fleet.CertStorage, what
// spillway serve --fleet gives them) and one MANAGED certificate. Each
// has its frontends on the same ports of its own loopback address
// (127.0.0.1 and 127.0.0.2); Pebble resolves the domain to 127.0.0.1, so
// whichever instance orders, the first one's frontends answer Pebble's
// validation (from the challenge token in etcd when the second ordered).
// Pebble sees one order and issues one certificate, and both instances
// serve it: the same serial number on both addresses. Each config names
// a storage directory of its own, which fleet mode ignores: were the
// instances not sharing etcd, they would order twice.
func TestManagedCertificateFleet(t *testing.T) {
	ports := freePorts(t, 2)
	httpPort, tlsPort := ports[0], ports[1]
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		for _, p := range ports {
			ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, p))
			if err != nil {
				t.Skipf("port %d taken on %s since freePorts: %v", p, ip, err)
			}
			ln.Close()
		}
	}
	pb := startPebble(t, httpPort, tlsPort, 0)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "pebble-ca.pem")
	if err := os.WriteFile(caFile, pb.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	be := startBackend(t)
	e := fleettest.Start(t)
	config := func(ip string) string {
		return fmt.Sprintf(`networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: 127.0.0.1, port: %d}]}
backendServices:
- {name: bs, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 1000}]}
urlMaps:
- {name: um, defaultService: bs}
sslCertificates:
- {name: www, type: MANAGED, managed: {domains: [www.spillway.test]}}
frontends:
- {name: http, address: "%[2]s:%[3]d", protocol: HTTP, urlMap: um}
- {name: https, address: "%[2]s:%[4]d", protocol: HTTPS, urlMap: um, sslCertificates: [www]}
spillway:
  acme: {directoryUrl: %[5]q, directoryCaFile: %[6]q, storageDir: %[7]q, email: ops@spillway.test}
`, be, ip, httpPort, tlsPort, pb.directory, caFile, filepath.Join(dir, ip))
	}
	var cl *clientv3.Client
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		var err error
		cl, err = fleet.ClientConfig{Endpoints: []string{e.ClientAddr}, DialTimeout: 2 * time.Second}.Dial()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		storage := fleet.NewCertStorage(fleet.NewStore(cl, ""), 2*time.Second)
		servetest.Run(t, servetest.Parse(t, config(ip)), serve.Options{Admin: ip + ":0", WatchInterval: -1, CertStorage: storage})
	}
	serials := map[string]string{}
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		addr := fmt.Sprintf("%s:%d", ip, tlsPort)
		client := pebbleClient(pb, addr)
		waitFor(t, 90*time.Second, "served with a Pebble certificate on "+addr, func() (bool, string) {
			body, err := get(client, "https://www.spillway.test/")
			return err == nil && body == "ok", fmt.Sprint(body, err)
		})
		serials[ip] = serial(t, pb, addr)
	}
	resp, err := cl.Get(context.Background(), fleet.DefaultPrefix+"acme/data/certificates/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) == 0 {
		t.Errorf("no certificate in etcd under %sacme/data/certificates/ (%v)", fleet.DefaultPrefix, err)
	}
	if serials["127.0.0.1"] != serials["127.0.0.2"] {
		t.Errorf("the instances serve different certificates: serials %v", serials)
	}
	log := pb.log.String()
	orders, issued := strings.Count(log, "Added order"), strings.Count(log, "Issued certificate serial")
	t.Logf("Pebble: %d order, %d certificate; both instances serve serial %s", orders, issued, serials["127.0.0.1"])
	if orders != 1 || issued != 1 {
		t.Errorf("Pebble saw %d orders and issued %d certificates for a fleet of two, want one of each:\n%s", orders, issued, log)
	}
}

// serial returns the serial number of the certificate served at addr for
// www.spillway.test, verified against Pebble's root.
func serial(t *testing.T, pb *pebble, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{RootCAs: pb.roots, ServerName: "www.spillway.test"}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
}
