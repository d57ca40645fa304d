package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/serve/connlimit"
	"github.com/spillwaylb/spillway/internal/serve/handoff"
)

// HTTP/3 frontend limits: the TCP frontends' (docs/security.md), as far
// as QUIC has them.
const (
	// quicMaxStreams is the concurrent request streams a client may open
	// on one connection: the HTTP/2 frontends' SETTINGS_MAX_CONCURRENT_STREAMS.
	quicMaxStreams = 250
	// altSvcMaxAge is the ma= of the Alt-Svc header the TCP frontends
	// send: how long clients may remember the HTTP/3 endpoint (1 day).
	altSvcMaxAge = 86400
)

// quicFrontend serves a frontend's requests over HTTP/3 (quic-go) on a
// UDP socket bound to the TCP listener's address and port.
type quicFrontend struct {
	srv *http3.Server
	pc  *net.UDPConn
	tr  *quic.Transport
	// stop ends a wait for the socket (release); done is closed when
	// the listener no longer serves (or never will).
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	// hs counts the connections started and not yet accepted; filtered
	// is set once handOff put its filter on the socket.
	hs       handshakes
	filtered bool
	// altSvc is the Alt-Svc value advertising this endpoint, of length
	// and capacity 1 so that appending to it copies.
	altSvc []string
}

// quicAddr is the UDP address of a frontend whose TCP listener is bound
// to bound: the configured host (so a wildcard stays a wildcard) with
// the bound port (so port 0 gets the TCP listener's port).
func quicAddr(configured string, bound net.Addr) (string, error) {
	host, _, err := net.SplitHostPort(configured)
	if err != nil {
		return "", err
	}
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, port), nil
}

// startQUIC binds addr (UDP) and serves h over HTTP/3 on it. tlsCfg is the
// TCP frontend's (tlsreload.Frontend.ServerConfig): each handshake asks
// the same reloadable state for its certificates, SSL policy and client
// validation, with ALPN h3 and TLS 1.3 set by quic-go.
//
// Its connections count against conns with the TCP frontends'
// (--max-connections): a new QUIC connection past the limit is refused
// with CONNECTION_REFUSED when its first packet arrives, before any
// handshake work (a QUIC client has no accept queue to wait in; browsers
// fall back to TCP, which waits in the kernel's), and its slot is
// released when the connection closes or its handshake fails.
//
// The socket may be inherited from the process this one replaces
// (sockets, package handoff): it is then read only once that process
// has released it (handOff), and meanwhile new QUIC connections wait
// (their clients retransmit their first packet).
func startQUIC(log *slog.Logger, name, addr string, tlsCfg *tls.Config, h http.Handler, conns *connlimit.Limiter, sockets *handoff.Sockets) (*quicFrontend, error) {
	pc, released, err := sockets.ListenQUIC(addr)
	if err != nil {
		return nil, fmt.Errorf("frontend %s: listen on %s (UDP, for quicOverride ENABLE): %w (fix: free the UDP port, or set quicOverride: DISABLE)", name, addr, err)
	}
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	q := &quicFrontend{
		srv: &http3.Server{
			Handler:        h,
			MaxHeaderBytes: h1.MaxHeaderBytes,
			IdleTimeout:    h1.DefaultIdleTimeout,
			Logger:         log,
		},
		pc: pc, stop: make(chan struct{}), done: make(chan struct{}),
		altSvc: []string{`h3=":` + port + `"; ma=` + strconv.Itoa(altSvcMaxAge)},
	}
	q.tr = &quic.Transport{Conn: pc, ConnContext: func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
		ctx, err := conns.ConnContext(ctx)
		if err != nil {
			return nil, err
		}
		return q.hs.track(ctx), nil
	}}
	go func() {
		defer close(q.done)
		select {
		case <-released:
		case <-q.stop:
			return
		}
		q.serve(log, name, tlsCfg)
	}()
	return q, nil
}

