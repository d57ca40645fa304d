package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// H1Server is a purpose-built HTTP/1.1 server for cleartext frontends. It
// calls the same http.Handler as the *http.Server from NewServer, with the
// same limits (60 KiB request line + headers, 30 s to send them, 610 s
// idle keep-alive), but runs each connection as one plain loop: read a
// request with http.ReadRequest, call the handler, frame the response,
// repeat. Compared with net/http's server it saves, per request, the
// background-read goroutine and its read-deadline dance, the cancelable
// per-request context and the response/chunkWriter double buffering.
//
// Differences from net/http, all deliberate:
//   - Request contexts are per connection: cancelled when the connection
//     ends, when a response write fails, or when the client is seen to go
//     away. The client is only watched (a one-byte background read, as
//     net/http does for every request) once a request has been running
//     for WatchAfter with its body fully read, so fast requests never pay
//     for it and slow ones notice a vanished client within WatchAfter.
//   - Handlers may always read the request body while writing the
//     response (EnableFullDuplex is a no-op); an unread body is drained
//     (up to 256 KiB) after the response, else the connection is closed.
//   - Connections that start with the HTTP/2 preface (h2c with prior
//     knowledge) are handed, with the bytes already read, to H2C (the
//     *http.Server from NewServer). "Upgrade: h2c" on an HTTP/1.1 request
//     is not acted on: the request is answered as HTTP/1.1, like net/http.
//   - Like net/http, a request with both Content-Length and
//     "Transfer-Encoding: chunked" is read as chunked with Content-Length
//     removed (http.ReadRequest's RFC 9112 §6.3 behaviour); the body is
//     re-framed towards backends, so it cannot be smuggled past them.
//
// Create it with NewH1Server; the zero value is not usable.
type H1Server struct {
	// Handler answers every HTTP/1.x request.
	Handler http.Handler
	// H2C serves connections that open with the HTTP/2 client preface.
	// Nil closes them.
	H2C *http.Server
	// ReadHeaderTimeout bounds the time from a request's first byte to
	// the end of its headers; IdleTimeout bounds the wait for the next
	// request on a keep-alive connection.
	ReadHeaderTimeout, IdleTimeout time.Duration
	// WatchAfter is how long a request runs before its client connection
	// is watched for a disconnect (which cancels the request context).
	WatchAfter time.Duration
	// Logger receives handler panics and connection errors.
	Logger *slog.Logger

	shutdown atomic.Bool
	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*h1conn]struct{}
	h2once   sync.Once
	h2ln     *chanListener
}

// h1 server limits beyond those shared with NewServer.
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
	// defaultWatchAfter is H1Server.WatchAfter from NewH1Server.
	defaultWatchAfter = 10 * time.Millisecond
)

// h2Preface opens every HTTP/2 connection.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// NewH1Server returns an H1Server for h with NewServer's limits, handing
// h2c connections to NewServer(h, nil). Panics are logged to the
// handler's logger when h comes from NewHandler, else to slog.Default().
func NewH1Server(h http.Handler) *H1Server {
	logger := slog.Default()
	if ph, ok := h.(*handler); ok {
		logger = ph.log
	}
	return &H1Server{
		Handler:           h,
		H2C:               NewServer(h, nil),
		ReadHeaderTimeout: clientHeaderTimeout,
		IdleTimeout:       clientIdleTimeout,
		WatchAfter:        defaultWatchAfter,
		Logger:            logger,
	}
}

