package lab

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/probe"
)

// Backends are the lab's backend servers: one real HTTP server per
// configured endpoint address (instance × named port, or NEG endpoint), on
// loopback. Each answers the health check's requestPath with 200 "ok" (or
// the health check's expected response) and every other request with
// {"zone": ..., "instance": ...} (padded to about N bytes when the query
// has pad=N, for clients that need a large response; at most MaxPad).
//
// Zones fail in three ways: FailHealth makes the health path answer 503
// while the data path keeps working (failure mode 1, a sick application
// behind a live socket), StopListeners closes the listeners and every open
// connection (failure mode 2, a dead zone), and FailRequests makes every
// data request answer 503 while the health path stays 200 (a broken
// application whose health check stays green: only outlier detection can
// see it). Recover undoes any of them.
type Backends struct {
	servers []*backend
	tlsCert *tls.Certificate // shared self-signed cert for HTTPS backends
}

// ListenFunc opens a backend's listener on addr (host:port). The default
// listens in the lab process's network namespace; the global lab opens
// each listener inside the namespace of the backend's site.
type ListenFunc func(ctx context.Context, addr string) (net.Listener, error)

// backend is one address.
type backend struct {
	addr     string
	zone     string
	instance string
	proto    string // HTTP, HTTPS, HTTP2 (TLS), H2C
	// health maps health-check paths to the body a passing check answers.
	health map[string]string
	tlsCfg *tls.Config
	listen ListenFunc

	failHealth   atomic.Bool
	failRequests atomic.Bool
	failed       atomic.Int64 // data requests answered 503 by FailRequests

	mu   sync.Mutex // guards srv and done
	srv  *http.Server
	done chan struct{} // closed when srv's Serve returns
}

// response is the body of a data-path answer.
type response struct {
	Zone     string `json:"zone"`
	Instance string `json:"instance"`
	Pad      string `json:"pad,omitempty"`
}

// MaxPad bounds the pad=N query parameter of data requests (bytes).
const MaxPad = 4 << 20

// StartBackends starts a server for every endpoint address of p (and every
// distinct probe address, when a health check uses a fixed port). The
// protocol follows the backend services that use the address: HTTP by
// default, TLS with an in-memory self-signed certificate for HTTPS and
// HTTP2, cleartext HTTP/2 as well as HTTP/1.1 for H2C. Linux routes all of
// 127.0.0.0/8 to loopback, so the example configs' 127.1.Z.I addresses
// need no setup; on other systems binding them fails with an error that
// says so. Close stops everything.
func StartBackends(ctx context.Context, p *plan.Plan) (*Backends, error) {
	return StartBackendsWith(ctx, p, nil)
}

// StartBackendsWith is StartBackends with each listener opened by listen
// (nil: in this process's network namespace).
func StartBackendsWith(ctx context.Context, p *plan.Plan, listen ListenFunc) (*Backends, error) {
	if listen == nil {
		listen = func(ctx context.Context, addr string) (net.Listener, error) {
			var lc net.ListenConfig
			return lc.Listen(ctx, "tcp", addr)
		}
	}
	set := backendSet{byAddr: map[string]*backend{}}
	for _, svc := range p.Services {
		for _, be := range svc.Backends {
			for _, e := range be.Endpoints {
				if err := set.addEndpoint(svc, e); err != nil {
					return nil, err
				}
			}
		}
	}
	byAddr, order := set.byAddr, set.order
	if len(order) == 0 {
		return nil, errors.New("lab: the config has no backend endpoints to start")
	}
	bs := &Backends{}
	for _, addr := range order {
		b := byAddr[addr]
		b.listen = listen
		if usesTLS(b.proto) {
			if bs.tlsCert == nil {
				cert, _, _, err := SelfSigned()
				if err != nil {
					return nil, err
				}
				bs.tlsCert = &cert
			}
			b.tlsCfg = &tls.Config{Certificates: []tls.Certificate{*bs.tlsCert}, NextProtos: []string{"h2", "http/1.1"}}
		}
		if err := b.start(ctx); err != nil {
			bs.Close()
			return nil, err
		}
		bs.servers = append(bs.servers, b)
	}
	return bs, nil
}

// backendSet collects the lab's backends by address, in config order.
type backendSet struct {
	byAddr map[string]*backend
	order  []string
}

