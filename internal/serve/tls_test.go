package serve_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pool: x509.NewCertPool()}
	ca.pool.AddCert(cert)
	return ca
}

// issue returns a PEM certificate and key named cn for the DNS names
// (a server certificate) or, with client set, a client certificate. rsaKey
// picks an RSA key instead of ECDSA P-256.
func (ca *testCA) issue(t *testing.T, cn string, names []string, client, rsaKey bool) (certPEM, keyPEM []byte) {
	t.Helper()
	var pub, priv any
	if rsaKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		pub, priv = &k.PublicKey, k
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pub, priv = &k.PublicKey, k
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// writePair writes a server certificate named cn to dir/<file>.crt and
// .key (replacing them in place if they exist) and returns the paths.
func (ca *testCA) writePair(t *testing.T, dir, file, cn string, names []string, rsaKey bool) (certFile, keyFile string) {
	t.Helper()
	c, k := ca.issue(t, cn, names, false, rsaKey)
	certFile, keyFile = filepath.Join(dir, file+".crt"), filepath.Join(dir, file+".key")
	if err := os.WriteFile(certFile, c, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// slowBackend answers "ok", and holds /slow until release is closed.
type slowBackend struct {
	addr    string
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

// done lets held requests finish.
func (b *slowBackend) done() { b.once.Do(func() { close(b.release) }) }

func startSlowBackend(t *testing.T) *slowBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &slowBackend{addr: ln.Addr().String(), arrived: make(chan struct{}, 16), release: make(chan struct{})}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			b.arrived <- struct{}{}
			<-b.release
			io.WriteString(w, "slow-done")
			return
		}
		io.WriteString(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { b.done(); srv.Close() })
	return b
}

// httpsFrontend is a frontend flow mapping without its closing brace, so
// callers can add fields; host is a loopback address (127.0.0.N) of its own
// when several frontends listen on port 0.
func httpsFrontend(name, host string, pairs ...string) string {
	var certs []string
	for i := 0; i+1 < len(pairs); i += 2 {
		certs = append(certs, fmt.Sprintf("{certificateFile: %q, privateKeyFile: %q}", pairs[i], pairs[i+1]))
	}
	return fmt.Sprintf(`{name: %s, address: "%s:0", protocol: HTTPS, urlMap: um, certificates: [%s]`, name, host, strings.Join(certs, ", "))
}

// tlsClient trusts ca and presents clientCert (if any); each client has
// its own connection pool.
func tlsClient(ca *testCA, serverName string, clientCert *tls.Certificate, keepAlive bool) *http.Client {
	cfg := &tls.Config{RootCAs: ca.pool, ServerName: serverName}
	if clientCert != nil {
		cfg.Certificates = []tls.Certificate{*clientCert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: !keepAlive, ForceAttemptHTTP2: true}}
}

// servedCN is the common name of the certificate a new connection sees.
func servedCN(t *testing.T, ca *testCA, addr, serverName string) string {
	t.Helper()
	cl := tlsClient(ca, serverName, nil, false)
	resp, err := cl.Get("https://" + addr + "/")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0].Subject.CommonName
}

// Certificates replaced in place are served to new connections after a
// reload, or after the watcher sees the files change; a request in flight
// on an old connection completes.
func TestCertificateRotationInPlace(t *testing.T) {
	for _, via := range []string{"reload", "watcher"} {
		t.Run(via, func(t *testing.T) {
			ca := newCA(t, "test CA")
			dir := t.TempDir()
			certFile, keyFile := ca.writePair(t, dir, "fe", "v1", []string{"localhost"}, false)
			be := startSlowBackend(t)
			y := oneServiceYAML(be.addr, httpsFrontend("fe", "127.0.0.1", certFile, keyFile)+"}", "")
			opts := serve.Options{WatchInterval: -1}
			if via == "watcher" {
				opts.WatchInterval = 50 * time.Millisecond
			}
			s := servetest.Run(t, servetest.Parse(t, y), opts)
			t.Cleanup(be.done) // before the server's graceful shutdown
			addr := s.FrontendAddr("fe")
			if cn := servedCN(t, ca, addr, "localhost"); cn != "v1" {
				t.Fatalf("first certificate: %q", cn)
			}
			old := tlsClient(ca, "localhost", nil, true)
			if _, err := getBody(old, "https://"+addr+"/"); err != nil {
				t.Fatal(err)
			}
			slow := make(chan string, 1)
			go func() {
				body, err := getBody(old, "https://"+addr+"/slow")
				if err != nil {
					body = err.Error()
				}
				slow <- body
			}()
			<-be.arrived

			ca.writePair(t, dir, "fe", "v2", []string{"localhost"}, false)
			if via == "reload" {
				if err := s.Reload(context.Background(), servetest.Parse(t, y)); err != nil {
					t.Fatal(err)
				}
				if cn := servedCN(t, ca, addr, "localhost"); cn != "v2" {
					t.Fatalf("after the reload new connections see %q, want v2", cn)
				}
			} else {
				waitFor(t, "the watcher to serve v2", func() bool { return servedCN(t, ca, addr, "localhost") == "v2" })
			}
			if s.FrontendAddr("fe") != addr {
				t.Errorf("listener moved from %s to %s", addr, s.FrontendAddr("fe"))
			}
			be.done()
			if body := <-slow; body != "slow-done" {
				t.Errorf("in-flight request on the old connection: %q", body)
			}
		})
	}
}

// A certificate that fails to load keeps the old one serving: on reload
// (the reload is rejected) and from the watcher (counted and logged once,
// not on every poll); a good pair written afterwards is picked up.
func TestBrokenCertificateKeepsOldOne(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certFile, keyFile := ca.writePair(t, dir, "fe", "v1", []string{"localhost"}, false)
	be := startSlowBackend(t)
	y := oneServiceYAML(be.addr, httpsFrontend("fe", "127.0.0.1", certFile, keyFile)+"}", "")
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: 50 * time.Millisecond})
	addr := s.FrontendAddr("fe")
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := s.Reload(context.Background(), servetest.Parse(t, y))
	if err == nil || !strings.Contains(err.Error(), keyFile) {
		t.Fatalf("reload with a broken key: %v", err)
	}
	const failed = "spillway_tls_file_reload_failures_total 1\n"
	waitFor(t, "the watcher to count the broken key", func() bool { return strings.Contains(metricsText(t, s), failed) })
	time.Sleep(300 * time.Millisecond) // several more polls of the same broken files
	if m := metricsText(t, s); !strings.Contains(m, failed) {
		t.Errorf("the same broken files were counted more than once:\n%s", m)
	}
	if cn := servedCN(t, ca, addr, "localhost"); cn != "v1" {
		t.Fatalf("after a broken key, new connections see %q, want v1", cn)
	}
	ca.writePair(t, dir, "fe", "v2", []string{"localhost"}, false)
	waitFor(t, "the watcher to serve v2", func() bool { return servedCN(t, ca, addr, "localhost") == "v2" })
}

