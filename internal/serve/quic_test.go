package serve_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// h3Client is an HTTP/3 client trusting ca, with a connection of its own.
func h3Client(t *testing.T, ca *testCA) *http.Client {
	t.Helper()
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: "localhost"},
		QUICConfig:      &quic.Config{HandshakeIdleTimeout: 3 * time.Second},
	}
	t.Cleanup(func() { tr.Close() })
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// h3Get returns the body, protocol and peer certificate CN of a GET.
func h3Get(cl *http.Client, url string) (body, proto, cn string, err error) {
	resp, err := cl.Get(url)
	if err != nil {
		return "", "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", "", err
	}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		cn = resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if resp.StatusCode != 200 {
		return "", resp.Proto, cn, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), resp.Proto, cn, nil
}

// quicConfig is one HTTPS frontend with quicOverride set (and an access
// log when logPath is set).
func quicConfig(be, certFile, keyFile, override, logPath string) string {
	extra := ""
	if logPath != "" {
		extra = fmt.Sprintf("spillway:\n  accessLog: {enable: true, path: %s, format: JSON}\n", logPath)
	}
	return oneServiceYAML(be, httpsFrontend("fe", "127.0.0.1", certFile, keyFile)+", quicOverride: "+override+"}", extra)
}

// altSvc returns the Alt-Svc header of a TCP response over HTTP/1.1 or
// HTTP/2 (h2 set).
func altSvc(t *testing.T, ca *testCA, addr string, h2 bool) string {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.pool, ServerName: "localhost"}
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	var p http.Protocols
	p.SetHTTP1(!h2)
	p.SetHTTP2(h2)
	tr.Protocols = &p
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := resp.ProtoMajor == 2; got != h2 {
		t.Fatalf("answered over %s", resp.Proto)
	}
	return resp.Header.Get("Alt-Svc")
}

// An HTTPS frontend with quicOverride ENABLE serves HTTP/3 on its
// address and port (UDP) through the same handler: the request is
// proxied, logged with protocol HTTP/3.0 and counted; its TCP responses
// (HTTP/1.1 and HTTP/2) advertise it with Alt-Svc, its HTTP/3 ones do not.
func TestHTTP3Frontend(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certFile, keyFile := ca.writePair(t, dir, "fe", "v1", []string{"localhost"}, false)
	be := startSlowBackend(t)
	logPath := filepath.Join(dir, "access.log")
	s := servetest.Run(t, servetest.Parse(t, quicConfig(be.addr, certFile, keyFile, "ENABLE", logPath)), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	tcp, udp := s.FrontendAddr("fe"), s.FrontendQUICAddr("fe")
	if udp != tcp {
		t.Fatalf("HTTP/3 listens on %q, want the TCP frontend's %s", udp, tcp)
	}
	resp, err := h3Client(t, ca).Get("https://" + udp + "/h3")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Proto != "HTTP/3.0" || string(b) != "ok" || resp.StatusCode != 200 {
		t.Fatalf("HTTP/3 GET: %s %d %q", resp.Proto, resp.StatusCode, b)
	}
	if v := resp.Header.Get("Alt-Svc"); v != "" {
		t.Errorf("HTTP/3 response carries Alt-Svc %q", v)
	}
	_, port, _ := net.SplitHostPort(tcp)
	want := `h3=":` + port + `"; ma=86400`
	for _, h2 := range []bool{false, true} {
		if got := altSvc(t, ca, tcp, h2); got != want {
			t.Errorf("TCP response (h2 %v) Alt-Svc %q, want %q", h2, got, want)
		}
	}
	if l := readLog(t, logPath, "/h3")["/h3"]; l.HTTPRequest.Protocol != "HTTP/3.0" || l.HTTPRequest.Status != 200 {
		t.Errorf("/h3 logged %+v", l)
	}
	m := metricsText(t, s)
	if n := promValue(m, `spillway_requests_total{backend_service="bs",code_class="2xx",frontend="fe",group="neg",zone="us-east1-b"}`); n != 3 {
		t.Errorf("2xx counted %v, want 3 (one HTTP/3, two TCP)", n)
	}
}

// A reload with a new certificate keeps the HTTP/3 listener (and its
// connections) and serves the new certificate to new QUIC connections.
func TestHTTP3CertificateRotation(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certFile, keyFile := ca.writePair(t, dir, "fe", "v1", []string{"localhost"}, false)
	be := startSlowBackend(t)
	y := quicConfig(be.addr, certFile, keyFile, "ENABLE", "")
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{WatchInterval: -1})
	url := "https://" + s.FrontendQUICAddr("fe") + "/"
	old := h3Client(t, ca)
	if _, _, cn, err := h3Get(old, url); err != nil || cn != "v1" {
		t.Fatalf("first certificate %q, err %v", cn, err)
	}
	ca.writePair(t, dir, "fe", "v2", []string{"localhost"}, false)
	if err := s.Reload(context.Background(), servetest.Parse(t, y)); err != nil {
		t.Fatal(err)
	}
	if got := "https://" + s.FrontendQUICAddr("fe") + "/"; got != url {
		t.Fatalf("HTTP/3 listener moved: %s, was %s", got, url)
	}
	if _, _, cn, err := h3Get(h3Client(t, ca), url); err != nil || cn != "v2" {
		t.Errorf("after the reload a new QUIC connection sees %q (err %v), want v2", cn, err)
	}
	if _, _, cn, err := h3Get(old, url); err != nil || cn != "v1" {
		t.Errorf("the connection opened before the reload: cn %q, err %v; want it kept (v1)", cn, err)
	}
}

