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

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/serve/connlimit"
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
	srv  *http3.Server
	pc   net.PacketConn
	tr   *quic.Transport
	ln   *quic.EarlyListener
	done chan struct{}
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
func startQUIC(log *slog.Logger, name, addr string, tlsCfg *tls.Config, h http.Handler, conns *connlimit.Limiter) (*quicFrontend, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("frontend %s: listen on %s (UDP, for quicOverride ENABLE): %w (fix: free the UDP port, or set quicOverride: DISABLE)", name, addr, err)
	}
	tr := &quic.Transport{Conn: pc, ConnContext: func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
		return conns.ConnContext(ctx)
	}}
	qcfg := &quic.Config{
		MaxIdleTimeout:     h1.DefaultIdleTimeout,
		MaxIncomingStreams: quicMaxStreams,
		// 0-RTT requests can be replayed; a proxy cannot tell which
		// backends' requests are safe to replay.
		Allow0RTT: false,
	}
	ln, err := tr.ListenEarly(http3.ConfigureTLSConfig(tlsCfg), qcfg)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("frontend %s: QUIC listener on %s: %w", name, addr, err)
	}
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	q := &quicFrontend{
		srv: &http3.Server{
			Handler:        h,
			MaxHeaderBytes: h1.MaxHeaderBytes,
			IdleTimeout:    h1.DefaultIdleTimeout,
			Logger:         log,
		},
		pc: pc, tr: tr, ln: ln, done: make(chan struct{}),
		altSvc: []string{`h3=":` + port + `"; ma=` + strconv.Itoa(altSvcMaxAge)},
	}
	go func() {
		defer close(q.done)
		if err := q.srv.ServeListener(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP/3 frontend stopped", "frontend", name, "err", err)
		}
	}()
	log.Info("frontend listening", "frontend", name, "address", pc.LocalAddr().String(), "protocol", "HTTP/3")
	return q, nil
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
func (q *quicFrontend) shutdown(ctx context.Context) {
	q.srv.Shutdown(ctx)
	q.release()
}

func (q *quicFrontend) release() {
	q.ln.Close()
	<-q.done
	q.tr.Close()
	q.pc.Close()
}
