package proxy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/netutil"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/route"
	"github.com/spillwaylb/spillway/internal/waf"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// backend is an httptest server that counts its requests.
type backend struct {
	*httptest.Server
	hits atomic.Int64
}

// newBackend starts an HTTP/1.1 backend on 127.0.0.1.
func newBackend(t testing.TB, h http.HandlerFunc) *backend {
	t.Helper()
	b := &backend{}
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		h(w, r)
	}))
	b.Config.ErrorLog = log.New(io.Discard, "", 0)
	b.Start()
	t.Cleanup(b.Close)
	return b
}

// addr returns the backend's ip:port.
func (b *backend) addr() string { return b.Listener.Addr().String() }

// refusedAddr returns a 127.0.0.1 address nothing listens on.
func refusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// eps renders NEG endpoint lines for addresses.
func eps(addrs ...string) string {
	var b strings.Builder
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		fmt.Fprintf(&b, "  - {ipAddress: %s, port: %s}\n", host, port)
	}
	return b.String()
}

// basic returns a config with one backend service "bs" (extra fields in
// bsExtra, indented by 2) over one NEG with the given endpoints, and a URL
// map "um" (urlMap is the map body after "- name: um\n"; empty means
// defaultService: bs).
func basic(bsExtra, urlMap string, addrs ...string) string {
	if urlMap == "" {
		urlMap = "  defaultService: bs\n"
	}
	return "healthChecks:\n- name: hc\n  type: HTTP\n" +
		"networkEndpointGroups:\n- name: neg-a\n  zone: us-east1-b\n  endpoints:\n" + eps(addrs...) +
		"backendServices:\n- name: bs\n  healthChecks: [hc]\n" + bsExtra +
		"  backends:\n  - group: neg-a\n    balancingMode: RATE\n    maxRatePerEndpoint: 1000\n" +
		"urlMaps:\n- name: um\n" + urlMap +
		"frontends:\n- name: fe\n  address: 127.0.0.1:0\n  urlMap: um\n  region: us-east1\n"
}

// lab is a proxy frontend on 127.0.0.1 in front of test backends.
type lab struct {
	t     testing.TB
	plan  *plan.Plan
	state *control.State
	snap  atomic.Pointer[proxy.Snapshot]
	srv   *http.Server
	h1    *h1.Server // the server loop, unless the lab runs on srv (NET_HTTP)
	url   string     // http(s)://127.0.0.1:port
	addr  string
	// client is a keep-alive HTTP/1.1 client that does not follow
	// redirects.
	client *http.Client

	mu       sync.Mutex
	outcomes []proxy.Outcome
}

// labOption adjusts the handler config or the server.
type labOption func(*proxy.Config)

// labServer chooses how a lab serves its frontend: the server loop, the
// client header and idle timeouts (zero: the defaults), and a bound on
// its open client connections (zero: none).
type labServer struct {
	netHTTP                    bool              // NewServer directly (the NET_HTTP option), not h1.Server
	h2                         proxy.HTTP2Server // the HTTP/2 loop; "" is testH2Server()
	headerTimeout, idleTimeout time.Duration
	maxConns                   int
	// ln, when set, is the listener to serve on; frontend names the
	// frontend to serve ("": the first).
	ln       net.Listener
	frontend string
}

// testH2Server is the HTTP/2 loop of labs that do not choose one:
// SPILLWAY_TEST_HTTP2_SERVER (SPILLWAY or NET_HTTP), else SPILLWAY
// (what `spillway serve` runs by default).
func testH2Server() proxy.HTTP2Server {
	if os.Getenv("SPILLWAY_TEST_HTTP2_SERVER") == "NET_HTTP" {
		return proxy.H2NetHTTP
	}
	return proxy.H2Spillway
}

// h2Servers are the HTTP/2 server loops that HTTP/2 tests run on.
var h2Servers = []proxy.HTTP2Server{proxy.H2NetHTTP, proxy.H2Spillway}

// forH2Servers runs f as a subtest per HTTP/2 server loop.
func forH2Servers(t *testing.T, f func(t *testing.T, h2s proxy.HTTP2Server)) {
	t.Helper()
	for _, s := range h2Servers {
		t.Run("h2="+string(s), func(t *testing.T) { f(t, s) })
	}
}

// newLab compiles yamlText and serves its first frontend with NewServer
// (TLS when tlsCfg is set), on h1.Server unless
// SPILLWAY_TEST_HTTP1_SERVER=NET_HTTP, HTTP/2 on testH2Server().
func newLab(t testing.TB, yamlText string, tlsCfg *tls.Config, opts ...labOption) *lab {
	t.Helper()
	return newLabServer(t, yamlText, tlsCfg, labServer{netHTTP: os.Getenv("SPILLWAY_TEST_HTTP1_SERVER") == "NET_HTTP"}, opts...)
}

