package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
)

// Upgrades (WebSocket) through a regional layer. Go's HTTP/2 client has
// no extended CONNECT (RFC 8441), so an upgrade cannot be a stream on the
// pooled HTTP/2 connections: the edge sends it to the regional endpoint
// as an HTTP/1.1 request over a connection of its own (TLS with the
// pool's settings, ALPN http/1.1), with the same internal headers, and
// the connection becomes the tunnel once the regional layer answers 101.
// The regional layer relays the upgrade to the endpoint it picks in its
// region, as for any request. Upgrades are never retried.

// layerUpgrades is a pool's transport for upgrades, made on first use.
type layerUpgrades struct {
	once sync.Once
	tr   *http.Transport
}

// upgradeRoundTrip sends the upgrade request req to e over a new
// HTTP/1.1 connection. A 101 response's Body is the connection
// (io.ReadWriteCloser), which the tunnel takes over. A connection that
// cannot be opened sets e aside, as on the pooled path.
func (p *layerPool) upgradeRoundTrip(e *layerEndpoint, req *http.Request) (*http.Response, error) {
	p.upgrades.once.Do(func() {
		d := &net.Dialer{Timeout: h1.BackendDialTimeout, KeepAlive: 30 * time.Second}
		p.upgrades.tr = &http.Transport{
			DialContext:            d.DialContext,
			DialTLSContext:         func(ctx context.Context, network, addr string) (net.Conn, error) { return p.dialTLS1(ctx, d, addr) },
			DisableKeepAlives:      true, // an upgraded connection is never reused
			DisableCompression:     true,
			MaxResponseHeaderBytes: h1.MaxResponseHeaderBytes,
			ResponseHeaderTimeout:  0, // the exchange's context bounds it
		}
	})
	resp, err := p.upgrades.tr.RoundTrip(req)
	if err != nil && isConnectFailure(err) {
		p.failed(e, time.Now())
	}
	return resp, err
}

// dialTLS1 opens a TLS connection to addr with the pool's current TLS
// settings, offering HTTP/1.1 only.
func (p *layerPool) dialTLS1(ctx context.Context, d *net.Dialer, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := p.tcfg.Load().Clone()
	cfg.NextProtos = []string{"http/1.1"}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err} // a connect failure
	}
	return tc, nil
}
