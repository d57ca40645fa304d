package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"

	"github.com/spillwaylb/spillway/internal/h1"
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
// Serve cleartext listeners wrapped by h1.GuardListener, so that requests
// with ambiguous framing are answered 400 and their connection closed (as
// h1.Server does). Server errors go to
// the handler's logger when h comes from NewHandler, else to
// slog.Default(); replace ErrorLog to change that.
func NewServer(h http.Handler, tlsConfig *tls.Config) *http.Server {
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
		ReadHeaderTimeout:            clientHeaderTimeout,
		IdleTimeout:                  clientIdleTimeout,
		HTTP2:                        &http.HTTP2Config{MaxReadFrameSize: clientMaxFrameSize},
		ErrorLog:                     slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ConnContext:                  connContext,
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

// NewH1Server returns the h1.Server for a frontend: h1's limits
// (h1.NewServer), HTTP/2 connections (h2c prior knowledge, and h2 by
// ALPN when TLSConfig is set) handed to NewServer(h, nil), and
// connContext for the handler's per-connection information. Panics and
// connection errors are logged to the handler's logger when h comes from
// NewHandler, else to slog.Default().
func NewH1Server(h http.Handler) *h1.Server {
	s := h1.NewServer(h)
	if ph, ok := h.(*handler); ok {
		s.Logger = ph.log
	}
	s.H2C = NewServer(h, nil)
	s.ConnContext = connContext
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
