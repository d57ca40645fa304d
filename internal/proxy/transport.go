package proxy

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// Backend connection tuning. Google's load balancer keeps backend
// connections idle for 600 s (gcp-model.md §2.15); Go's defaults (2 idle
// connections per host, 90 s) would make a busy proxy redial constantly.
const (
	backendIdleTimeout   = 600 * time.Second
	backendDialTimeout   = 5 * time.Second
	backendMaxIdlePerHst = 1024
	backendMaxIdle       = 16384
	// backendMaxHeaderBytes bounds a backend's response header block
	// (Google documents about 128 KB).
	backendMaxHeaderBytes = 128 << 10
)

// NewTransport returns the HTTP/1.1 transport for backend services with
// protocol HTTP and HTTPS: many idle connections per backend, a 600 s idle
// timeout, a 5 s dial timeout, no compression, no proxy from the
// environment. Backend certificates are not verified, as Google's load
// balancer does not verify them either.
func NewTransport() *http.Transport {
	var p http.Protocols
	p.SetHTTP1(true)
	return newTransport(&p)
}

// NewH2Transport returns the transport for backend services with protocol
// HTTP2 (h2 over TLS, ALPN) and H2C (HTTP/2 with prior knowledge over
// cleartext).
func NewH2Transport() *http.Transport {
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	t := newTransport(&p)
	// Google uses at most 100 concurrent streams per backend connection.
	t.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 100}
	return t
}

func newTransport(p *http.Protocols) *http.Transport {
	d := &net.Dialer{Timeout: backendDialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		TLSClientConfig:        &tls.Config{InsecureSkipVerify: true}, // backends are not verified, like Google's LB
		TLSHandshakeTimeout:    backendDialTimeout,
		DisableCompression:     true,
		MaxIdleConns:           backendMaxIdle,
		MaxIdleConnsPerHost:    backendMaxIdlePerHst,
		IdleConnTimeout:        backendIdleTimeout,
		MaxResponseHeaderBytes: backendMaxHeaderBytes,
		ExpectContinueTimeout:  time.Second,
		WriteBufferSize:        16 << 10,
		ReadBufferSize:         16 << 10,
		ForceAttemptHTTP2:      false,
		Protocols:              p,
	}
}
