// Package h1test provides the fake backends that the h1 and proxy tests
// share. It is imported by tests only.
package h1test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Answer writes the answer to r on c as raw bytes (any bytes: a hostile
// backend's malformed heads, split writes, early closes) and reports
// whether to read another request on c. It runs on the connection's
// goroutine, after r's body has been read to its end.
type Answer func(c net.Conn, r *http.Request) bool

// Option changes a RawBackend.
type Option func(*options)

type options struct {
	tls         *tls.Config
	deadline    time.Duration
	onReadError func(error)
}

// WithTLS serves TLS with cfg on the backend's listener.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// WithDeadline bounds each connection to d from its accept (default
// 20 s); 0 means no deadline.
func WithDeadline(d time.Duration) Option { return func(o *options) { o.deadline = d } }

// OnReadError calls f, on the connection's goroutine, when reading a
// request head fails (the client closed the connection, or sent what
// net/http's parser refuses), just before the connection is closed.
func OnReadError(f func(error)) Option { return func(o *options) { o.onReadError = f } }

// MaxRequestsPerConn is how many requests a RawBackend reads on one
// connection before closing it.
const MaxRequestsPerConn = 100

// RawBackend starts a backend on 127.0.0.1 that reads each request (and
// its body) with net/http's parser and lets answer write the response,
// and returns its address. A connection is closed when reading a request
// or its body fails, when answer returns false, or after
// MaxRequestsPerConn requests. The listener closes when tb's test ends.
func RawBackend(tb testing.TB, answer Answer, opts ...Option) string {
	tb.Helper()
	o := options{deadline: 20 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	if o.tls != nil {
		ln = tls.NewListener(ln, o.tls)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c, answer, &o)
		}
	}()
	return ln.Addr().String()
}

func serve(c net.Conn, answer Answer, o *options) {
	defer c.Close()
	if o.deadline > 0 {
		c.SetDeadline(time.Now().Add(o.deadline))
	}
	br := bufio.NewReader(c)
	for range MaxRequestsPerConn {
		r, err := http.ReadRequest(br)
		if err != nil {
			if o.onReadError != nil {
				o.onReadError(err)
			}
			return
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		if !answer(c, r) {
			return
		}
	}
}
