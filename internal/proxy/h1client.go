package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// fastTransport is a synchronous HTTP/1.1 client for the common case: a
// body-less, non-upgrade request to a cleartext backend. net/http's
// Transport runs a read goroutine and a write goroutine per connection and
// hands every request and response between them over channels; on a small
// machine those handoffs cost more CPU than the proxying itself. Here the
// request's own goroutine writes the request and reads the response on a
// pooled connection, with no handoff. Everything else (request bodies,
// upgrades, TLS, HTTP/2) goes to the fallback net/http Transport.
//
// Parsing is net/http's own: http.Request.Write and http.ReadResponse, so
// framing (Content-Length, chunked, close-delimited, HEAD, 1xx) is the
// standard library's.
type fastTransport struct {
	fallback http.RoundTripper
	dialer   net.Dialer
	pools    sync.Map // backend address → *connPool
}

// NewFastTransport returns the backend transport Spillway uses for
// backend services with protocol HTTP: a synchronous keep-alive HTTP/1.1
// client for body-less requests, and fallback for everything else.
func NewFastTransport(fallback http.RoundTripper) http.RoundTripper {
	if fallback == nil {
		fallback = NewTransport()
	}
	return &fastTransport{
		fallback: fallback,
		dialer:   net.Dialer{Timeout: backendDialTimeout, KeepAlive: 30 * time.Second},
	}
}

// connPool holds the idle connections to one backend. A buffered channel
// is the free list: getting and putting never block.
type connPool struct {
	idle chan *pconn
}

type pconn struct {
	c        net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	lastUsed time.Time
	pool     *connPool
}

func (t *fastTransport) pool(addr string) *connPool {
	if p, ok := t.pools.Load(addr); ok {
		return p.(*connPool)
	}
	p, _ := t.pools.LoadOrStore(addr, &connPool{idle: make(chan *pconn, backendMaxIdlePerHst)})
	return p.(*connPool)
}

func (p *connPool) get(now time.Time) *pconn {
	for {
		select {
		case c := <-p.idle:
			if now.Sub(c.lastUsed) < backendIdleTimeout {
				return c
			}
			c.c.Close()
		default:
			return nil
		}
	}
}

func (p *connPool) put(c *pconn) {
	c.lastUsed = time.Now()
	select {
	case p.idle <- c:
	default:
		c.c.Close()
	}
}

// fast reports whether req can take the synchronous path.
func fast(req *http.Request) bool {
	return req.URL.Scheme == "http" && (req.Body == nil || req.Body == http.NoBody) &&
		req.Header.Get("Upgrade") == "" && !req.Close
}

// RoundTrip implements http.RoundTripper.
func (t *fastTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !fast(req) {
		return t.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	p := t.pool(req.URL.Host)
	// A pooled connection may have been closed by the backend while idle;
	// a request that fails on one before any response byte is retried
	// once on a fresh connection (it had no body, so this is safe).
	if c := p.get(time.Now()); c != nil {
		resp, err := t.exchange(ctx, c, req)
		if err == nil || !staleConn(err) {
			return resp, err
		}
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", req.URL.Host)
	if err != nil {
		return nil, err
	}
	c := &pconn{c: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 4<<10), pool: p}
	return t.exchange(ctx, c, req)
}

// staleConn reports an error that means "the idle connection was dead".
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (t *fastTransport) exchange(ctx context.Context, c *pconn, req *http.Request) (*http.Response, error) {
	if d, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(d)
	} else {
		c.c.SetDeadline(time.Time{})
	}
	// Cancellation (client gone, per-try timeout) unblocks the I/O.
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	if err := req.Write(c.bw); err != nil {
		stop()
		c.c.Close()
		return nil, ctxErr(ctx, err)
	}
	if err := c.bw.Flush(); err != nil {
		stop()
		c.c.Close()
		return nil, ctxErr(ctx, err)
	}
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			stop()
			c.c.Close()
			return nil, ctxErr(ctx, err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue // 1xx informational: the final response follows
		}
		resp.Body = &pooledBody{rc: resp.Body, c: c, stop: stop, reuse: !resp.Close}
		return resp, nil
	}
}

// ctxErr prefers the context's error: a deadline set from it surfaces as
// an I/O timeout, which the caller should see as the context expiring.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// pooledBody returns the connection to its pool when the body has been
// read to the end, and closes it otherwise.
type pooledBody struct {
	rc    io.ReadCloser
	c     *pconn
	stop  func() bool
	reuse bool
	done  bool
}

func (b *pooledBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
	}
	return n, err
}

func (b *pooledBody) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

func (b *pooledBody) finish(eof bool) {
	b.done = true
	b.rc.Close()
	// stop reports false when the cancellation already fired and
	// poisoned the deadline: then the connection cannot be reused.
	if b.stop() && eof && b.reuse && b.c.br.Buffered() == 0 {
		b.c.c.SetDeadline(time.Time{})
		b.c.pool.put(b.c)
		return
	}
	b.c.c.Close()
}