// newLabServer is newLab with the server chosen by ls.
func newLabServer(t testing.TB, yamlText string, tlsCfg *tls.Config, ls labServer, opts ...labOption) *lab {
	t.Helper()
	c, err := config.Parse([]byte(yamlText), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yamlText)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{t: t, plan: p, state: control.New(p)}
	routes := map[string]*route.Table{}
	for name, um := range p.URLMaps {
		tbl, err := route.Compile(um.Config)
		if err != nil {
			t.Fatal(err)
		}
		routes[name] = tbl
	}
	policies, err := armor.Compile(c, waf.ForArmor(waf.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	l.snap.Store(&proxy.Snapshot{Plan: p, View: engine.NewView(l.state), Routes: routes, Demand: proxy.NewDemand(len(p.Services), len(p.Regions)), Armor: policies})
	fe := p.Frontends[0]
	for _, f := range p.Frontends {
		if f.Name == ls.frontend {
			fe = f
		}
	}
	cfg := proxy.Config{
		Frontend: fe,
		Snapshot: l.snap.Load,
		Observe: func(o proxy.Outcome) {
			l.mu.Lock()
			l.outcomes = append(l.outcomes, o)
			l.mu.Unlock()
		},
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	h := proxy.NewHandler(cfg)
	header, idle := ls.headerTimeout, ls.idleTimeout
	if header == 0 {
		header = h1.DefaultReadHeaderTimeout
	}
	if idle == 0 {
		idle = h1.DefaultIdleTimeout
	}
	h2s := ls.h2
	if h2s == "" {
		h2s = testH2Server()
	}
	l.srv = proxy.NewServerTimeouts(h, tlsCfg, header, idle, h2s)
	// Labs run on h1.Server (what `spillway serve` uses), with TLS for
	// HTTPS labs, unless ls.netHTTP.
	var hs *h1.Server
	if !ls.netHTTP {
		hs = proxy.NewH1ServerTimeouts(h, header, idle, h2s)
		if tlsCfg != nil {
			hs.TLSConfig = l.srv.TLSConfig // NewServer's: offers h2 and http/1.1
		}
		l.h1 = hs
	}
	ln := ls.ln
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	if ls.maxConns > 0 {
		// Accept waits while maxConns connections are open, as
		// --max-connections does (internal/serve's connLimiter).
		ln = netutil.LimitListener(ln, ls.maxConns)
	}
	l.addr = ln.Addr().String()
	scheme := "http"
	done := make(chan struct{})
	go func() {
		defer close(done)
		switch {
		case hs != nil:
			_ = hs.Serve(ln)
		case tlsCfg != nil:
			_ = l.srv.ServeTLS(ln, "", "")
		default:
			_ = l.srv.Serve(h1.GuardListener(ln))
		}
	}()
	if tlsCfg != nil {
		scheme = "https"
	}
	l.url = scheme + "://" + l.addr
	tr := &http.Transport{MaxIdleConnsPerHost: 64, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	l.client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		l.srv.Close()
		if hs != nil {
			hs.Close()
		}
		<-done
	})
	return l
}

// setHealthy marks the endpoints at addr healthy or unhealthy and
// publishes a new snapshot.
func (l *lab) setHealthy(addr string, ok bool) {
	for _, e := range l.plan.Endpoints {
		if e.Addr == addr {
			for range 3 {
				l.state.ObserveProbe(e.ID, ok, "test", t0)
			}
		}
	}
	old := l.snap.Load()
	l.snap.Store(&proxy.Snapshot{Plan: old.Plan, View: engine.NewView(l.state), Routes: old.Routes, Demand: old.Demand})
}

// do sends a request and returns the status and body.
func (l *lab) do(req *http.Request) (*http.Response, string) {
	l.t.Helper()
	resp, err := l.client.Do(req)
	if err != nil {
		l.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		l.t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return resp, string(b)
}

// get sends GET path with an optional Host.
func (l *lab) get(path string, host string) (*http.Response, string) {
	l.t.Helper()
	req, err := http.NewRequest("GET", l.url+path, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	return l.do(req)
}

// observed returns a copy of the outcomes reported so far.
func (l *lab) observed() []proxy.Outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]proxy.Outcome(nil), l.outcomes...)
}

// selfSigned returns a TLS config with a fresh self-signed certificate for
// 127.0.0.1.
func selfSigned(t testing.TB) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "spillway test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// within fails the test if f takes longer than d.
func within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if el := time.Since(start); el > d {
		t.Errorf("%s took %v, want under %v", what, el, d)
	}
}

var _ = strconv.Itoa
