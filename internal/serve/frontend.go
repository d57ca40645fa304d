package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/serve/connlimit"
	"github.com/spillwaylb/spillway/internal/serve/handoff"
	"github.com/spillwaylb/spillway/internal/serve/managedcert"
	"github.com/spillwaylb/spillway/internal/serve/tlsreload"
)

// frontends is the HTTP(S) frontends component: one listener and server
// loop per frontend, all under one connection limit. Start binds the
// first plan's frontends, sync applies a reload's (keeping the listeners
// and open connections of frontends that stay), Stop shuts them down.
type frontends struct {
	log   *slog.Logger
	conns *connlimit.Limiter // Options.MaxConnections; nil for no limit
	// handlers returns the handler factory for plan p's frontends.
	handlers func(p *plan.Plan) func(*plan.Frontend) http.Handler
	// plan is the plan Start serves.
	plan func() *plan.Plan
	// sockets are inherited listeners (Options.Sockets).
	sockets *handoff.Sockets
	// acme obtains the MANAGED certificates (managed.go).
	acme *managedcert.Manager

	mu sync.Mutex // guards m
	m  map[string]*frontend
	// detached are the HTTP/3 listeners a binary upgrade took out
	// (DetachQUIC) while they finish; Stop waits for them.
	detached sync.WaitGroup
}

type frontend struct {
	// inflight counts the requests being served (spillway_requests_in_flight).
	inflight atomic.Int64
	cfg      *plan.Frontend
	handler  atomic.Pointer[http.Handler]
	tls      *tlsreload.Frontend // HTTPS only
	srv      frontendServer
	ln       net.Listener
	done     chan struct{}
	// h3 is the handler of the HTTP/3 listener: the TCP one's, without
	// Alt-Svc.
	h3 http.Handler
	// quic serves HTTP/3 (quicOverride ENABLE), nil when off; altSvc
	// is its Alt-Svc value, which the TCP frontend's responses carry.
	quic   *quicFrontend
	altSvc atomic.Pointer[[]string]
}

// frontendServer is what serves a frontend's listener: *h1.Server
// (the default, HTTP and HTTPS) or *http.Server (spillway.http1Server
// NET_HTTP).
type frontendServer interface {
	Shutdown(ctx context.Context) error
	Close() error
}

// Start binds and serves the frontends of the plan in force.
func (fs *frontends) Start(context.Context) error {
	p := fs.plan()
	tlsStates, err := fs.loadTLS(p)
	if err != nil {
		return err
	}
	if err := fs.sync(p, nil, tlsStates); err != nil {
		fs.Stop(context.Background())
		return err
	}
	return nil
}

// Stop shuts every frontend down, letting requests in flight finish
// until ctx ends.
func (fs *frontends) Stop(ctx context.Context) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for name, f := range fs.m {
		var wg sync.WaitGroup
		wg.Go(func() { f.stopQUIC(ctx) })
		f.srv.Shutdown(ctx)
		<-f.done
		wg.Wait()
		delete(fs.m, name)
	}
	fs.detached.Wait()
	fs.acme.Stop()
	return nil
}

