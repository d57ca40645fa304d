package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
)

// Backend connection tuning. Google's load balancer keeps backend
// connections idle for 600 s (docs/security.md, "Summary of limits and
// timeouts"); Go's defaults (2 idle connections per host, 90 s) would make
// a busy proxy redial constantly.
// The per-backend limits are h1's, shared with its Transport
// (h1.BackendIdleTimeout, h1.BackendDialTimeout, h1.MaxIdleConnsPerHost,
// h1.MaxResponseHeaderBytes).
const backendMaxIdle = 16384

// NewTransport returns the HTTP/1.1 transport for backend services with
// protocol HTTP and HTTPS: many idle connections per backend, a 600 s idle
// timeout, a 5 s dial timeout, no compression, no proxy from the
// environment, response heads capped at 128 KiB and no wait for 100
// Continue. Backend certificates are not verified, as Google's load
// balancer does not verify them either. Its connections (cleartext, and
// TLS ones it dials itself) are h1.SniffConns, so that an h1.Transport
// with it as fallback can strip what a response's Connection header
// lists even when net/http deleted that header.
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

// newNamedTransport returns a transport whose TLS connections send name
// as the server name (SNI) instead of the dialled address: the transport
// of endpoints resolved from a DNS name (INTERNET_FQDN_PORT, serverless
// base URLs). One per name keeps connections opened for one name from
// serving another on the same address.
func newNamedTransport(name string, h2 bool) *http.Transport {
	var p http.Protocols
	if h2 {
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	t := newTransportSNI(&p, name)
	if h2 {
		t.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 100}
	}
	return t
}

func newTransport(p *http.Protocols) *http.Transport { return newTransportSNI(p, "") }

// newTransportSNI is newTransport sending sni as the TLS server name
// ("" for the dialled address's host).
func newTransportSNI(p *http.Protocols, sni string) *http.Transport {
	d := &net.Dialer{Timeout: h1.BackendDialTimeout, KeepAlive: 30 * time.Second}
	dial := d.DialContext
	if !p.HTTP2() && !p.UnencryptedHTTP2() {
		// HTTP/1.1 connections keep their responses' Connection header
		// for h1.Transport (h1.SniffConn); TLS ones are wrapped above
		// TLS, so the transport's own TLS dialing is not used.
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return h1.SniffConn(c), nil
		}
	}
	t := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        &tls.Config{InsecureSkipVerify: true, ServerName: sni}, // backends are not verified, like Google's LB
		TLSHandshakeTimeout:    h1.BackendDialTimeout,
		DisableCompression:     true,
		MaxIdleConns:           backendMaxIdle,
		MaxIdleConnsPerHost:    h1.MaxIdleConnsPerHost,
		IdleConnTimeout:        h1.BackendIdleTimeout,
		MaxResponseHeaderBytes: h1.MaxResponseHeaderBytes,
		// Expect is not forwarded (the proxy answers 100 Continue itself);
		// should a header action add it, the body is sent at once rather
		// than after a one-second wait for a 100 that may never come.
		ExpectContinueTimeout: 0,
		WriteBufferSize:       16 << 10,
		ReadBufferSize:        16 << 10,
		ForceAttemptHTTP2:     false,
		Protocols:             p,
	}
	if !p.HTTP2() && !p.UnencryptedHTTP2() {
		t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			host, _, _ := net.SplitHostPort(addr)
			if sni != "" {
				host = sni
			}
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: host, NextProtos: []string{"http/1.1"}}) // backends are not verified
			hctx, cancel := context.WithTimeout(ctx, h1.BackendDialTimeout)
			defer cancel()
			if err := tc.HandshakeContext(hctx); err != nil {
				c.Close()
				return nil, err
			}
			return h1.SniffConn(tc), nil
		}
	}
	return t
}