// Serve accepts connections on ln until Shutdown or Close, serving each
// in its own goroutine. It always returns a non-nil error:
// http.ErrServerClosed after Shutdown or Close.
func (s *H1Server) Serve(ln net.Listener) error {
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
		c := s.newConn(rwc)
		s.mu.Lock()
		if s.shutdown.Load() {
			s.mu.Unlock()
			rwc.Close()
			return http.ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting, closes idle connections, and waits for the
// requests in flight to finish (each connection closes after its current
// response) or for ctx to end, whichever is first; it returns ctx's error
// in the latter case. Hijacked connections are not waited for.
func (s *H1Server) Shutdown(ctx context.Context) error {
	s.closeListeners()
	h2err := make(chan error, 1)
	go func() { h2err <- s.shutdownH2C(ctx) }()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if s.closeIdle() == 0 {
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
func (s *H1Server) Close() error {
	s.closeListeners()
	s.mu.Lock()
	for c := range s.conns {
		c.rwc.Close()
	}
	s.mu.Unlock()
	if s.H2C != nil {
		return s.H2C.Close()
	}
	return nil
}

// closeListeners marks the server shut down and closes its listeners.
func (s *H1Server) closeListeners() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdown.Store(true)
	for ln := range s.lns {
		ln.Close()
	}
}

// shutdownH2C shuts the h2c server down (also when it never started, so
// that a late hand-off finds it closed).
func (s *H1Server) shutdownH2C(ctx context.Context) error {
	if s.H2C == nil {
		return nil
	}
	if err := s.H2C.Shutdown(ctx); err != nil {
		return fmt.Errorf("h2c shutdown: %w", err)
	}
	return nil
}

// closeIdle closes the connections waiting for a request and returns how
// many connections remain.
func (s *H1Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.idle.Load() {
			c.rwc.Close()
		}
	}
	return len(s.conns)
}

// forget stops tracking c (closed, hijacked or handed off).
func (s *H1Server) forget(c *h1conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// handOff passes a connection that opened with the HTTP/2 preface to the
// h2c server, starting it on first use.
func (s *H1Server) handOff(c net.Conn) {
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
func (s *H1Server) newConn(rwc net.Conn) *h1conn {
	c := &h1conn{s: s, rwc: rwc, remote: rwc.RemoteAddr().String()}
	ctx := context.WithValue(context.Background(), connKey{}, &connInfo{localIP: hostOnly(rwc.LocalAddr().String())})
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, rwc.LocalAddr())
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.src.c = c
	c.br = bufio.NewReaderSize(&c.src, h1ReadBuf)
	c.bw = bufio.NewWriterSize(h1sink{c}, h1WriteBuf)
	c.header = make(http.Header, 16)
	c.timer = time.AfterFunc(time.Hour, c.watchTimer)
	c.timer.Stop()
	c.idle.Store(true)
	return c
}

// h1conn is one client connection.
type h1conn struct {
	s      *H1Server
	rwc    net.Conn
	remote string
	ctx    context.Context // the requests' context
	cancel context.CancelFunc
	src    h1source
	br     *bufio.Reader
	bw     *bufio.Writer
	failed atomic.Bool // a write to the client failed
	idle   atomic.Bool // waiting for a request (Shutdown closes it)
	header http.Header // the response header map, reused
	hdr    []byte      // the serialised handler headers
	body   []byte      // response body held back to learn its length
	date   []byte      // the Date header value for dateSec
	dsec   int64

	// Client watch (see H1Server): guarded by mu.
	mu                sync.Mutex
	timer             *time.Timer
	reqActive         bool // a handler runs
	bodyDone          bool // the request body was read to its end
	watchWanted       bool // the timer fired while the body was unread
	watching, aborted bool
	hijacked          bool
	watchDone         chan struct{}
	watchErr          error
	watchByte         [1]byte
}

// h1source is what the bufio.Reader reads: the connection, limited to a
// byte budget while a request's headers are read, plus the byte a client
// watch may have read.
type h1source struct {
	c       *h1conn
	remain  int64
	hasByte bool
	b       byte
}

func (r *h1source) Read(p []byte) (int, error) {
	if r.remain <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.remain {
		p = p[:r.remain]
	}
	if r.hasByte && len(p) > 0 {
		p[0], r.hasByte = r.b, false
		r.remain--
		return 1, nil
	}
	n, err := r.c.rwc.Read(p)
	r.remain -= int64(n)
	return n, err
}

// h1sink is what the bufio.Writer writes to: the connection, cancelling
// the request context on the first failure (the client is gone).
type h1sink struct{ c *h1conn }

func (w h1sink) Write(p []byte) (int, error) {
	n, err := w.c.rwc.Write(p)
	if err != nil && !w.c.failed.Swap(true) {
		w.c.cancel()
	}
	return n, err
}

// noLimit is the read budget outside request headers.
const noLimit = 1<<63 - 1

// serve runs the connection's request loop.
func (c *h1conn) serve() {
	handedOff := false
	defer func() {
		c.cancel()
		c.s.forget(c)
		if !handedOff && !c.isHijacked() {
			c.rwc.Close()
		}
	}()
	first := true
	for {
		c.src.remain = maxHeaderBlock + h1ReadSlop
		if c.br.Buffered() == 0 {
			c.idle.Store(true)
			if c.s.shutdown.Load() {
				return
			}
			c.rwc.SetReadDeadline(time.Now().Add(c.s.IdleTimeout))
			if _, err := c.br.Peek(1); err != nil {
				return
			}
		}
		c.idle.Store(false)
		c.rwc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
		if first {
			first = false
			if c.h2Preface() {
				c.src.remain = noLimit
				c.rwc.SetReadDeadline(time.Time{})
				handedOff = true
				c.s.forget(c)
				c.s.handOff(&replayConn{Conn: c.rwc, br: c.br})
				return
			}
		}
		req, err := http.ReadRequest(c.br)
		hitLimit := c.src.remain <= 0
		c.src.remain = noLimit
		if err != nil {
			c.readFailed(err, hitLimit)
			return
		}
		if code, why := checkRequest(req); code != 0 {
			c.errorResponse(code, why)
			return
		}
		if !c.serveRequest(req) {
			return
		}
	}
}

// isHijacked reports whether a handler took the connection over.
func (c *h1conn) isHijacked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hijacked
}

// h2Preface reports whether the connection opens with the HTTP/2 client
// preface, reading only as far as the bytes agree with it.
func (c *h1conn) h2Preface() bool {
	for n := 1; ; n++ {
		b, err := c.br.Peek(max(n, c.br.Buffered()))
		if len(b) > len(h2Preface) {
			b = b[:len(h2Preface)]
		}
		if !strings.HasPrefix(h2Preface, string(b)) {
			return false
		}
		if len(b) == len(h2Preface) {
			return true
		}
		if err != nil {
			return false
		}
		n = len(b)
	}
}

// readFailed answers a request that could not be read, if it is worth
// an answer: 431 over the header limit, 400 (or 501) for malformed ones.
// A closed connection or a timeout ends quietly, like net/http.
func (c *h1conn) readFailed(err error, hitLimit bool) {
	switch {
	case hitLimit:
		c.errorResponse(http.StatusRequestHeaderFieldsTooLarge, "request line and headers exceed 60 KiB")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
	case isTimeout(err):
	case strings.Contains(err.Error(), "transfer encoding"):
		c.errorResponse(http.StatusNotImplemented, "unsupported transfer encoding")
	default:
		var ne *net.OpError
		if errors.As(err, &ne) {
			return // reset and the like
		}
		c.errorResponse(http.StatusBadRequest, "malformed request")
	}
}

// checkRequest applies net/http's server-side request checks.
func checkRequest(r *http.Request) (int, string) {
	if r.ProtoMajor != 1 {
		return http.StatusHTTPVersionNotSupported, "unsupported protocol version"
	}
	// http.ReadRequest moved the Host header to r.Host (refusing
	// several) and checked header names and values.
	if r.Host == "" && r.ProtoAtLeast(1, 1) && r.Method != http.MethodConnect {
		return http.StatusBadRequest, "missing required Host header"
	}
	if !validHost(r.Host) {
		return http.StatusBadRequest, "malformed Host header"
	}
	return 0, ""
}

// validHost reports whether h is made of the bytes net/http allows in a
// Host header (httpguts.ValidHostHeader, without the x/net dependency).
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!$%&'()*+,-.:;=@[]_~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// errorResponse answers with a load-balancer error in lbError's format
// and closes the connection, lingering so the answer is not lost to a
// reset.
func (c *h1conn) errorResponse(code int, reason string) {
	text := http.StatusText(code)
	body := itoa3(code) + " " + text + ": " + reason + "\n"
	fmt.Fprintf(c.bw, "HTTP/1.1 %03d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, text, len(body), body)
	if c.bw.Flush() == nil {
		c.linger()
	}
}

// linger half-closes the connection and discards what the client still
// sends for a moment, so that closing does not reset the response away.
func (c *h1conn) linger() {
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.rwc.SetReadDeadline(time.Now().Add(h1LingerTime))
	io.CopyN(io.Discard, c.rwc, h1MaxDrain)
}

// serveRequest runs the handler for r and finishes its response. It
// reports whether the connection may carry another request.
func (c *h1conn) serveRequest(r *http.Request) (keep bool) {
	r = r.WithContext(c.ctx)
	r.RemoteAddr = c.remote
	clear(c.header)
	w := &h1response{c: c, req: r, cl: -1}
	if ex := r.Header["Expect"]; len(ex) > 0 {
		if !r.ProtoAtLeast(1, 1) || len(ex) != 1 || !strings.EqualFold(ex[0], "100-continue") {
			c.errorResponse(http.StatusExpectationFailed, "unsupported Expect header")
			return false
		}
		w.expect100 = r.ContentLength != 0
	}
	var body *h1body
	if r.Body != nil && r.Body != http.NoBody {
		body = &h1body{w: w, rc: r.Body}
		r.Body = body
	}
	c.mu.Lock()
	c.reqActive, c.bodyDone, c.watchWanted = true, body == nil, false
	c.mu.Unlock()
	c.timer.Reset(c.s.WatchAfter)

	ok := c.callHandler(w, r)

	c.timer.Stop()
	c.mu.Lock()
	c.reqActive = false
	hijacked := c.hijacked
	c.mu.Unlock()
	if hijacked {
		return false
	}
	gone := c.stopWatch()
	if !ok {
		c.bw.Flush() // what the handler wrote, then a truncated close
		return false
	}
	w.finish()
	if c.bw.Flush() != nil || gone {
		return false
	}
	keep = !w.closeAfter
	if body != nil && !body.drain() {
		if keep {
			c.linger()
		}
		return false
	}
	return keep && !c.s.shutdown.Load()
}

// callHandler runs the handler, recovering a panic like net/http: it is
// logged (unless it is http.ErrAbortHandler) and the connection closed.
// It reports whether the handler returned normally.
func (c *h1conn) callHandler(w *h1response, r *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.Logger.Error("http1: panic serving request", "remote", c.remote, "panic", v, "stack", string(buf))
			}
			ok = false
		}
	}()
	c.s.Handler.ServeHTTP(w, r)
	return true
}

