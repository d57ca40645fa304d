package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/h2"
	"golang.org/x/net/http2"
)

// Frontend server limits (docs/security.md): h1's, so that both
// server loops apply the same ones. h1.MaxHeaderBytes is Google's limit
// on request URL + headers; a larger block is answered 431. net/http
// enforces MaxHeaderBytes only up to its 4 KiB of read-buffer slop, so
// the handler checks the exact size (headerBlockSize) and the server's
// limit catches anything larger.
const (
	// clientIdleTimeout is Google's default HTTP keep-alive timeout
	// towards clients.
	clientIdleTimeout = h1.DefaultIdleTimeout
	// clientHeaderTimeout bounds slow clients sending their headers.
	clientHeaderTimeout = h1.DefaultReadHeaderTimeout
	// clientMaxFrameSize is the SETTINGS_MAX_FRAME_SIZE the HTTP/2
	// frontends advertise and enforce: the protocol's default and
	// minimum (RFC 9113 §4.2, §6.5.2). A connection keeps a read buffer
	// as large as the largest frame it has received; net/http's default,
	// 1 MiB, let one frame pin 1 MiB per connection.
	clientMaxFrameSize = 16 << 10
)

// connKey is the context key of a connection's connInfo.
type connKey struct{}

// connInfo is what the handler needs about a client connection, computed
// once per connection.
type connInfo struct {
	localIP string // the address the connection arrived on (the "LB IP")
}

// connContext records the local address of each accepted connection, and
// the connection itself when it comes from h1.GuardListener. Both server
// loops call it once per connection (http.Server.ConnContext,
// h1.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	return h1.GuardContext(context.WithValue(ctx, connKey{}, &connInfo{localIP: hostOnly(c.LocalAddr().String())}), c)
}

// localIP returns the IP the request arrived on: from connContext's
// per-connection info, else from net/http's LocalAddrContextKey.
func localIP(r *http.Request) string {
	ctx := r.Context()
	if ci, ok := ctx.Value(connKey{}).(*connInfo); ok {
		return ci.localIP
	}
	if a, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
		return hostOnly(a.String())
	}
	return ""
}

// NewServer returns the *http.Server for a frontend. It speaks HTTP/1.1
// and HTTP/2: with tlsConfig nil, HTTP/2 is cleartext with prior knowledge
// (h2c); with tlsConfig set, ALPN offers h2 and http/1.1 (serve with
// ServeTLS(ln, "", "") or Serve on a TLS listener built from
// srv.TLSConfig). The request line plus headers may total 60 KiB (more is
// answered 431), headers must arrive within 30 s, idle client
// connections are kept 610 s, and HTTP/2 frames are at most 16 KiB.
// HTTP/2 is served by golang.org/x/net/http2 behind h1.WatchH2: a
// connection's first header block must arrive within 30 s of accept
// (TLS: of the handshake's end) and every header block within 30 s of
// its HEADERS frame, else the connection is closed; between streams the
// 610 s idle timeout applies (x/net copies IdleTimeout here: change it
// only through NewServer). Serve cleartext listeners wrapped by
// h1.GuardListener, so that requests with ambiguous framing are answered
// 400 and their connection closed (as h1.Server does). Server errors go
// to the handler's logger when h comes from NewHandler, else to
// slog.Default(); replace ErrorLog to change that.
func NewServer(h http.Handler, tlsConfig *tls.Config) *http.Server {
	return newServer(h, tlsConfig, clientHeaderTimeout, clientIdleTimeout, H2NetHTTP)
}

// HTTP2Server names the server loop of a frontend's HTTP/2 connections
// (spillway.http2Server).
type HTTP2Server string

// The HTTP/2 server loops.
const (
	// H2NetHTTP is golang.org/x/net/http2's server.
	H2NetHTTP HTTP2Server = "NET_HTTP"
	// H2Spillway is internal/h2's server loop.
	H2Spillway HTTP2Server = "SPILLWAY"
)

// NewServerHTTP2 is NewServer with HTTP/2 served by the loop h2s.
func NewServerHTTP2(h http.Handler, tlsConfig *tls.Config, h2s HTTP2Server) *http.Server {
	return newServer(h, tlsConfig, clientHeaderTimeout, clientIdleTimeout, h2s)
}

