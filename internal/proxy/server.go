package proxy

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"
)

// Frontend server limits (gcp-model.md §2.13, §2.15).
const (
	// maxHeaderBlock is Google's limit on request URL + headers; a larger
	// block is answered 431. net/http enforces MaxHeaderBytes only up to
	// its 4 KiB of read-buffer slop, so the handler checks the exact size
	// (headerBlockSize) and the server's limit catches anything larger.
	maxHeaderBlock = 60 << 10
	// clientIdleTimeout is Google's default HTTP keep-alive timeout
	// towards clients.
	clientIdleTimeout = 610 * time.Second
	// clientHeaderTimeout bounds slow clients sending their headers.
	clientHeaderTimeout = 30 * time.Second
)

// connKey is the context key of a connection's connInfo.
type connKey struct{}

// connInfo is what the handler needs about a client connection, computed
// once per connection.
type connInfo struct {
	localIP string // the address the connection arrived on (the "LB IP")
}

// connContext records the local address of each accepted connection, and
// the connection itself when it comes from GuardListener.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return withGuard(context.WithValue(ctx, connKey{}, &connInfo{localIP: hostOnly(c.LocalAddr().String())}), c)
}

// localIP returns the IP the request arrived on: from NewServer's
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
// answered 431), headers must arrive within 30 s, and idle client
// connections are kept 610 s. Serve cleartext listeners wrapped by
// GuardListener, so that requests with ambiguous framing are answered
// 400 and their connection closed (as H1Server does). Server errors go to
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
		// guardFraming refuses ambiguous framing on GuardListener's
		// connections, and answers "OPTIONS *" in net/http's place so
		// that those requests are checked too.
		Handler:                      guardFraming(h),
		DisableGeneralOptionsHandler: true,
		Protocols:                    &p,
		MaxHeaderBytes:               maxHeaderBlock,
		ReadHeaderTimeout:            clientHeaderTimeout,
		IdleTimeout:                  clientIdleTimeout,
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
