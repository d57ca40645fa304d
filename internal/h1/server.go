package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/park"
)

// Server is a purpose-built HTTP/1.1 server, cleartext or TLS (see
// TLSConfig), with net/http's request-reading rules and the deliberate
// differences listed in the package documentation. It calls an ordinary
// http.Handler and runs each connection as one plain loop: read a
// request (readRequestFast, else http.ReadRequest), call the handler,
// frame the response, repeat. Compared with net/http's server it saves,
// per request, the background-read goroutine and its read-deadline
// dance, the cancelable per-request context and the response/chunkWriter
// double buffering.
//
// Create it with NewServer, or set every field but H2C, TLSConfig and
// ConnContext; the zero value is not usable.
type Server struct {
	// Handler answers every HTTP/1.x request.
	Handler http.Handler
	// H2C serves the connections that are HTTP/2: cleartext ones that
	// open with the HTTP/2 client preface, and TLS ones that negotiated
	// h2, unless ServeH2 is set. Nil (and no ServeH2) closes them.
	H2C *http.Server
	// ServeH2, when set, serves the HTTP/2 connections in H2C's place,
	// on the connection's own goroutine and without net/http's
	// per-connection state (about 10 KB): c is the connection (a
	// cleartext one replays the bytes already read, the client preface
	// among them), ctx its context (from ConnContext), and ServeH2
	// returns once it has closed c. ShutdownH2, if set, is called when
	// Shutdown begins (to send GOAWAY); Shutdown then waits for these
	// connections as for HTTP/1.1 ones, and Close closes them.
	ServeH2    func(ctx context.Context, c net.Conn)
	ShutdownH2 func()
	// TLSConfig, when set, makes the server speak TLS: each connection
	// completes its handshake (within ReadHeaderTimeout) on its own
	// goroutine, and one that negotiated h2 by ALPN goes to ServeH2 or
	// H2C. The config should offer h2 and http/1.1.
	TLSConfig *tls.Config
	// ReadHeaderTimeout bounds the time from a request's first byte to
	// the end of its headers, and for a new connection the time from
	// accepting it (or from the end of its TLS handshake) to the end of
	// the first request's headers; IdleTimeout bounds the wait for the
	// next request on a keep-alive connection.
	ReadHeaderTimeout, IdleTimeout time.Duration
	// WatchAfter is how long a request runs before its client connection
	// is watched for a disconnect (which cancels the request context).
	WatchAfter time.Duration
	// ParkAfter is how long a cleartext keep-alive connection waits for
	// its next request on its own goroutine before it is parked: the
	// goroutine ends, and the socket waits in an epoll set shared by the
	// server's connections until it is readable or IdleTimeout passes
	// (Linux; see internal/park). Zero or less: never parked.
	ParkAfter time.Duration
	// Logger receives handler panics and connection errors.
	Logger *slog.Logger
	// ConnContext, when set, derives the context of a new connection's
	// requests from the base one (which holds http.LocalAddrContextKey),
	// as net/http's Server.ConnContext does: it is called once per
	// connection, with the accepted connection (below TLS) before its
	// first byte is read.
	ConnContext func(ctx context.Context, c net.Conn) context.Context

	shutdown atomic.Bool
	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*h1conn]struct{}
	h2once   sync.Once
	h2ln     *chanListener
	// lot holds the parked connections (see ParkAfter): made with the
	// first connection that can park, nil when none can.
	lotOnce sync.Once
	lot     atomic.Pointer[park.Lot]
	nudges  []*h1conn // parkIdle's scratch (the lot's goroutine only)
	// bufs holds the buffers of connections between requests (see
	// h1conn.awaitRequest).
	bufs connBuffers
}

// Server limits beyond the exported ones.
const (
	// h1ReadSlop is read past the 60 KiB header limit before a request
	// is refused (net/http allows the same 4 KiB).
	h1ReadSlop = 4 << 10
	// h1MaxDrain is how much unread request body is discarded to keep a
	// connection; more closes it (net/http's maxPostHandlerReadBytes).
	h1MaxDrain = 256 << 10
	// h1BufferBeforeChunking is how much body a response without
	// Content-Length buffers, hoping the handler finishes so the length
	// can be sent instead of chunks (net/http's value).
	h1BufferBeforeChunking = 2048
	// h1ReadBuf and h1WriteBuf are the per-connection buffer sizes.
	h1ReadBuf  = 16 << 10
	h1WriteBuf = 8 << 10
	// h1LingerTime bounds the wait for a client to stop sending after an
	// error response, so that closing does not reset the response away.
	h1LingerTime = 500 * time.Millisecond
)

