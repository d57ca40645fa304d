package proxy

import (
	"crypto/tls"
	"net/http"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
)

// NewServerTimeouts is NewServer with the given client header and idle
// timeouts (tests use short ones).
func NewServerTimeouts(h http.Handler, tlsConfig *tls.Config, header, idle time.Duration, h2s HTTP2Server) *http.Server {
	return newServer(h, tlsConfig, header, idle, h2s)
}

// NewH1ServerTimeouts is NewH1Server with the given client header and
// idle timeouts, on the HTTP/1.1 loop and its HTTP/2 server alike.
func NewH1ServerTimeouts(h http.Handler, header, idle time.Duration, h2s HTTP2Server) *h1.Server {
	s := NewH1Server(h)
	s.ReadHeaderTimeout, s.IdleTimeout = header, idle
	s.H2C = newServer(h, nil, header, idle, h2s)
	return s
}
