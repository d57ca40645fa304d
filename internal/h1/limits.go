package h1

import (
	"errors"
	"net"
	"time"
)

// Limits and defaults. The proxy's net/http server and net/http backend
// transports use the same values, so that both server loops and both
// backend clients behave alike.
const (
	// MaxHeaderBytes bounds a request's request line plus header block
	// (Google's 60 KiB); a larger one is answered 431.
	MaxHeaderBytes = 60 << 10
	// DefaultReadHeaderTimeout is Server.ReadHeaderTimeout from
	// NewServer: slow clients sending their headers.
	DefaultReadHeaderTimeout = 30 * time.Second
	// DefaultIdleTimeout is Server.IdleTimeout from NewServer: Google's
	// default HTTP keep-alive timeout towards clients.
	DefaultIdleTimeout = 610 * time.Second
	// DefaultWatchAfter is Server.WatchAfter from NewServer.
	DefaultWatchAfter = 10 * time.Millisecond
	// DefaultParkAfter is Server.ParkAfter from NewServer.
	DefaultParkAfter = time.Second

	// BackendIdleTimeout is how long an idle backend connection is kept
	// (Google keeps them 600 s).
	BackendIdleTimeout = 600 * time.Second
	// BackendDialTimeout bounds connecting to a backend.
	BackendDialTimeout = 5 * time.Second
	// MaxIdleConnsPerHost bounds the idle connections kept per backend.
	MaxIdleConnsPerHost = 1024
	// MaxResponseHeaderBytes bounds a backend's response head (Google
	// documents about 128 KB); on Transport's synchronous path all heads
	// of one response, 1xx included, share it.
	MaxResponseHeaderBytes = 128 << 10
)

// isTimeout reports a net.Error timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Code3 formats a three-digit status code (anything else as 500), for
// status lines and error bodies.
func Code3(c int) string {
	if c < 100 || c > 999 {
		c = 500
	}
	return string([]byte{byte('0' + c/100), byte('0' + c/10%10), byte('0' + c%10)})
}

// ErrClientGone is the error of a response write once the client's
// connection has failed.
var ErrClientGone = errors.New("client went away")
