package h2

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// conn is one HTTP/2 connection. The reader goroutine (serve) owns the
// fields marked so; mu guards stream state and flow control; wmu guards
// the write side (the buffered writer, the Framer's write half, the HPACK
// encoder). Lock order: wmu before mu; the reader never holds both.
type conn struct {
	s       *Server
	nc      net.Conn
	hs      *http.Server
	handler http.Handler
	ctx     context.Context // base of the request contexts
	cancel  context.CancelFunc
	remote  string
	tls     *tls.ConnectionState
	// src, br and fr are the read side (reader goroutine only; br is
	// nil while awaitFrame waits). fr reads frames; fw writes them
	// (wmu held).
	src     connSource
	br      *bufio.Reader
	fr      *http2.Framer
	fw      *http2.Framer
	bigRead bool // fr read a frame over bigReadFrame since it was made

	maxStreams   uint32
	streamWindow int32
	idleTimeout  time.Duration
	sawPreface   bool
	fields       *fieldTables

	// Reader goroutine only.
	sawSettings     bool
	unackedSettings int
	// maxStreamID is the highest client stream ID seen: written by the
	// reader under mu, read by the reader without it.
	maxStreamID uint32

	mu             sync.Mutex
	streams        map[uint32]*stream
	handlers       int       // handler goroutines running
	queued         []*stream // streams waiting for a handler slot
	sendWindow     int64     // connection send window
	peerInitWindow int32     // the client's SETTINGS_INITIAL_WINDOW_SIZE
	inflow         inflow    // connection receive window
	goingAway      bool      // GOAWAY sent
	goAwayLast     uint32    // its last stream ID
	closed         bool
	idle           *time.Timer
	resetIDs       [8]uint32 // the last streams the server reset (see recentlyReset)
	resetNext      uint32

	wmu     sync.Mutex
	ws      *writeSet // nil while nothing is buffered (see connBuffers)
	dataHdr [9]byte   // a DATA frame header being written
	henc    *hpack.Encoder
	werr    error
	pending atomic.Int32 // goroutines in or waiting for a write
	dirty   atomic.Bool  // the reader left bytes unflushed
}

var (
	errClientDisconnected = errors.New("http2: client disconnected")
	errStreamClosed       = errors.New("http2: stream closed")
	errClosedBody         = errors.New("http2: request body closed by handler")
)