// add returns the backend at addr, made on first use; an address in two
// zones or with two transports is refused.
func (bs *backendSet) add(addr, zone, instance, proto string) (*backend, error) {
	b := bs.byAddr[addr]
	if b == nil {
		b = &backend{addr: addr, zone: zone, instance: instance, proto: proto, health: map[string]string{}}
		bs.byAddr[addr] = b
		bs.order = append(bs.order, addr)
		return b, nil
	}
	if b.zone != zone {
		return nil, fmt.Errorf("lab: address %s is configured in two zones (%s and %s); the lab answers one zone per address", addr, b.zone, zone)
	}
	if !sameTransport(b.proto, proto) {
		return nil, fmt.Errorf("lab: address %s is used as %s and as %s; the lab serves one protocol per address", addr, b.proto, proto)
	}
	return b, nil
}

// addEndpoint adds endpoint e of svc, and its health check's address
// with the path and body the check expects.
func (bs *backendSet) addEndpoint(svc *plan.Service, e *plan.Endpoint) error {
	instance := e.Instance
	if instance == "" {
		instance = e.Addr
	}
	proto := svc.Protocol
	if e.TLS {
		proto = "HTTPS" // a serverless group's base URL is https
	}
	b, err := bs.add(e.Addr, groupZone(e.Group), instance, proto)
	if err != nil {
		return err
	}
	hc := e.HealthCheck
	if hc == nil || hc.Type == "TCP" {
		return nil
	}
	pb := b
	if e.ProbeAddr != e.Addr {
		if pb, err = bs.add(e.ProbeAddr, groupZone(e.Group), instance, hc.Type); err != nil {
			return err
		}
	}
	body := "ok"
	if hc.Response != "" {
		body = hc.Response
	}
	pb.health[hc.Path] = body
	return nil
}

// groupZone is where the lab places a group's backends: its zone, or its
// region for a regional group (serverless and internet NEGs have no
// zone). Their answers name it as their zone.
func groupZone(g *plan.Group) string {
	if g.Zone == "" {
		return g.Region
	}
	return g.Zone
}

func usesTLS(proto string) bool { return proto == "HTTPS" || proto == "HTTP2" }

func sameTransport(a, b string) bool { return usesTLS(a) == usesTLS(b) }

// start binds the address and serves it in a goroutine.
func (b *backend) start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		return nil
	}
	ln, err := b.listen(ctx, b.addr)
	if err != nil {
		hint := "another process may use the port; stop it or change the named port"
		if strings.Contains(err.Error(), "assign requested address") {
			hint = "this system does not route all of 127.0.0.0/8 to loopback (Linux does); on macOS add aliases, e.g. sudo ifconfig lo0 alias " + hostOf(b.addr)
		}
		return fmt.Errorf("lab: backend %s (%s) cannot listen on %s: %w (%s)", b.instance, b.zone, b.addr, err, hint)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(b.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0), // killed connections are the point of mode 2
	}
	if b.proto == "H2C" {
		var ps http.Protocols
		ps.SetHTTP1(true)
		ps.SetUnencryptedHTTP2(true)
		srv.Protocols = &ps
	}
	if b.tlsCfg != nil {
		srv.TLSConfig = b.tlsCfg
		ln = tls.NewListener(ln, b.tlsCfg)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	b.srv, b.done = srv, done
	return nil
}

// stop closes the listener and every open connection, and waits for the
// serving goroutine.
func (b *backend) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == nil {
		return
	}
	_ = b.srv.Close()
	<-b.done
	b.srv, b.done = nil, nil
}

