package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
// environment, response heads capped at 128 KiB and no wait for 100
// Continue. Backend certificates are not verified, as Google's load
// balancer does not verify them either. Its connections (cleartext, and
// TLS ones it dials itself) are sniffConns, so that NewFastTransport can
// strip what a response's Connection header lists even when net/http
// deleted that header.
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
	dial := d.DialContext
	if !p.HTTP2() && !p.UnencryptedHTTP2() {
		// HTTP/1.1 connections keep their responses' Connection header
		// for NewFastTransport (sniffConn); TLS ones are wrapped above
		// TLS, so the transport's own TLS dialing is not used.
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &sniffConn{Conn: c}, nil
		}
	}
	t := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        &tls.Config{InsecureSkipVerify: true}, // backends are not verified, like Google's LB
		TLSHandshakeTimeout:    backendDialTimeout,
		DisableCompression:     true,
		MaxIdleConns:           backendMaxIdle,
		MaxIdleConnsPerHost:    backendMaxIdlePerHst,
		IdleConnTimeout:        backendIdleTimeout,
		MaxResponseHeaderBytes: backendMaxHeaderBytes,
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
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: host, NextProtos: []string{"http/1.1"}}) // backends are not verified
			hctx, cancel := context.WithTimeout(ctx, backendDialTimeout)
			defer cancel()
			if err := tc.HandshakeContext(hctx); err != nil {
				c.Close()
				return nil, err
			}
			return &sniffConn{Conn: tc}, nil
		}
	}
	return t
}

// sniffConn is an HTTP/1.1 backend connection of a net/http Transport
// that keeps a copy of the head of the response it is armed for (arm, in
// a GotConn trace hook), so that the response's Connection header can be
// read even after http.ReadResponse deleted it. The copy stops at the
// first final (non-1xx) head, or at backendMaxHeaderBytes (where the
// Transport gives up on the response anyway). Unarmed, Read costs one
// atomic load.
type sniffConn struct {
	net.Conn
	armed atomic.Bool
	mu    sync.Mutex
	buf   []byte   // the heads read since arm, 1xx ones dropped
	conn  []string // the final head's Connection values
	done  bool     // the final head is complete
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.armed.Load() {
		c.capture(p[:n])
	}
	return n, err
}

// arm starts a copy of the next response head.
func (c *sniffConn) arm() {
	c.mu.Lock()
	c.buf = c.buf[:0]
	if cap(c.buf) > 16<<10 {
		c.buf = nil // do not keep a large head's buffer on an idle connection
	}
	c.conn, c.done = nil, false
	c.mu.Unlock()
	c.armed.Store(true)
}

func (c *sniffConn) capture(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	if room := backendMaxHeaderBytes - len(c.buf); len(b) > room {
		b = b[:room]
	}
	c.buf = append(c.buf, b...)
	for {
		n := headLen(c.buf, 0)
		if n == 0 {
			if len(c.buf) >= backendMaxHeaderBytes {
				c.stopLocked()
			}
			return
		}
		head := c.buf[:n]
		if len(head) >= 12 && head[9] == '1' && string(head[9:12]) != "101" {
			// A 1xx informational head: the final one follows.
			c.buf = append(c.buf[:0], c.buf[n:]...)
			continue
		}
		c.conn = connectionValues(head)
		c.stopLocked()
		return
	}
}

func (c *sniffConn) stopLocked() {
	c.done = true
	c.buf = c.buf[:0]
	c.armed.Store(false)
}

// connection returns the Connection values of the response head copied
// since arm, nil when there were none or the head is not complete.
func (c *sniffConn) connection() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		return nil
	}
	return c.conn
}