func newConn(s *Server, nc net.Conn, opts ServeConnOpts) *conn {
	hs := opts.BaseConfig
	if hs == nil {
		hs = &http.Server{}
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, nc.LocalAddr())
	ctx = context.WithValue(ctx, http.ServerContextKey, hs)
	c := &conn{
		s: s, nc: nc, hs: hs, handler: opts.Handler, remote: nc.RemoteAddr().String(),
		maxStreams: or32(s.MaxConcurrentStreams, DefaultMaxConcurrentStreams), streamWindow: or32(s.StreamWindow, DefaultWindow),
		idleTimeout: hs.IdleTimeout, sawPreface: opts.SawPreface,
		streams: map[uint32]*stream{}, sendWindow: protocolWindow, peerInitWindow: protocolWindow,
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	if cs, ok := nc.(connectionStater); ok {
		st := cs.ConnectionState()
		c.tls = &st
	}
	c.src.c = c
	c.takeReader()
	c.fr = c.newReadFramer(hpack.NewDecoder(maxEncoderTable, nil))
	c.fw = http2.NewFramer(frameWriter{c}, nil)
	c.henc = hpack.NewEncoder(hpackSink{c})
	c.fields = s.tables()
	c.inflow.avail = protocolWindow
	return c
}

// or32 returns v, or def when v is zero.
func or32[T uint32 | int32](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// maxHeaderListSize is SETTINGS_MAX_HEADER_LIST_SIZE: the http.Server's
// MaxHeaderBytes padded as x/net pads it (32 bytes for 10 fields).
func (c *conn) maxHeaderListSize() uint32 {
	n := c.hs.MaxHeaderBytes
	if n <= 0 {
		n = http.DefaultMaxHeaderBytes
	}
	return uint32(n + 10*32)
}

// serve runs the reader loop until the connection ends.
func (c *conn) serve() {
	defer c.teardown()
	if c.tls != nil && !adequateTLS(c.tls) {
		c.writeGoAway(0, http2.ErrCodeInadequateSecurity)
		return
	}
	if !c.writeInitial() {
		return
	}
	if !c.sawPreface && !c.readPreface() {
		return
	}
	if c.idleTimeout > 0 {
		c.mu.Lock()
		c.idle = time.AfterFunc(c.idleTimeout, c.onIdle)
		c.mu.Unlock()
	}
	for {
		c.flushBeforeRead()
		if c.br.Buffered() == 0 && c.awaitFrame() != nil {
			return // the client went away, or the linger ended
		}
		f, err := c.fr.ReadFrame()
		if err == nil {
			if f.Header().Length > bigReadFrame {
				c.bigRead = true
			}
			err = c.processFrame(f)
			if err == nil {
				continue
			}
		} else if !isProtocolError(err) {
			return // the client went away, or the linger ended
		} else if _, ok := err.(http2.ConnectionError); ok && f != nil {
			c.setMaxStreamID(f.Header().StreamID)
		}
		if !c.handleError(err) {
			return
		}
	}
}

// adequateTLS reports whether a TLS connection may carry HTTP/2 (RFC
// 9113 §9.2): TLS 1.3, or TLS 1.2 with an ephemeral key exchange and an
// AEAD cipher (of the suites Go implements, the ECDHE GCM and
// ChaCha20-Poly1305 ones; the rest are on RFC 7540's block list).
func adequateTLS(st *tls.ConnectionState) bool {
	if st.Version >= tls.VersionTLS13 {
		return true
	}
	if st.Version < tls.VersionTLS12 {
		return false
	}
	name := tls.CipherSuiteName(st.CipherSuite)
	return strings.Contains(name, "_ECDHE_") && (strings.Contains(name, "_GCM_") || strings.Contains(name, "CHACHA20"))
}

// isProtocolError reports an error that calls for a frame in answer.
func isProtocolError(err error) bool {
	switch err.(type) {
	case http2.StreamError, http2.ConnectionError:
		return true
	}
	return errors.Is(err, http2.ErrFrameTooLarge)
}

// handleError answers a protocol error: RST_STREAM for a stream error,
// GOAWAY and a lingering close for a connection error. It reports
// whether the reader goes on.
func (c *conn) handleError(err error) bool {
	var se http2.StreamError
	if errors.As(err, &se) {
		c.resetStream(se.StreamID, se.Code, true)
		return true
	}
	code := http2.ErrCodeFrameSize
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		code = http2.ErrCode(ce)
	}
	c.s.logger().Debug("http2: connection error", "remote", c.remote, "code", code)
	c.writeGoAway(c.maxStreamID, code)
	c.linger()
	return false
}

// linger reads and discards what the client still sends, for up to
// goAwayLinger, so that closing does not reset away the GOAWAY.
func (c *conn) linger() {
	c.nc.SetReadDeadline(time.Now().Add(goAwayLinger))
	io.Copy(io.Discard, io.LimitReader(c.br, 4<<20))
}

// readPreface reads the client preface (RFC 9113 §3.4).
func (c *conn) readPreface() bool {
	var buf [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, buf[:]); err != nil {
		return false
	}
	if string(buf[:]) != http2.ClientPreface {
		c.writeGoAway(0, http2.ErrCodeProtocol)
		return false
	}
	return true
}

// writeInitial writes the server's SETTINGS and the connection window
// beyond the protocol's 65,535 bytes.
func (c *conn) writeInitial() bool {
	c.lockWrite()
	c.werr = c.fw.WriteSettings(
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: or32(c.s.MaxReadFrameSize, DefaultMaxReadFrameSize)},
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.maxStreams},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.maxHeaderListSize()},
		http2.Setting{ID: http2.SettingHeaderTableSize, Val: maxEncoderTable},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(c.streamWindow)},
	)
	c.unackedSettings++
	cw := or32(c.s.ConnWindow, DefaultWindow)
	if c.werr == nil && cw > protocolWindow {
		c.werr = c.fw.WriteWindowUpdate(0, uint32(cw-protocolWindow))
		c.mu.Lock()
		c.inflow.avail = cw
		c.mu.Unlock()
	}
	ok := c.werr == nil
	c.unlockWrite(false)
	return ok
}

// teardown ends every stream and closes the connection.
func (c *conn) teardown() {
	c.mu.Lock()
	c.closed = true
	for id, st := range c.streams {
		st.abort(errClientDisconnected)
		st.removed = true
		delete(c.streams, id)
	}
	for _, st := range c.queued {
		st.abort(errClientDisconnected)
	}
	c.queued = nil
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	c.cancel()
	c.nc.Close()
	c.wmu.Lock()
	if c.werr == nil {
		c.werr = net.ErrClosed
	}
	c.giveWriteSet() // writers see werr and leave it alone
	c.wmu.Unlock()
	if c.br != nil {
		c.giveReader()
	}
}

// onIdle runs when the connection has had no stream for the idle
// timeout: it sends GOAWAY and closes.
func (c *conn) onIdle() {
	c.mu.Lock()
	idle := len(c.streams) == 0 && c.handlers == 0
	c.mu.Unlock()
	if idle {
		c.startGracefulShutdown()
	}
}

// startGracefulShutdown sends GOAWAY (NO_ERROR) naming the last stream
// the server will serve; the connection closes once those are done.
func (c *conn) startGracefulShutdown() {
	c.mu.Lock()
	if c.goingAway || c.closed {
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	c.goAwayLast = c.maxStreamID
	c.mu.Unlock()
	c.writeGoAway(c.goAwayLast, http2.ErrCodeNo)
	c.mu.Lock()
	done := len(c.streams) == 0
	c.mu.Unlock()
	if done {
		c.lingerClose()
	}
}

// setMaxStreamID raises maxStreamID to id (reader only).
func (c *conn) setMaxStreamID(id uint32) {
	if id > c.maxStreamID {
		c.mu.Lock()
		c.maxStreamID = id
		c.mu.Unlock()
	}
}

// lingerClose makes the reader stop within goAwayLinger.
func (c *conn) lingerClose() {
	c.nc.SetReadDeadline(time.Now().Add(goAwayLinger))
}