// newServer is NewServer with the given header and idle timeouts and
// HTTP/2 loop.
func newServer(h http.Handler, tlsConfig *tls.Config, headerTimeout, idleTimeout time.Duration, h2s HTTP2Server) *http.Server {
	logger := slog.Default()
	if ph, ok := h.(*handler); ok {
		logger = ph.log
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	srv := &http.Server{
		// guardFraming refuses ambiguous framing on h1.GuardListener's
		// connections, and answers "OPTIONS *" in net/http's place so
		// that those requests are checked too.
		Handler:                      guardFraming(h),
		DisableGeneralOptionsHandler: true,
		Protocols:                    &p,
		MaxHeaderBytes:               h1.MaxHeaderBytes,
		ReadHeaderTimeout:            headerTimeout,
		IdleTimeout:                  idleTimeout,
		HTTP2:                        &http.HTTP2Config{MaxReadFrameSize: clientMaxFrameSize},
		ErrorLog:                     slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ConnContext:                  connContext,
	}
	if h2s == H2Spillway {
		configureSpillwayH2(srv, logger)
	} else {
		configureH2(srv)
	}
	if tlsConfig == nil {
		p.SetUnencryptedHTTP2(true)
		return srv
	}
	c := tlsConfig.Clone()
	if len(c.NextProtos) == 0 {
		c.NextProtos = []string{"h2", "http/1.1"}
	} else if !slices.Contains(c.NextProtos, "h2") {
		c.NextProtos = append([]string{"h2"}, c.NextProtos...)
	}
	srv.TLSConfig = c
	return srv
}

// configureH2 makes srv serve HTTP/2 with golang.org/x/net/http2 rather
// than net/http's bundled copy of it, so that each connection can be
// wrapped by h1.WatchH2 (the header timeouts) before it is served:
// net/http hands h2 connections (ALPN) and h2c ones (prior knowledge,
// under the "unencrypted_http2" key, preface already read) to
// TLSNextProto, and a wrapped *tls.Conn would not be recognized as TLS
// by net/http itself. ConfigureServer registers the GOAWAY on Shutdown;
// srv.HTTP2's settings apply as with the bundled server. It must run
// before srv.TLSConfig is set: it refuses a TLS config whose cipher
// suites lack the ones HTTP/2 requires, and leaves TLS alone otherwise.
func configureH2(srv *http.Server) {
	h2s := &http2.Server{}
	if err := http2.ConfigureServer(srv, h2s); err != nil {
		// Unreachable: srv has no TLSConfig yet.
		panic(fmt.Errorf("proxy: configuring HTTP/2: %w", err))
	}
	srv.TLSConfig = nil
	serve := func(hs *http.Server, c net.Conn, h http.Handler, sawPreface bool) {
		// net/http passes the connection's base context (from
		// ConnContext) through the handler, as to x/net's own hook.
		var ctx context.Context
		if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
			ctx = bc.BaseContext()
		}
		w := h1.WatchH2(c, h2HeaderTimeout(hs), sawPreface)
		defer w.Close()
		h2s.ServeConn(w, &http2.ServeConnOpts{Context: ctx, BaseConfig: hs, Handler: h, SawClientPreface: sawPreface})
	}
	srv.TLSNextProto[http2.NextProtoTLS] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		serve(hs, c, h, false)
	}
	srv.TLSNextProto["unencrypted_http2"] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		// c stands in for the cleartext connection, which it carries.
		if u, ok := c.NetConn().(interface{ UnencryptedNetConn() net.Conn }); ok {
			serve(hs, u.UnencryptedNetConn(), h, true)
		}
		// Else nothing to serve: net/http closes the connection.
	}
}

// configureSpillwayH2 is configureH2 with internal/h2's server loop in
// place of x/net's: the same hand-off hooks and header-timeout watch,
// the same frame size limit; Shutdown sends GOAWAY through
// RegisterOnShutdown and waits for the connections as net/http does for
// any connection handed to TLSNextProto.
func configureSpillwayH2(srv *http.Server, logger *slog.Logger) {
	h2s := &h2.Server{MaxReadFrameSize: clientMaxFrameSize, Logger: logger}
	srv.RegisterOnShutdown(h2s.Shutdown)
	serve := func(hs *http.Server, c net.Conn, h http.Handler, sawPreface bool) {
		var ctx context.Context
		if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
			ctx = bc.BaseContext()
		}
		serveSpillwayH2(ctx, h2s, hs, c, h, sawPreface)
	}
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		http2.NextProtoTLS: func(hs *http.Server, c *tls.Conn, h http.Handler) {
			serve(hs, c, h, false)
		},
		"unencrypted_http2": func(hs *http.Server, c *tls.Conn, h http.Handler) {
			if u, ok := c.NetConn().(interface{ UnencryptedNetConn() net.Conn }); ok {
				serve(hs, u.UnencryptedNetConn(), h, true)
			}
		},
	}
}