// watchTimer starts the client watch for a request that has run for
// WatchAfter, or arms it for the end of the request body.
func (c *h1conn) watchTimer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reqActive || c.watching || c.hijacked {
		return
	}
	if !c.bodyDone {
		c.watchWanted = true
		return
	}
	c.startWatchLocked()
}

// bodyEOF records that the request body was read to its end.
func (c *h1conn) bodyEOF() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bodyDone = true
	if c.watchWanted && c.reqActive && !c.watching && !c.hijacked {
		c.startWatchLocked()
	}
}

// startWatchLocked reads one byte in the background: an error means the
// client is gone, and cancels the request context.
func (c *h1conn) startWatchLocked() {
	c.watching = true
	c.watchDone = make(chan struct{})
	go func() {
		n, err := c.rwc.Read(c.watchByte[:])
		c.mu.Lock()
		if n == 1 { // a pipelined request: keep its first byte
			c.src.hasByte, c.src.b = true, c.watchByte[0]
		}
		if err != nil && !(c.aborted && isTimeout(err)) {
			c.watchErr = err
			c.cancel()
		}
		c.mu.Unlock()
		close(c.watchDone)
	}()
}

// stopWatch ends a client watch, reporting whether it saw the client go.
func (c *h1conn) stopWatch() (gone bool) {
	c.mu.Lock()
	if !c.watching {
		c.mu.Unlock()
		return false
	}
	c.aborted = true
	done := c.watchDone
	c.mu.Unlock()
	c.rwc.SetReadDeadline(aLongTimeAgo)
	<-done
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watching, c.aborted = false, false
	return c.watchErr != nil
}