func metricsText(t *testing.T, s *serve.Server) string {
	t.Helper()
	body, err := getBody(http.DefaultClient, "http://"+s.AdminAddr()+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// Flipping a frontend between two certificate paths on reload keeps the
// listener: a client loop (new connections and keep-alive ones) sees no
// failed request and no refused connection.
func TestCertificatePathFlipKeepsListener(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certA, keyA := ca.writePair(t, dir, "a", "a", []string{"localhost"}, false)
	certB, keyB := ca.writePair(t, dir, "b", "b", []string{"localhost"}, false)
	be := startSlowBackend(t)
	yA := oneServiceYAML(be.addr, httpsFrontend("fe", "127.0.0.1", certA, keyA)+"}", "")
	yB := oneServiceYAML(be.addr, httpsFrontend("fe", "127.0.0.1", certB, keyB)+"}", "")
	s := servetest.Run(t, servetest.Parse(t, yA), serve.Options{WatchInterval: -1})
	addr := s.FrontendAddr("fe")

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, keepAlive := range []bool{false, true, false} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := tlsClient(ca, "localhost", nil, keepAlive)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := getBody(cl, "https://"+addr+"/"); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	for i := range 20 {
		y, want := yB, "b"
		if i%2 == 1 {
			y, want = yA, "a"
		}
		if err := s.Reload(context.Background(), servetest.Parse(t, y)); err != nil {
			t.Fatal(err)
		}
		if cn := servedCN(t, ca, addr, "localhost"); cn != want {
			t.Fatalf("reload %d: new connections see %q, want %q", i, cn, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if got := s.FrontendAddr("fe"); got != addr {
		t.Errorf("the listener was rebound: %s, then %s", addr, got)
	}
	if failed.Load() != 0 || ok.Load() == 0 {
		t.Errorf("%d requests failed (first: %v), %d succeeded", failed.Load(), firstErr.Load(), ok.Load())
	}
	t.Logf("%d requests across 20 certificate flips", ok.Load())
}

// With several certificates, the client's SNI picks one; an unknown name
// gets the first. Both HTTP/1.1 servers take the same TLS settings.
func TestSNIPicksCertificate(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certA, keyA := ca.writePair(t, dir, "a", "a", []string{"a.example"}, false)
	certB, keyB := ca.writePair(t, dir, "b", "b", []string{"b.example", "*.b.example"}, false)
	be := startSlowBackend(t)
	for _, h1 := range []string{"SPILLWAY", "NET_HTTP"} {
		t.Run(h1, func(t *testing.T) {
			y := oneServiceYAML(be.addr, httpsFrontend("fe", "127.0.0.1", certA, keyA, certB, keyB)+"}", "spillway: {http1Server: "+h1+"}\n")
			s := servetest.Run(t, servetest.Parse(t, y), serve.Options{WatchInterval: -1})
			addr := s.FrontendAddr("fe")
			for _, tt := range []struct{ sni, want string }{
				{"a.example", "a"}, {"b.example", "b"}, {"www.b.example", "b"},
			} {
				if cn := servedCN(t, ca, addr, tt.sni); cn != tt.want {
					t.Errorf("SNI %s: certificate %q, want %q", tt.sni, cn, tt.want)
				}
			}
			conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "other.example", InsecureSkipVerify: true})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "a" {
				t.Errorf("unknown SNI: certificate %q, want the first, a", cn)
			}
		})
	}
}

// sslPolicy sets the minimum TLS version and the cipher suites of
// Google's profiles.
func TestSslPolicy(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	ecCert, ecKey := ca.writePair(t, dir, "ec", "ec", []string{"localhost"}, false)
	rsaCert, rsaKey := ca.writePair(t, dir, "rsa", "rsa", []string{"localhost"}, true)
	be := startSlowBackend(t)
	fes := strings.Join([]string{
		httpsFrontend("tls12", "127.0.0.2", ecCert, ecKey) + ", sslPolicy: tls12}",
		httpsFrontend("compat10", "127.0.0.3", ecCert, ecKey) + ", sslPolicy: compat10}",
		httpsFrontend("modern", "127.0.0.4", ecCert, ecKey) + ", sslPolicy: modern}",
		httpsFrontend("restricted", "127.0.0.5", ecCert, ecKey) + ", sslPolicy: restricted}",
		httpsFrontend("modernrsa", "127.0.0.6", rsaCert, rsaKey) + ", sslPolicy: modern}",
		httpsFrontend("compatrsa", "127.0.0.7", rsaCert, rsaKey) + ", sslPolicy: compat10}",
		httpsFrontend("custom", "127.0.0.8", ecCert, ecKey) + ", sslPolicy: custom}",
	}, "\n- ")
	policies := `sslPolicies:
- {name: tls12, profile: COMPATIBLE, minTlsVersion: TLS_1_2}
- {name: compat10, profile: COMPATIBLE, minTlsVersion: TLS_1_0}
- {name: modern, profile: MODERN, minTlsVersion: TLS_1_0}
- {name: restricted, profile: RESTRICTED, minTlsVersion: TLS_1_2}
- {name: custom, profile: CUSTOM, minTlsVersion: TLS_1_2, customFeatures: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]}
`
	s := servetest.Run(t, servetest.Parse(t, oneServiceYAML(be.addr, fes, policies)), serve.Options{WatchInterval: -1})
	tls11 := &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	only := func(suite uint16) *tls.Config {
		return &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}}
	}
	tests := []struct {
		frontend string
		client   *tls.Config
		ok       bool
	}{
		{"tls12", tls11, false},
		{"tls12", &tls.Config{MinVersion: tls.VersionTLS12}, true},
		{"compat10", tls11, true},
		{"restricted", only(tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA), false},
		{"restricted", only(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256), true},
		{"modern", only(tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA), true},
		{"modernrsa", only(tls.TLS_RSA_WITH_AES_128_GCM_SHA256), false},
		{"compatrsa", only(tls.TLS_RSA_WITH_AES_128_GCM_SHA256), true},
		{"custom", only(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256), false},
		{"custom", only(tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384), true},
	}
	for _, tt := range tests {
		cfg := tt.client.Clone()
		cfg.RootCAs, cfg.ServerName = ca.pool, "localhost"
		conn, err := tls.Dial("tcp", s.FrontendAddr(tt.frontend), cfg)
		if err == nil {
			conn.Close()
		}
		if (err == nil) != tt.ok {
			t.Errorf("frontend %s, client versions %x-%x suites %v: handshake error %v, want ok=%v",
				tt.frontend, cfg.MinVersion, cfg.MaxVersion, cfg.CipherSuites, err, tt.ok)
		}
	}
}

// serverTlsPolicy REJECT_INVALID requires a client certificate from the
// trust config's CAs; ALLOW_INVALID_OR_MISSING_CLIENT_CERT lets any
// client in.
func TestClientCertificateValidation(t *testing.T) {
	ca, other := newCA(t, "server and client CA"), newCA(t, "unknown CA")
	dir := t.TempDir()
	certFile, keyFile := ca.writePair(t, dir, "fe", "fe", []string{"localhost"}, false)
	caFile := filepath.Join(dir, "client-ca.pem")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	pair := func(c *testCA) *tls.Certificate {
		cp, kp := c.issue(t, "client", nil, true, false)
		cert, err := tls.X509KeyPair(cp, kp)
		if err != nil {
			t.Fatal(err)
		}
		return &cert
	}
	good, bad := pair(ca), pair(other)
	be := startSlowBackend(t)
	fes := httpsFrontend("strict", "127.0.0.9", certFile, keyFile) + ", serverTlsPolicy: strict}\n- " +
		httpsFrontend("lenient", "127.0.0.10", certFile, keyFile) + ", serverTlsPolicy: lenient}"
	extra := fmt.Sprintf(`serverTlsPolicies:
- name: strict
  mtlsPolicy: {clientValidationMode: REJECT_INVALID, clientValidationTrustConfig: projects/p/locations/global/trustConfigs/clients}
- name: lenient
  mtlsPolicy: {clientValidationMode: ALLOW_INVALID_OR_MISSING_CLIENT_CERT}
trustConfigs:
- name: clients
  trustStores:
  - trustAnchors: [{pemCertificateFile: %q}]
`, caFile)
	s := servetest.Run(t, servetest.Parse(t, oneServiceYAML(be.addr, fes, extra)), serve.Options{WatchInterval: -1})
	tests := []struct {
		frontend string
		cert     *tls.Certificate
		ok       bool
	}{
		{"strict", nil, false},
		{"strict", bad, false},
		{"strict", good, true},
		{"lenient", nil, true},
		{"lenient", bad, true},
	}
	for _, tt := range tests {
		for _, keepAlive := range []bool{false, true} {
			cl := tlsClient(ca, "localhost", tt.cert, keepAlive)
			body, err := getBody(cl, "https://"+s.FrontendAddr(tt.frontend)+"/")
			if (err == nil && body == "ok") != tt.ok {
				t.Errorf("frontend %s, client cert %v: %q, %v; want ok=%v", tt.frontend, tt.cert != nil, body, err, tt.ok)
			}
		}
	}
}
