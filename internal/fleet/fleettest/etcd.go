// Package fleettest runs a real etcd inside a test process (through
// go.etcd.io/etcd/server/v3/embed) on loopback, for the fleet tests. It
// is imported by tests only, so the spillway binary does not link etcd's
// server.
package fleettest

import (
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Etcd is an embedded single-member etcd that can be stopped and started
// again on the same data directory and ports (etcd going away and coming
// back).
type Etcd struct {
	t          testing.TB
	dir        string
	client     url.URL
	peer       url.URL
	e          *embed.Etcd
	tls        *TLSFiles
	log        *testLog
	ClientAddr string // host:port of the client listener
}

// Start starts an etcd on two free loopback ports; it stops when the
// test ends.
func Start(t testing.TB) *Etcd {
	t.Helper()
	return start(t, nil)
}

// StartTLS starts an etcd whose client listener serves TLS with f's
// server certificate and wants a client certificate signed by f's CA.
func StartTLS(t testing.TB, f TLSFiles) *Etcd {
	t.Helper()
	return start(t, &f)
}

func start(t testing.TB, f *TLSFiles) *Etcd {
	t.Helper()
	ce := &Etcd{t: t, dir: t.TempDir(), tls: f, log: newTestLog(t)}
	ce.client = url.URL{Scheme: "http", Host: freeAddr(t)}
	if f != nil {
		ce.client.Scheme = "https"
	}
	ce.peer = url.URL{Scheme: "http", Host: freeAddr(t)}
	ce.ClientAddr = ce.client.Host
	ce.Restart()
	t.Cleanup(ce.Stop)
	return ce
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Restart starts the etcd (again) and waits until it serves.
func (ce *Etcd) Restart() {
	ce.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "fleettest"
	cfg.Dir = ce.dir
	// etcd's errors go to the test's log, not stderr (see testLog).
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(ce.log.logger())
	ce.log.mute(false)
	cfg.ListenClientUrls = []url.URL{ce.client}
	cfg.AdvertiseClientUrls = []url.URL{ce.client}
	cfg.ListenPeerUrls = []url.URL{ce.peer}
	cfg.AdvertisePeerUrls = []url.URL{ce.peer}
	cfg.InitialCluster = cfg.Name + "=" + ce.peer.String()
	if ce.tls != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: ce.tls.ServerCert, KeyFile: ce.tls.ServerKey, TrustedCAFile: ce.tls.CA, ClientCertAuth: true}
	}
	var err error
	// The ports were free a moment ago; after a Stop they may take a
	// moment to be released.
	for range 50 {
		if ce.e, err = embed.StartEtcd(cfg); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		ce.t.Fatalf("embedded etcd: %v", err)
	}
	select {
	case <-ce.e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		ce.e.Close()
		ce.t.Fatal("embedded etcd not ready after 20 s")
	}
}

// Stop stops the etcd (idempotent). What etcd logs while it closes is
// dropped: it logs each listener it closes as an error.
func (ce *Etcd) Stop() {
	if ce.e != nil {
		ce.log.mute(true)
		ce.e.Close()
		ce.e = nil
	}
}