// h1body is a request body: it sends "100 Continue" on first read when
// the client expects it, and stops the handler reading (or closing)
// the underlying body so that the server can drain it afterwards.
type h1body struct {
	mu          sync.Mutex
	w           *h1response
	rc          io.ReadCloser
	closed, eof bool
}

func (b *h1body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.eof {
		return 0, io.EOF
	}
	if b.w.expect100 {
		b.w.sendContinue()
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
		b.w.c.bodyEOF()
	}
	return n, err
}

// Close stops further reads; the server drains what is left.
func (b *h1body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// drain reads what the handler left of the body, up to h1MaxDrain, and
// reports whether the connection can carry another request.
func (b *h1body) drain() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.eof {
		return true
	}
	if b.w.expect100 && !b.w.continued {
		return false // the client may or may not send the body now
	}
	c := b.w.c
	c.rwc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
	_, err := io.CopyN(io.Discard, b.rc, h1MaxDrain+1)
	return err == io.EOF
}

// h1response is the http.ResponseWriter of one request.
type h1response struct {
	c   *h1conn
	req *http.Request

	mu          sync.Mutex // serialises 100 Continue with the response head
	wroteHeader bool       // the final status is set
	committed   bool       // the response head is in the write buffer
	continued   bool       // 100 Continue was sent
	expect100   bool
	status      int
	cl          int64 // Content-Length set by the handler, or -1
	written     int64 // body bytes the handler wrote
	chunked     bool
	closeAfter  bool
	bodyOK      bool     // the status allows a body
	isHead      bool     // HEAD: the body is counted, not sent
	hasType     bool     // Content-Type set (or Content-Encoding)
	hasDate     bool     // Date set
	hasTE       bool     // Transfer-Encoding set by the handler
	connHdr     []string // the handler's Connection header
	trailers    []string // declared trailer names
	hasPrefixed bool     // http.TrailerPrefix keys set at WriteHeader
}

