package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// selfSigned writes a self-signed certificate for localhost and its key
// to dir and returns the files and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// h3Load counts HTTP/3 requests and the slowest.
type h3Load struct {
	upgradeLoad
	h3      atomic.Int64 // HTTP/3 requests answered 200
	slowest atomic.Int64 // ns, of an HTTP/3 request
}

// h3Worker sends HTTP/3 GETs until stop or max requests in all: on one
// QUIC connection kept as long as the server keeps it (newConns false),
// or each on a new connection. The client is quic-go's http3.Transport,
// which, like net/http's, sends a request again on a new connection when
// the one it picked can take no new request stream (the server sent
// GOAWAY or closed it) and no more.
func (l *h3Load) h3Worker(url string, pool *x509.CertPool, newConns bool, stop <-chan struct{}, max int64) {
	newClient := func() (*http.Client, *http3.Transport) {
		tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"},
			QUICConfig: &quic.Config{HandshakeIdleTimeout: 5 * time.Second}}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}, tr
	}
	cl, tr := newClient()
	defer func() { tr.Close() }()
	for l.ok.Load()+l.lost.Load() < max {
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		if newConns {
			tr.Close()
			cl, tr = newClient()
		}
		start := time.Now()
		resp, err := cl.Get(url)
		if err != nil {
			l.fail("HTTP/3 GET: %v", err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != "ok" || resp.ProtoMajor != 3 {
			l.fail("HTTP/3 GET: %s %d %q %v", resp.Proto, resp.StatusCode, body, err)
			continue
		}
		d := int64(time.Since(start))
		for cur := l.slowest.Load(); d > cur && !l.slowest.CompareAndSwap(cur, d); cur = l.slowest.Load() {
		}
		l.h3.Add(1)
		l.ok.Add(1)
	}
}

// TestUpgradeHTTP3LosesNothing: TestUpgradeLosesNothing for an HTTPS
// frontend with HTTP/3 (quicOverride ENABLE): the new process takes the
// TCP listener and the UDP socket; the old one sends GOAWAY on its QUIC
// connections, finishes their requests in flight, closes them and
// releases the socket, and only then does the new one read it. HTTP/3
// clients on kept connections and on a new connection per request, and
// an HTTPS client over TCP, lose no request; the new process alone serves
// HTTP/3 after the old one exits.
func TestUpgradeHTTP3LosesNothing(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("process test (Linux, not -short)")
	}
	bln := slowBackend(t)
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	port, adminPort := freeLoopbackPort(t, "udp"), freeLoopbackPort(t, "tcp")
	_, bport, _ := net.SplitHostPort(bln.Addr().String())
	cfg := fmt.Sprintf(`networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: 127.0.0.1, port: %s}]}
backendServices:
- {name: bs, backends: [{group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}]}
urlMaps:
- {name: um, defaultService: bs}
frontends:
- name: fe
  address: "127.0.0.1:%d"
  protocol: HTTPS
  urlMap: um
  quicOverride: ENABLE
  certificates: [{certificateFile: %q, privateKeyFile: %q}]
`, bport, port, certFile, keyFile)
	cfgPath := filepath.Join(dir, "spillway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "upgrade.sock")
	args := []string{"--config", cfgPath, "--admin", fmt.Sprintf("127.0.0.1:%d", adminPort), "--upgrade-socket", sock, "--watch", "0", "--procs", "2"}
	url := fmt.Sprintf("https://localhost:%d/", port)
	tcpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	old, oldLog := serveProc(t, "old", args...)
	waitUpWith(t, tcpClient, url, sock)

	var l h3Load
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const maxRequests = 20000
	for i := range 4 {
		wg.Go(func() { l.h3Worker(url, pool, i == 3, stop, maxRequests) })
	}
	wg.Go(func() { l.tlsWorker(tcpClient, url, stop, maxRequests) })
	for l.ok.Load() < 300 && l.lost.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	beforeUpgrade := l.ok.Load()

	_, newLog := serveProc(t, "new", args...)
	exited := make(chan error, 1)
	go func() { exited <- old.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the old process exited with %v, want 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the old process did not exit within 60 s of the upgrade")
	}
	atExit, h3AtExit := l.ok.Load(), l.h3.Load()
	deadline := time.Now().Add(30 * time.Second)
	for (l.ok.Load() < atExit+500 || l.h3.Load() < h3AtExit+300) && time.Now().Before(deadline) && l.ok.Load()+l.lost.Load() < maxRequests {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("HTTP/3 and HTTPS: %d answered 200 (%d over HTTP/3; %d before the upgrade began, %d by the time the old process exited), %d lost; slowest HTTP/3 request %v",
		l.ok.Load(), l.h3.Load(), beforeUpgrade, atExit, l.lost.Load(), time.Duration(l.slowest.Load()).Round(time.Millisecond))
	if l.lost.Load() != 0 {
		t.Errorf("lost across the upgrade: %d requests: %v", l.lost.Load(), l.errs)
	}
	if l.ok.Load() < atExit+500 || l.h3.Load() < h3AtExit+300 {
		t.Errorf("the new process answered %d requests (%d over HTTP/3) after the old one exited, want 500 (300)", l.ok.Load()-atExit, l.h3.Load()-h3AtExit)
	}
	if !strings.Contains(oldLog.String(), "a new process took the listening sockets") ||
		!strings.Contains(newLog.String(), "took the listening sockets of the running spillway serve") {
		t.Errorf("the logs do not show the handoff")
	}
}

// tlsWorker sends HTTPS GETs over TCP on keep-alive connections until
// stop.
func (l *h3Load) tlsWorker(cl *http.Client, url string, stop <-chan struct{}, max int64) {
	for l.ok.Load()+l.lost.Load() < max {
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		resp, err := cl.Get(url)
		if err != nil {
			l.fail("HTTPS GET: %v", err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != "ok" {
			l.fail("HTTPS GET: %d %q %v", resp.StatusCode, body, err)
			continue
		}
		l.ok.Add(1)
	}
}