// A reload to quicOverride DISABLE closes the HTTP/3 listener (its UDP
// port is free) and stops Alt-Svc; ENABLE again serves it on the same
// port; a reload without the frontend closes it too.
func TestHTTP3DisabledByReload(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certFile, keyFile := ca.writePair(t, dir, "fe", "v1", []string{"localhost"}, false)
	be := startSlowBackend(t)
	cfg := func(override string) string { return quicConfig(be.addr, certFile, keyFile, override, "") }
	s := servetest.Run(t, servetest.Parse(t, cfg("ENABLE")), serve.Options{WatchInterval: -1})
	addr := s.FrontendQUICAddr("fe")
	if _, _, _, err := h3Get(h3Client(t, ca), "https://"+addr+"/"); err != nil {
		t.Fatal(err)
	}
	reload := func(y string) {
		t.Helper()
		if err := s.Reload(context.Background(), servetest.Parse(t, y)); err != nil {
			t.Fatal(err)
		}
	}
	reload(cfg("DISABLE"))
	if got := s.FrontendQUICAddr("fe"); got != "" {
		t.Errorf("HTTP/3 still listening on %s", got)
	}
	if v := altSvc(t, ca, s.FrontendAddr("fe"), false); v != "" {
		t.Errorf("Alt-Svc %q after QUIC was disabled", v)
	}
	udpFree(t, addr)
	reload(cfg("ENABLE"))
	if got := s.FrontendQUICAddr("fe"); got != addr {
		t.Fatalf("re-enabled HTTP/3 listens on %q, want %s", got, addr)
	}
	if _, _, _, err := h3Get(h3Client(t, ca), "https://"+addr+"/"); err != nil {
		t.Fatalf("re-enabled: %v", err)
	}
	other := strings.Replace(cfg("ENABLE"), "{name: fe,", "{name: other,", 1)
	other = strings.Replace(other, `"127.0.0.1:0"`, `"127.0.0.2:0"`, 1)
	reload(other)
	udpFree(t, addr)
}

// Shutdown lets a request in flight over HTTP/3 finish, then frees the
// UDP port.
func TestHTTP3GracefulShutdown(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certFile, keyFile := ca.writePair(t, dir, "fe", "v1", []string{"localhost"}, false)
	be := startSlowBackend(t)
	s, err := serve.New(servetest.Parse(t, quicConfig(be.addr, certFile, keyFile, "ENABLE", "")), serve.Options{WatchInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	stop := servetest.Start(t, s)
	addr, tcp := s.FrontendQUICAddr("fe"), s.FrontendAddr("fe")
	slow := make(chan string, 1)
	go func() {
		body, _, _, err := h3Get(h3Client(t, ca), "https://"+addr+"/slow")
		if err != nil {
			body = err.Error()
		}
		slow <- body
	}()
	<-be.arrived
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// (The server's accessors wait for the shutdown: ask the kernel.)
	waitFor(t, "the TCP listener to close", func() bool {
		c, err := net.DialTimeout("tcp", tcp, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	be.done()
	if body := <-slow; body != "slow-done" {
		t.Errorf("HTTP/3 request in flight at shutdown: %q", body)
	}
	<-stopped
	udpFree(t, addr)
}

// udpFree fails unless addr's UDP port can be bound (then frees it).
func udpFree(t *testing.T, addr string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("UDP %s is still bound: %v", addr, err)
	}
	pc.Close()
}

// QUIC connections count against MaxConnections with the TCP ones, and
// in spillway_connections_active: with a limit of 2 taken by one QUIC and
// one TCP connection, a new QUIC connection is refused at once with
// CONNECTION_REFUSED (not left waiting: the handshake never starts);
// once the QUIC connection closes, a new one is accepted.
func TestHTTP3MaxConnections(t *testing.T) {
	ca := newCA(t, "test CA")
	dir := t.TempDir()
	certFile, keyFile := ca.writePair(t, dir, "fe", "v1", []string{"localhost"}, false)
	be := startSlowBackend(t)
	s := servetest.Run(t, servetest.Parse(t, quicConfig(be.addr, certFile, keyFile, "ENABLE", "")), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1, MaxConnections: 2})
	udp, tcp := s.FrontendQUICAddr("fe"), s.FrontendAddr("fe")
	tlsCfg := &tls.Config{RootCAs: ca.pool, ServerName: "localhost", NextProtos: []string{http3.NextProtoH3}}
	dial := func() (*quic.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return quic.DialAddr(ctx, udp, tlsCfg, &quic.Config{HandshakeIdleTimeout: 5 * time.Second})
	}
	q1, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer q1.CloseWithError(0, "")
	t1, err := tls.Dial("tcp", tcp, &tls.Config{RootCAs: ca.pool, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	active := func() float64 { return promValue(metricsText(t, s), "spillway_connections_active") }
	if n := active(); n != 2 {
		t.Errorf("spillway_connections_active %v with one QUIC and one TCP connection open, want 2", n)
	}
	start := time.Now()
	q2, err := dial()
	var te *quic.TransportError
	if err == nil || !errors.As(err, &te) || te.ErrorCode != quic.ConnectionRefused {
		if q2 != nil {
			q2.CloseWithError(0, "")
		}
		t.Fatalf("third connection past MaxConnections 2: %v, want CONNECTION_REFUSED", err)
	}
	t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
	q1.CloseWithError(0, "")
	var q3 *quic.Conn
	waitFor(t, "a QUIC connection accepted once one closed", func() bool {
		q3, err = dial()
		return err == nil
	})
	defer q3.CloseWithError(0, "")
	t.Logf("accepted again after %v", time.Since(start).Round(time.Millisecond))
	if n := promValue(metricsText(t, s), "spillway_connections_accepted_total"); n < 3 {
		t.Errorf("spillway_connections_accepted_total %v, want at least 3 (2 QUIC, 1 TCP)", n)
	}
}