// serveSpillwayH2 serves the HTTP/2 connection c on h2s behind the
// header-timeout watch, with hs's limits and timeouts.
func serveSpillwayH2(ctx context.Context, h2s *h2.Server, hs *http.Server, c net.Conn, h http.Handler, sawPreface bool) {
	w := h1.WatchH2(c, h2HeaderTimeout(hs), sawPreface)
	defer w.Close()
	h2s.ServeConn(w, h2.ServeConnOpts{Context: ctx, BaseConfig: hs, Handler: h, SawPreface: sawPreface})
}

// h2HeaderTimeout is hs's header timeout, as net/http reads it.
func h2HeaderTimeout(hs *http.Server) time.Duration {
	if hs.ReadHeaderTimeout != 0 {
		return hs.ReadHeaderTimeout
	}
	return hs.ReadTimeout
}

// NewH1Server returns the h1.Server for a frontend: h1's limits
// (h1.NewServer), HTTP/2 connections (h2c prior knowledge, and h2 by
// ALPN when TLSConfig is set) handed to NewServer(h, nil) with their
// header timeout running from accept (TLS: from the handshake's end), and
// connContext for the handler's per-connection information. Panics and
// connection errors are logged to the handler's logger when h comes from
// NewHandler, else to slog.Default().
func NewH1Server(h http.Handler) *h1.Server {
	return NewH1ServerHTTP2(h, H2NetHTTP)
}

// NewH1ServerHTTP2 is NewH1Server with HTTP/2 served by the loop h2s.
// Spillway's loop (H2Spillway) serves the HTTP/2 connections straight
// from the HTTP/1.1 loop's goroutine (h1.Server.ServeH2), x/net's behind
// a net/http server (h1.Server.H2C), which keeps its per-connection
// state (about 10 KB) for the life of each one.
func NewH1ServerHTTP2(h http.Handler, h2s HTTP2Server) *h1.Server {
	s := h1.NewServer(h)
	if ph, ok := h.(*handler); ok {
		s.Logger = ph.log
	}
	s.ConnContext = connContext
	hs := NewServerHTTP2(h, nil, h2s)
	if h2s != H2Spillway {
		s.H2C = hs
		return s
	}
	// hs is the connections' configuration (limits, timeouts, the
	// http.ServerContextKey value) and its Handler the one net/http's
	// hand-off would call.
	srv := &h2.Server{MaxReadFrameSize: clientMaxFrameSize, Logger: s.Logger}
	s.ShutdownH2 = srv.Shutdown
	s.ServeH2 = func(ctx context.Context, c net.Conn) {
		serveSpillwayH2(ctx, srv, hs, c, hs.Handler, false)
	}
	return s
}

// guardFraming wraps NewServer's handler: an HTTP/1 request on an
// h1.GuardListener connection whose head had ambiguous framing is
// answered 400 and the connection closed (h1.CheckGuard). It also
// answers "OPTIONS *" as net/http's general OPTIONS handler does
// (NewServer turns that off so that every request reaches this check).
func guardFraming(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h1.CheckGuard(r); err != nil {
			w.Header().Set("Connection", "close")
			lbError(w, http.StatusBadRequest, sdBadFraming, err.Error())
			return
		}
		if r.Method == http.MethodOptions && r.RequestURI == "*" {
			w.Header().Set("Content-Length", "0")
			if r.ContentLength != 0 {
				io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 4<<10))
			}
			return
		}
		h.ServeHTTP(w, r)
	})
}

// headerBlockSize returns the size of a request's request line and header
// block as HTTP/1.1 would send them ("Name: value\r\n" per value).
func headerBlockSize(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	n += len("Host: ") + len(r.Host) + 2
	for k, vv := range r.Header {
		for _, v := range vv {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n + 2
}
