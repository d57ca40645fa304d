package h2

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults, x/net/http2's server's unless noted.
const (
	// DefaultMaxConcurrentStreams is SETTINGS_MAX_CONCURRENT_STREAMS.
	DefaultMaxConcurrentStreams = 250
	// DefaultMaxReadFrameSize is SETTINGS_MAX_FRAME_SIZE: the protocol's
	// minimum, 16 KiB (x/net's default is 1 MiB).
	DefaultMaxReadFrameSize = 16 << 10
	// DefaultWindow is the receive window of a stream and of a
	// connection (x/net's MaxUploadBufferPerStream and
	// MaxUploadBufferPerConnection).
	DefaultWindow = 1 << 20
	// protocolWindow is the initial window of RFC 9113 §6.9.2.
	protocolWindow = 65535
	// maxEncoderTable bounds the HPACK dynamic table used for responses.
	maxEncoderTable = 4096
	// goAwayLinger bounds how long a connection that sent GOAWAY keeps
	// reading (and discarding) before it closes, so that the GOAWAY is
	// not lost to a TCP reset (x/net's goAwayTimeout).
	goAwayLinger = time.Second
	// writeBufSize and readBufSize are the per-connection buffers.
	writeBufSize = 32 << 10
	readBufSize  = 16 << 10
	// handlerBufSize is how much response body a stream buffers before
	// it sends DATA (x/net's handlerChunkWriteSize).
	handlerBufSize = 4 << 10
)

// Server serves HTTP/2 connections with ServeConn. Set the limits before
// the first connection; the zero value uses the defaults above and
// http.Server's (ServeConnOpts.BaseConfig) MaxHeaderBytes and
// IdleTimeout.
type Server struct {
	// MaxConcurrentStreams, MaxReadFrameSize: see the defaults.
	MaxConcurrentStreams uint32
	MaxReadFrameSize     uint32
	// StreamWindow and ConnWindow are the receive windows advertised for
	// each stream and for the connection: the request body bytes a
	// client may send ahead of the handlers reading them.
	StreamWindow, ConnWindow int32
	// Logger receives handler panics and connection errors (default
	// slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now), for the Date field.
	Now func() time.Time

	fieldsOnce sync.Once
	fields     *fieldTables

	bufs    connBuffers
	workers workerPool

	mu       sync.Mutex
	conns    map[*conn]struct{}
	shutdown bool
	date     atomic.Pointer[dateStamp]
}

// ServeConnOpts are the per-connection arguments of ServeConn.
type ServeConnOpts struct {
	// Context is the base of every request's context (default
	// context.Background()).
	Context context.Context
	// BaseConfig supplies MaxHeaderBytes and IdleTimeout, and is the
	// http.ServerContextKey value.
	BaseConfig *http.Server
	// Handler serves every request.
	Handler http.Handler
	// SawPreface says that the client preface was already read.
	SawPreface bool
}

// dateStamp is a cached Date field value.
type dateStamp struct {
	sec int64
	val string
}

// httpDate returns the Date field value for now, formatted once a second.
func (s *Server) httpDate() string {
	now := s.now()
	sec := now.Unix()
	if d := s.date.Load(); d != nil && d.sec == sec {
		return d.val
	}
	d := &dateStamp{sec: sec, val: now.UTC().Format(http.TimeFormat)}
	s.date.Store(d)
	return d.val
}

// tables returns the header name tables, built on first use.
func (s *Server) tables() *fieldTables {
	s.fieldsOnce.Do(func() { s.fields = newFieldTables() })
	return s.fields
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// ServeConn serves the HTTP/2 connection c until it closes, then closes
// it. c may be a *tls.Conn (or anything with ConnectionState), whose
// state then becomes each https request's TLS.
func (s *Server) ServeConn(c net.Conn, opts ServeConnOpts) {
	sc := newConn(s, c, opts)
	if !s.track(sc, true) {
		c.Close()
		return
	}
	defer s.track(sc, false)
	sc.serve()
}

// track adds or removes a connection; adding fails after Shutdown.
func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		return true
	}
	if s.shutdown {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

// Shutdown sends GOAWAY on every connection and refuses new ones; each
// connection closes once its streams are done. It does not wait:
// http.Server.Shutdown, which calls it (RegisterOnShutdown), waits for
// the connections it handed over.
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.shutdown = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.startGracefulShutdown()
	}
}

// connectionStater is a connection that carries TLS state.
type connectionStater interface {
	ConnectionState() tls.ConnectionState
}