// detachQUIC takes every HTTP/3 listener out of its frontend (TCP
// responses stop advertising it) and hands them off (quicFrontend.handOff)
// in parallel until ctx ends: no new connection, GOAWAY on every one,
// requests in flight finish, then the connections close and the UDP
// sockets are released. The channel is closed once all are.
func (fs *frontends) detachQUIC(ctx context.Context) <-chan struct{} {
	fs.mu.Lock()
	var qs []*quicFrontend
	for _, f := range fs.m {
		if q := f.takeQUIC(); q != nil {
			qs = append(qs, q)
		}
	}
	fs.mu.Unlock()
	var wg sync.WaitGroup
	for _, q := range qs {
		fs.detached.Add(1)
		wg.Go(func() {
			defer fs.detached.Done()
			q.handOff(ctx)
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// addr returns the bound address of a frontend ("" if unknown).
func (fs *frontends) addr(name string) string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[name]; f != nil && f.ln != nil {
		return f.ln.Addr().String()
	}
	return ""
}

// files returns duplicates of every frontend's listening socket, and of
// the UDP sockets of their HTTP/3 listeners.
func (fs *frontends) files() ([]*os.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []*os.File
	for _, f := range fs.m {
		socks := []any{f.ln}
		if f.quic != nil {
			socks = append(socks, f.quic.pc)
		}
		for _, x := range socks {
			fl, err := handoff.File(x)
			if err != nil {
				return out, err
			}
			out = append(out, fl)
		}
	}
	return out, nil
}

// each calls fn for every running frontend, under the lock.
func (fs *frontends) each(fn func(name string, f *frontend)) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for name, f := range fs.m {
		fn(name, f)
	}
}

// sync starts listeners for new frontends, stops removed ones and swaps
// the handler and TLS settings of every kept one, so open connections
// survive a reload. tlsStates has the loaded TLS of every HTTPS frontend
// of p and the ACME settings of its MANAGED certificates.
func (fs *frontends) sync(p *plan.Plan, prebound map[string]net.Listener, tlsStates *frontendTLS) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	defer closeListeners(prebound) // the ones not taken below
	want := map[string]*plan.Frontend{}
	for _, f := range p.Frontends {
		if f.Protocol == "HTTP" || f.Protocol == "HTTPS" {
			want[f.Name] = f
		}
	}
	for name, f := range fs.m {
		nf, ok := want[name]
		if !ok || !sameListener(f.cfg, nf) {
			f.closeQUIC()
			f.srv.Close()
			<-f.done
			delete(fs.m, name)
		}
	}
	var errs []error
	handler := fs.handlers(p)
	for name, pf := range want {
		h := handler(pf)
		if f := fs.m[name]; f != nil {
			f.cfg = pf
			f.handler.Store(&h)
			if f.tls != nil {
				f.tls.Set(tlsStates.states[name])
			}
			if err := fs.syncQUIC(f, pf); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		ln := prebound[name]
		delete(prebound, name)
		f, err := fs.start(pf, h, serverLoops(p), ln, tlsStates.states[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fs.m[name] = f
	}
	if err := fs.applyACME(p, tlsStates); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// prepare binds a reload's frontends on new addresses before anything is
// swapped, so a port in use rejects the reload while the old config
// keeps serving. (A frontend that changes protocol on the same address
// is re-bound during the swap, after its old listener closes.)
func (fs *frontends) prepare(p *plan.Plan) (map[string]net.Listener, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	inUse := map[string]bool{}
	for _, f := range fs.m {
		inUse[f.cfg.Address] = true
	}
	lns := map[string]net.Listener{}
	for _, pf := range p.Frontends {
		if pf.Protocol != "HTTP" && pf.Protocol != "HTTPS" {
			continue
		}
		if old := fs.m[pf.Name]; old != nil && sameListener(old.cfg, pf) {
			continue
		}
		if inUse[pf.Address] {
			continue
		}
		ln, err := fs.listen(pf)
		if err != nil {
			closeListeners(lns)
			return nil, err
		}
		lns[pf.Name] = ln
	}
	return lns, nil
}

func (fs *frontends) listen(pf *plan.Frontend) (net.Listener, error) {
	ln, err := fs.sockets.ListenTCP(pf.Address)
	if err != nil {
		return nil, fmt.Errorf("frontend %s: listen on %s: %w (fix: free the port or change frontends[].address)", pf.Name, pf.Address, err)
	}
	return ln, nil
}

func closeListeners(lns map[string]net.Listener) {
	for name, ln := range lns {
		ln.Close()
		delete(lns, name)
	}
}

// sameListener reports whether a reload keeps a frontend's listener: the
// same address and protocol. Certificates and TLS policies change in
// place (tlsreload.Frontend).
func sameListener(a, b *plan.Frontend) bool {
	return a.Address == b.Address && a.Protocol == b.Protocol
}

// loops are the server loops of the frontends.
type loops struct {
	h1   bool              // h1.Server (spillway.http1Server SPILLWAY, the default), not net/http
	h2   proxy.HTTP2Server // spillway.http2Server (SPILLWAY, the default, or NET_HTTP)
	park bool              // spillway.parkIdleConnections (default true)
}

// serverLoops returns the server loops p's frontends use.
func serverLoops(p *plan.Plan) loops {
	t := p.Config.Spillway
	l := loops{h1: true, h2: proxy.H2Spillway, park: true}
	if t != nil {
		l.h1 = t.HTTP1Server != "NET_HTTP"
		if t.HTTP2Server == "NET_HTTP" {
			l.h2 = proxy.H2NetHTTP
		}
		l.park = t.ParkIdleConnections == nil || *t.ParkIdleConnections
	}
	return l
}

// start serves pf on ln, or on a new listener when ln is nil; st is its
// loaded TLS (HTTPS only).
func (fs *frontends) start(pf *plan.Frontend, h http.Handler, lp loops, ln net.Listener, st *tlsreload.State) (*frontend, error) {
	f := &frontend{cfg: pf, done: make(chan struct{})}
	f.handler.Store(&h)
	var tlsCfg *tls.Config
	if pf.Protocol == "HTTPS" {
		if st == nil {
			if ln != nil {
				ln.Close()
			}
			return nil, fmt.Errorf("frontend %s: TLS settings not loaded", pf.Name)
		}
		f.tls = tlsreload.NewFrontend(st)
		tlsCfg = f.tls.ServerConfig()
	}
	if ln == nil {
		var err error
		if ln, err = fs.listen(pf); err != nil {
			return nil, err
		}
	}
	f.ln = ln
	fh := fs.frontHandler(f)
	if err := fs.syncQUIC(f, pf); err != nil {
		ln.Close()
		return nil, err
	}
	serveFn := fs.server(f, fh, lp, tlsCfg)
	go func() {
		defer close(f.done)
		err := serveFn()
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			fs.log.Error("frontend stopped", "frontend", pf.Name, "err", err)
		}
	}()
	fs.log.Info("frontend listening", "frontend", pf.Name, "address", ln.Addr().String(), "protocol", pf.Protocol)
	return f, nil
}

// server sets f's server loop, serving h on f.ln, and returns the
// function that runs it.
func (fs *frontends) server(f *frontend, h http.Handler, lp loops, tlsCfg *tls.Config) func() error {
	ln := fs.conns.Wrap(f.ln)
	switch {
	case lp.h1:
		srv := proxy.NewH1ServerHTTP2(h, lp.h2)
		srv.Logger = fs.log
		srv.TLSConfig = tlsCfg
		if !lp.park {
			srv.ParkAfter = 0
		}
		f.srv = srv
		return func() error { return srv.Serve(ln) }
	case tlsCfg != nil:
		srv := proxy.NewServerHTTP2(h, tlsCfg, lp.h2)
		f.srv = srv
		return func() error { return srv.ServeTLS(ln, "", "") }
	default:
		srv := proxy.NewServerHTTP2(h, nil, lp.h2)
		f.srv = srv
		return func() error { return srv.Serve(h1.GuardListener(ln)) }
	}
}

// frontHandler returns the handler of f's TCP listener and sets f.h3,
// its HTTP/3 listener's: both count requests in flight and call the
// handler in force. On HTTP, HTTP-01 validations of MANAGED certificates
// are answered first; on HTTPS, responses carry Alt-Svc while HTTP/3 is
// served.
func (fs *frontends) frontHandler(f *frontend) http.HandlerFunc {
	h3 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.inflight.Add(1)
		defer f.inflight.Add(-1)
		(*f.handler.Load()).ServeHTTP(w, r)
	})
	f.h3 = h3
	if f.cfg.Protocol == "HTTP" {
		return func(w http.ResponseWriter, r *http.Request) {
			f.inflight.Add(1)
			defer f.inflight.Add(-1)
			if !fs.acme.ServeChallenge(w, r) {
				(*f.handler.Load()).ServeHTTP(w, r)
			}
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if v := f.altSvc.Load(); v != nil {
			w.Header()["Alt-Svc"] = *v
		}
		h3(w, r)
	}
}

// syncQUIC starts or stops f's HTTP/3 listener as pf (f's config, new or
// reloaded) asks: a reload that keeps quicOverride ENABLE keeps the
// listener and its connections; one that turns it off closes them.
func (fs *frontends) syncQUIC(f *frontend, pf *plan.Frontend) error {
	want := pf.Config.QUIC() && f.tls != nil
	switch {
	case want && f.quic == nil:
		addr, err := quicAddr(pf.Address, f.ln.Addr())
		if err != nil {
			return fmt.Errorf("frontend %s: UDP address: %w", pf.Name, err)
		}
		q, err := startQUIC(fs.log, pf.Name, addr, f.tls.ServerConfig(), f.h3, fs.conns, fs.sockets)
		if err != nil {
			return err
		}
		f.quic = q
		f.altSvc.Store(&q.altSvc)
	case !want && f.quic != nil:
		f.closeQUIC()
	}
	return nil
}

// stopQUIC stops f's HTTP/3 listener, if any, gracefully until ctx
// ends. Alt-Svc stops first.
func (f *frontend) stopQUIC(ctx context.Context) {
	if q := f.takeQUIC(); q != nil {
		q.shutdown(ctx)
	}
}

// closeQUIC closes f's HTTP/3 listener, if any, and its connections at
// once. Alt-Svc stops first.
func (f *frontend) closeQUIC() {
	if q := f.takeQUIC(); q != nil {
		q.close()
	}
}

// takeQUIC stops advertising f's HTTP/3 listener and returns it.
func (f *frontend) takeQUIC() *quicFrontend {
	q := f.quic
	f.altSvc.Store(nil)
	f.quic = nil
	return q
}

// quicAddr returns the bound UDP address of a frontend's HTTP/3 listener
// ("" if none).
func (fs *frontends) quicAddr(name string) string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[name]; f != nil && f.quic != nil {
		return f.quic.addr()
	}
	return ""
}