// serve listens on the transport and serves HTTP/3 until the listener
// closes (stopListening).
func (q *quicFrontend) serve(log *slog.Logger, name string, tlsCfg *tls.Config) {
	// A process that handed the socket over removes its filter before it
	// releases it; one that died before could not.
	if err := handoff.AcceptNewQUIC(q.pc); err != nil {
		log.Warn("HTTP/3 frontend: could not clear the socket's filter", "frontend", name, "err", err)
	}
	ln, err := q.tr.ListenEarly(http3.ConfigureTLSConfig(tlsCfg), &quic.Config{
		MaxIdleTimeout:     h1.DefaultIdleTimeout,
		MaxIncomingStreams: quicMaxStreams,
		// 0-RTT requests can be replayed; a proxy cannot tell which
		// backends' requests are safe to replay.
		Allow0RTT: false,
	})
	if err != nil {
		log.Error("HTTP/3 frontend: no QUIC listener", "frontend", name, "address", q.addr(), "err", err)
		return
	}
	// http3.Server closes only the listeners it made: stopListening
	// closes this one, which ends ServeListener.
	go func() { <-q.stop; ln.Close() }()
	log.Info("frontend listening", "frontend", name, "address", q.addr(), "protocol", "HTTP/3")
	if err := q.srv.ServeListener(trackedListener{EarlyListener: ln, hs: &q.hs}); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("HTTP/3 frontend stopped", "frontend", name, "err", err)
	}
}

// addr is the bound UDP address.
func (q *quicFrontend) addr() string { return q.pc.LocalAddr().String() }

// close closes the listener and its connections at once (a reload that
// removes the frontend or disables QUIC), and releases the UDP port.
func (q *quicFrontend) close() {
	q.srv.Close()
	q.release()
}

// shutdown closes the listener and sends GOAWAY on every connection;
// requests in flight finish until ctx ends, then the rest are closed
// and the UDP port released.
// The listener closes first, so that new connections' first packets
// are dropped (their clients retransmit) rather than accepted here: in a
// binary upgrade they are the new process's once this one releases the
// socket.
func (q *quicFrontend) shutdown(ctx context.Context) {
	q.stopListening()
	q.srv.Shutdown(ctx)
	q.release()
}

// stopListening closes the listener (or ends the wait for the socket).
func (q *quicFrontend) stopListening() { q.stopOnce.Do(func() { close(q.stop) }) }

func (q *quicFrontend) release() {
	q.stopListening()
	<-q.done
	if q.filtered {
		handoff.AcceptNewQUIC(q.pc) // the filter is the socket's, which the new process reads next
	}
	q.tr.Close()
	q.pc.Close()
}

// handshakeSettle bounds how long a handover waits for the handshakes
// quic-go has started to reach the HTTP/3 server.
const handshakeSettle = time.Second

// handOff is the old process's side of a binary upgrade (package
// handoff): the kernel drops the datagrams that would start new QUIC
// connections (handoff.RefuseNewQUIC: their clients retransmit them, and
// the new process answers once it reads the socket); the handshakes
// already started reach the HTTP/3 server (for at most handshakeSettle),
// so that closing the listener refuses none; then the listener closes,
// GOAWAY goes to every connection, requests in flight finish until ctx
// ends, the connections close and the socket is released, filter removed.
func (q *quicFrontend) handOff(ctx context.Context) {
	if handoff.RefuseNewQUIC(q.pc) == nil {
		q.filtered = true
		deadline := time.Now().Add(handshakeSettle)
		for q.hs.n.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	q.shutdown(ctx)
}

// handshakes counts the QUIC connections quic-go has started and not yet
// handed to the HTTP/3 server nor ended: those a listener's close would
// refuse (CONNECTION_REFUSED).
type handshakes struct{ n atomic.Int64 }

type handshakeKey struct{}

// track counts the connection whose context is ctx until it is accepted
// or ends.
func (h *handshakes) track(ctx context.Context) context.Context {
	h.n.Add(1)
	done := new(atomic.Bool)
	context.AfterFunc(ctx, func() { h.end(done) })
	return context.WithValue(ctx, handshakeKey{}, done)
}

func (h *handshakes) end(done *atomic.Bool) {
	if done.CompareAndSwap(false, true) {
		h.n.Add(-1)
	}
}

// trackedListener ends a connection's count when the HTTP/3 server
// accepts it.
type trackedListener struct {
	*quic.EarlyListener
	hs *handshakes
}

func (l trackedListener) Accept(ctx context.Context) (*quic.Conn, error) {
	c, err := l.EarlyListener.Accept(ctx)
	if err == nil {
		if done, ok := c.Context().Value(handshakeKey{}).(*atomic.Bool); ok {
			l.hs.end(done)
		}
	}
	return c, err
}