// h2Preface opens every HTTP/2 connection.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// NewServer returns a Server for h with the default limits
// (MaxHeaderBytes, DefaultReadHeaderTimeout, DefaultIdleTimeout,
// DefaultWatchAfter, DefaultParkAfter), logging to slog.Default(),
// without H2C or ServeH2 (HTTP/2 connections are closed) and without
// ConnContext.
func NewServer(h http.Handler) *Server {
	return &Server{
		Handler:           h,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		WatchAfter:        DefaultWatchAfter,
		ParkAfter:         DefaultParkAfter,
		Logger:            slog.Default(),
	}
}

// Serve accepts connections on ln until Shutdown or Close, serving each
// in its own goroutine. It always returns a non-nil error:
// http.ErrServerClosed after Shutdown or Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutdown.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	if s.lns == nil {
		s.lns = map[net.Listener]struct{}{}
		s.conns = map[*h1conn]struct{}{}
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var delay time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.shutdown.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && !errors.Is(err, net.ErrClosed) {
				// Out of file descriptors and the like: back off.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.Logger.Warn("http1 accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("http1 serve: %w", err)
		}
		delay = 0
		// A connection accepted as Shutdown began is served all the same
		// (its first request, then it closes): closing it would reset a
		// request on its way, and after a socket handoff its listener
		// lives on in another process.
		c := s.newConn(rwc)
		s.mu.Lock()
		s.conns[c] = struct{}{}
		closing := s.shutdown.Load()
		s.mu.Unlock()
		go c.serve()
		if closing {
			return http.ErrServerClosed
		}
	}
}

// Shutdown stops accepting, closes idle connections, and waits for the
// requests in flight to finish (each connection closes after its current
// response) or for ctx to end, whichever is first; it returns ctx's error
// in the latter case. Hijacked connections are not waited for.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeListeners()
	if s.ShutdownH2 != nil {
		s.ShutdownH2()
	}
	h2err := make(chan error, 1)
	go func() { h2err <- s.shutdownH2C(ctx) }()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if s.closeIdle() == 0 {
			s.closeLot()
			return <-h2err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.closeListeners()
	s.mu.Lock()
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.closeLot()
	if s.H2C != nil {
		return s.H2C.Close()
	}
	return nil
}

// closeListeners marks the server shut down and closes its listeners.
func (s *Server) closeListeners() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdown.Store(true)
	for ln := range s.lns {
		ln.Close()
	}
}

// shutdownH2C shuts the h2c server down (also when it never started, so
// that a late hand-off finds it closed).
func (s *Server) shutdownH2C(ctx context.Context) error {
	if s.H2C == nil {
		return nil
	}
	if err := s.H2C.Shutdown(ctx); err != nil {
		return fmt.Errorf("h2c shutdown: %w", err)
	}
	return nil
}

// h1NewConnGrace is how long Shutdown lets a new connection send its
// first request before it counts as idle (net/http's value): closing it
// at once would reset a request already on its way.
const h1NewConnGrace = 5 * time.Second

// closeIdle closes the connections waiting for a request (a new one only
// after h1NewConnGrace) and returns how many connections remain, counting
// a Serve loop that has not returned yet (it may still hand over a
// connection it accepted) as one.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for c := range s.conns {
		if c.idle.Load() && (!c.fresh.Load() || now.Sub(c.accepted) > h1NewConnGrace) {
			c.close()
		}
	}
	return len(s.conns) + len(s.lns)
}

// forget stops tracking c (closed, hijacked or handed off).
func (s *Server) forget(c *h1conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// handOff passes a connection that opened with the HTTP/2 preface to the
// h2c server, starting it on first use.
func (s *Server) handOff(c net.Conn) {
	if s.H2C == nil {
		c.Close()
		return
	}
	s.h2once.Do(func() {
		s.h2ln = newChanListener(c.LocalAddr())
		go func() {
			if err := s.H2C.Serve(s.h2ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.Logger.Warn("h2c server stopped", "err", err)
			}
		}()
	})
	s.h2ln.push(c)
}

// newConn sets up the per-connection state.
func (s *Server) newConn(rwc net.Conn) *h1conn {
	accepted := rwc
	if s.TLSConfig != nil {
		rwc = tls.Server(rwc, s.TLSConfig)
	}
	c := &h1conn{s: s, rwc: rwc, remote: rwc.RemoteAddr().String()}
	ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, rwc.LocalAddr())
	if s.ConnContext != nil {
		ctx = s.ConnContext(ctx, accepted)
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.src.c = c
	if s.TLSConfig == nil {
		if c.raw = rawConn(rwc); c.raw != nil {
			c.idleFn = c.readIdleFD
			c.lot = s.parkingLot()
		}
	}
	c.takeBuffers()
	c.timer = time.AfterFunc(time.Hour, c.watchTimer)
	c.timer.Stop()
	c.idle.Store(true)
	c.fresh.Store(true)
	c.accepted = time.Now()
	return c
}