// Header returns the response header map.
func (w *h1response) Header() http.Header { return w.c.header }

// WriteHeader sends an informational (1xx) head at once, or sets the
// final status; a second final status is ignored.
func (w *h1response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	c := w.c
	if code < 200 && code != http.StatusSwitchingProtocols {
		if !w.req.ProtoAtLeast(1, 1) {
			return
		}
		w.mu.Lock()
		c.hdr = c.hdr[:0]
		for k, vv := range c.header {
			c.hdr = appendHeader(c.hdr, k, vv)
		}
		w.writeStatusLine(code)
		c.bw.Write(c.hdr)
		c.bw.WriteString("\r\n")
		c.bw.Flush()
		w.mu.Unlock()
		return
	}
	w.wroteHeader, w.status = true, code
	w.isHead = w.req.Method == http.MethodHead
	w.bodyOK = code != http.StatusNoContent && code != http.StatusNotModified && code >= 200
	c.hdr = c.hdr[:0]
	for k, vv := range c.header {
		switch k {
		case "Content-Length":
			if !w.bodyOK || len(vv) == 0 {
				continue
			}
			v, err := strconv.ParseInt(strings.TrimSpace(vv[0]), 10, 64)
			if err != nil || v < 0 {
				c.s.Logger.Warn("http1: invalid Content-Length from handler", "value", vv[0])
				continue
			}
			w.cl = v
			continue
		case "Transfer-Encoding":
			w.hasTE = len(vv) > 0 && w.bodyOK
			continue
		case "Connection":
			w.connHdr = vv
			continue
		case "Trailer":
			w.trailers = vv
		case "Content-Type":
			if code == http.StatusNotModified {
				continue
			}
			w.hasType = true
		case "Content-Encoding":
			w.hasType = w.hasType || (len(vv) > 0 && vv[0] != "")
		case "Date":
			w.hasDate = true
		}
		if strings.HasPrefix(k, http.TrailerPrefix) {
			w.hasPrefixed = true
			continue
		}
		c.hdr = appendHeader(c.hdr, k, vv)
	}
}

// appendHeader appends "k: v\r\n" for each value, skipping invalid names
// and turning CR and LF in values into spaces (as net/http does).
func appendHeader(b []byte, k string, vv []string) []byte {
	if !validFieldName(k) {
		return b
	}
	for _, v := range vv {
		b = append(b, k...)
		b = append(b, ": "...)
		start := len(b)
		b = append(b, strings.TrimSpace(v)...)
		for i := start; i < len(b); i++ {
			if b[i] == '\r' || b[i] == '\n' {
				b[i] = ' '
			}
		}
		b = append(b, "\r\n"...)
	}
	return b
}