func (b *backend) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if body, ok := b.health[r.URL.Path]; ok && b.isProbe(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if b.failHealth.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("unhealthy (lab failure mode 1)\n"))
			return
		}
		_, _ = w.Write([]byte(body))
		return
	}
	if b.failRequests.Load() {
		b.failed.Add(1)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("failing requests (lab failure mode: requests)\n"))
		return
	}
	resp := response{Zone: b.zone, Instance: b.instance}
	if n, err := strconv.Atoi(r.URL.Query().Get("pad")); err == nil && n > 0 {
		resp.Pad = strings.Repeat("x", min(n, MaxPad))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// isProbe tells a health check from a data request on a health path. Only
// when the health path is also a data path ("/") does it matter; then the
// probe's User-Agent (GoogleHC/1.0) decides.
func (b *backend) isProbe(r *http.Request) bool {
	return r.URL.Path != "/" || strings.HasPrefix(r.UserAgent(), probe.UserAgent)
}

// Zones returns the zones that have backends, sorted.
func (bs *Backends) Zones() []string {
	seen := map[string]bool{}
	var zs []string
	for _, b := range bs.servers {
		if !seen[b.zone] {
			seen[b.zone] = true
			zs = append(zs, b.zone)
		}
	}
	sort.Strings(zs)
	return zs
}

// Addrs returns the addresses served, in config order.
func (bs *Backends) Addrs() []string {
	a := make([]string, len(bs.servers))
	for i, b := range bs.servers {
		a[i] = b.addr
	}
	return a
}

func (bs *Backends) inZone(zone string) ([]*backend, error) {
	var list []*backend
	for _, b := range bs.servers {
		if b.zone == zone {
			list = append(list, b)
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("lab: no backends in zone %q (zones: %s)", zone, strings.Join(bs.Zones(), ", "))
	}
	return list, nil
}

// FailHealth makes the health path of every backend in zone answer 503;
// the data path keeps answering (failure mode 1).
func (bs *Backends) FailHealth(zone string) error {
	list, err := bs.inZone(zone)
	if err != nil {
		return err
	}
	for _, b := range list {
		b.failHealth.Store(true)
	}
	return nil
}

// StopListeners closes the listeners of every backend in zone and their
// open connections (failure mode 2): probes and requests get "connection
// refused".
func (bs *Backends) StopListeners(zone string) error {
	list, err := bs.inZone(zone)
	if err != nil {
		return err
	}
	for _, b := range list {
		b.stop()
	}
	return nil
}

// FailRequests makes every data request to the backends in zone answer
// 503 while their health path keeps answering 200: the zone stays green
// to health checks and only passive outlier detection can remove it.
func (bs *Backends) FailRequests(zone string) error {
	list, err := bs.inZone(zone)
	if err != nil {
		return err
	}
	for _, b := range list {
		b.failRequests.Store(true)
	}
	return nil
}

// FailedRequests returns how many data requests the backends in zone have
// answered with 503 because of FailRequests, since they started.
func (bs *Backends) FailedRequests(zone string) int {
	n := int64(0)
	for _, b := range bs.servers {
		if b.zone == zone {
			n += b.failed.Load()
		}
	}
	return int(n)
}

// Recover undoes FailHealth, FailRequests and StopListeners for zone:
// health checks and requests pass again and stopped listeners bind again.
func (bs *Backends) Recover(ctx context.Context, zone string) error {
	list, err := bs.inZone(zone)
	if err != nil {
		return err
	}
	for _, b := range list {
		b.failHealth.Store(false)
		b.failRequests.Store(false)
		if err := b.start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// StopEndpoint closes the listener of the one backend at addr and its open
// connections (a single endpoint dies; its zone's other endpoints keep
// serving). StartEndpoint, or Recover of its zone, brings it back.
func (bs *Backends) StopEndpoint(addr string) error {
	b, err := bs.at(addr)
	if err != nil {
		return err
	}
	b.stop()
	return nil
}

// StartEndpoint binds the backend at addr again after StopEndpoint or
// StopListeners; it does nothing when the backend is serving.
func (bs *Backends) StartEndpoint(ctx context.Context, addr string) error {
	b, err := bs.at(addr)
	if err != nil {
		return err
	}
	return b.start(ctx)
}

// ZoneOf returns the zone of the backend at addr ("" if none serves it).
func (bs *Backends) ZoneOf(addr string) string {
	if b, err := bs.at(addr); err == nil {
		return b.zone
	}
	return ""
}

func (bs *Backends) at(addr string) (*backend, error) {
	for _, b := range bs.servers {
		if b.addr == addr {
			return b, nil
		}
	}
	return nil, fmt.Errorf("lab: no backend at %s", addr)
}

// Close stops every backend: listeners and open connections close, and
// Close returns once every serving goroutine has.
func (bs *Backends) Close() {
	for _, b := range bs.servers {
		b.stop()
	}
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