// writeStatusLine writes the status line for code.
func (w *h1response) writeStatusLine(code int) {
	bw := w.c.bw
	if w.req.ProtoAtLeast(1, 1) {
		if code == http.StatusOK {
			bw.WriteString("HTTP/1.1 200 OK\r\n")
			return
		}
		bw.WriteString("HTTP/1.1 ")
	} else {
		bw.WriteString("HTTP/1.0 ")
	}
	bw.WriteString(itoa3(code))
	bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		bw.WriteString(text)
	} else {
		bw.WriteString("status code " + itoa3(code))
	}
	bw.WriteString("\r\n")
}

// commit writes the response head, choosing the body framing; first is
// the start of the body (for Content-Type sniffing) and final says the
// handler is done, so a held-back body's length is known.
func (w *h1response) commit(first []byte, final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.committed = true
	c, r := w.c, w.req
	trailers := len(w.trailers) > 0 || w.hasPrefixed
	if final && w.cl < 0 && w.bodyOK && !trailers && !w.hasTE && (!w.isHead || w.written > 0) {
		w.cl = w.written
	}
	w.closeAfter = r.Close || c.s.shutdown.Load() || hasToken(w.connHdr, "close")
	if w.expect100 && !w.continued {
		w.closeAfter = true
	}
	is11 := r.ProtoAtLeast(1, 1)
	switch {
	case w.isHead || !w.bodyOK:
	case w.cl >= 0:
	case is11:
		w.chunked = true
	default:
		w.closeAfter = true // HTTP/1.0: the body ends with the connection
	}
	if !is11 && !w.isHead && w.bodyOK && w.cl < 0 {
		w.closeAfter = true
	}

	w.writeStatusLine(w.status)
	bw := c.bw
	bw.Write(c.hdr)
	if !w.hasDate {
		bw.WriteString("Date: ")
		bw.Write(c.httpDate())
		bw.WriteString("\r\n")
	}
	if w.bodyOK && !w.hasType && !w.hasTE && len(first) > 0 {
		bw.WriteString("Content-Type: ")
		bw.WriteString(http.DetectContentType(first))
		bw.WriteString("\r\n")
	}
	if w.cl >= 0 && w.bodyOK {
		var nb [20]byte
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(nb[:0], w.cl, 10))
		bw.WriteString("\r\n")
	}
	if w.chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	switch {
	case w.closeAfter && w.status != http.StatusSwitchingProtocols:
		if is11 {
			bw.WriteString("Connection: close\r\n")
		}
	case len(w.connHdr) > 0:
		c.hdr = appendHeader(c.hdr[:0], "Connection", w.connHdr)
		bw.Write(c.hdr)
	case !is11:
		bw.WriteString("Connection: keep-alive\r\n")
	}
	bw.WriteString("\r\n")
}

// hasToken reports whether a comma-separated header contains token.
func hasToken(vv []string, token string) bool {
	for _, v := range vv {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// httpDate returns the current Date header value, formatted once a
// second per connection.
func (c *h1conn) httpDate() []byte {
	now := time.Now()
	if s := now.Unix(); s != c.dsec || c.date == nil {
		c.dsec = s
		c.date = now.UTC().AppendFormat(c.date[:0], http.TimeFormat)
	}
	return c.date
}

// sendContinue answers "Expect: 100-continue" once, unless the response
// head went out first.
func (w *h1response) sendContinue() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.continued || w.committed {
		return
	}
	w.continued = true
	w.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	w.c.bw.Flush()
}

// Write sends body bytes, framed per the response head; a response
// without Content-Length holds back its first 2 KiB, hoping to learn the
// length.
func (w *h1response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyOK {
		return 0, http.ErrBodyNotAllowed
	}
	c := w.c
	if c.failed.Load() {
		return 0, errClientGone
	}
	var err error
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		p, err = p[:w.cl-w.written], http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.committed {
		if w.cl < 0 && w.written <= h1BufferBeforeChunking {
			if !w.isHead {
				c.body = append(c.body, p...)
			}
			return len(p), err
		}
		if len(c.body) > 0 {
			w.commit(c.body, false)
			w.writeBody(c.body)
			c.body = c.body[:0]
		} else {
			w.commit(p, false)
		}
	}
	w.writeBody(p)
	if c.failed.Load() {
		return 0, errClientGone
	}
	return len(p), err
}

// writeBody writes p with the chosen framing.
func (w *h1response) writeBody(p []byte) {
	if len(p) == 0 || w.isHead {
		return
	}
	bw := w.c.bw
	if w.chunked {
		var nb [16]byte
		bw.Write(strconv.AppendInt(nb[:0], int64(len(p)), 16))
		bw.WriteString("\r\n")
		bw.Write(p)
		bw.WriteString("\r\n")
		return
	}
	bw.Write(p)
}

// Flush sends the head and what was written so far.
func (w *h1response) Flush() { _ = w.FlushError() }

// FlushError is Flush reporting a write error (for
// http.ResponseController).
func (w *h1response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	c := w.c
	if !w.committed {
		w.commit(c.body, false)
		w.writeBody(c.body)
		c.body = c.body[:0]
	}
	if err := c.bw.Flush(); err != nil {
		return fmt.Errorf("flush response: %w", err)
	}
	return nil
}

// EnableFullDuplex is a no-op: the body can always be read while the
// response is written.
func (w *h1response) EnableFullDuplex() error { return nil }

// finish completes the response after the handler returned.
func (w *h1response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	c := w.c
	if !w.committed {
		w.commit(c.body, true)
		w.writeBody(c.body)
		c.body = c.body[:0]
	}
	if w.cl >= 0 && w.bodyOK && !w.isHead && w.written != w.cl {
		w.closeAfter = true // short body: the client sees it end
	}
	if !w.chunked {
		return
	}
	bw := c.bw
	bw.WriteString("0\r\n")
	c.hdr = c.hdr[:0]
	for _, v := range w.trailers {
		for k := range strings.SplitSeq(v, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if vv := c.header[k]; k != "" && len(vv) > 0 {
				c.hdr = appendHeader(c.hdr, k, vv)
			}
		}
	}
	for k, vv := range c.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			c.hdr = appendHeader(c.hdr, http.CanonicalHeaderKey(name), vv)
		}
	}
	bw.Write(c.hdr)
	bw.WriteString("\r\n")
}

// Hijack hands the connection to the handler, with a reader holding any
// bytes the client already sent after the request.
func (w *h1response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := w.c
	c.timer.Stop()
	c.mu.Lock()
	if c.hijacked {
		c.mu.Unlock()
		return nil, nil, http.ErrHijacked
	}
	c.hijacked = true
	c.mu.Unlock()
	c.stopWatch()
	c.s.forget(c)
	if c.src.hasByte {
		if _, err := c.br.Peek(c.br.Buffered() + 1); err != nil {
			return nil, nil, fmt.Errorf("hijack: buffered byte: %w", err)
		}
	}
	if w.wroteHeader && !w.committed {
		w.commit(c.body, false)
		w.writeBody(c.body)
		c.body = c.body[:0]
	}
	if err := c.bw.Flush(); err != nil {
		return nil, nil, fmt.Errorf("hijack: %w", err)
	}
	c.rwc.SetDeadline(time.Time{})
	return c.rwc, bufio.NewReadWriter(c.br, c.bw), nil
}

// replayConn is a connection whose first bytes were already buffered.
type replayConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *replayConn) Read(p []byte) (int, error) {
	if n := c.br.Buffered(); n > 0 {
		return c.br.Read(p[:min(len(p), n)])
	}
	return c.Conn.Read(p)
}

// chanListener is a net.Listener fed with connections by push: it hands
// h2c connections to an *http.Server.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), closed: make(chan struct{})}
}

// push hands c to Accept, or closes it if the listener is closed.
func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// Compile-time interface checks.
var (
	_ http.Flusher  = (*h1response)(nil)
	_ http.Hijacker = (*h1response)(nil)
	_ io.Reader     = (*h1source)(nil)
)
