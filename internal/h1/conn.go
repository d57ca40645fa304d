package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spillwaylb/spillway/internal/park"
)

// h1conn is one client connection.
type h1conn struct {
	s      *Server
	rwc    net.Conn
	remote string
	ctx    context.Context // the requests' context
	cancel context.CancelFunc
	src    h1source
	set    *connSet      // where br, bw, header, hdr and body come from
	br     *bufio.Reader // nil between requests when raw is set (so are set, header, hdr, body)
	bw     *bufio.Writer
	// raw is the socket of a cleartext connection, through which it
	// waits for its next request without holding br and bw (nil: wait
	// in br).
	raw     syscall.RawConn
	idleFn  func(fd uintptr) bool // readIdleFD, bound once
	idleErr error                 // what readIdleFD met
	// Parking (see Server.ParkAfter and park.go): lot is nil when the
	// connection cannot park; waitState is where its goroutine is
	// (waitBusy, waitIdle, waitNudged), idleSince when it began to wait
	// (UnixNano); spot is where it is parked (guarded by s.mu).
	lot       *park.Lot
	waitState atomic.Int32
	idleSince atomic.Int64
	spot      *park.Spot
	failed    atomic.Bool // a write to the client failed
	idle      atomic.Bool // waiting for a request (Shutdown closes it)
	// fresh: the first request has not begun; Shutdown leaves such a
	// connection h1NewConnGrace after accepted before closing it.
	fresh    atomic.Bool
	accepted time.Time
	header   http.Header // the response header map, reused
	hdr      []byte      // the serialised handler headers
	body     []byte      // response body held back to learn its length
	date     []byte      // the Date header value for dateSec
	dsec     int64
	// rdl is the read deadline set on rwc by the serving goroutine (a
	// client watch clears it behind its back, and stopWatch records that).
	rdl time.Time
	// wdl is the write deadline the handler asked for (UnixNano, 0 for
	// none; see h1response.SetWriteDeadline), reset for each request;
	// wdlSet is the one set on rwc, by the sink only (see applyWriteDeadline).
	wdl    atomic.Int64
	wdlSet time.Time
	// tls is the connection's TLS state (nil for cleartext), given to
	// every request.
	tls *tls.ConnectionState
	// scan looks for ambiguous framing in heads http.ReadRequest reads.
	scan framingScan

	// Client watch (see Server): guarded by mu.
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
	scan    *framingScan // sees the bytes read while it is set
	// pend is what awaitRequest read while br was away, in a pooled
	// chunk (given back once pend is read).
	pend  []byte
	chunk *[]byte
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
		if r.scan != nil {
			r.scan.feed(p[:1])
		}
		return 1, nil
	}
	if len(r.pend) > 0 {
		n := copy(p, r.pend)
		if r.pend = r.pend[n:]; len(r.pend) == 0 {
			r.c.s.bufs.chunks.Put(r.chunk)
			r.pend, r.chunk = nil, nil
		}
		r.remain -= int64(n)
		if r.scan != nil {
			r.scan.feed(p[:n])
		}
		return n, nil
	}
	n, err := r.c.rwc.Read(p)
	r.remain -= int64(n)
	if r.scan != nil {
		r.scan.feed(p[:n])
	}
	return n, err
}

// h1sink is what the bufio.Writer writes to: the connection, cancelling
// the request context on the first failure (the client is gone).
type h1sink struct{ c *h1conn }

func (w h1sink) Write(p []byte) (int, error) {
	w.c.applyWriteDeadline()
	n, err := w.c.rwc.Write(p)
	if err != nil && !w.c.failed.Swap(true) {
		w.c.cancel()
	}
	return n, err
}

// h1WriteSlack is how late a write deadline may be applied, so that a
// connection carrying many requests a second updates it about once per
// h1WriteSlack rather than for every response.
const h1WriteSlack = 250 * time.Millisecond

// applyWriteDeadline brings rwc's write deadline in line with the one
// the handler asked for (wdl) before a write: none when none was asked
// for, else one between wdl and wdl + h1WriteSlack (kept while it is).
// Only the sink calls it, so writes and deadline updates do not overlap.
func (c *h1conn) applyWriteDeadline() {
	want := c.wdl.Load()
	if want == 0 {
		if !c.wdlSet.IsZero() {
			c.rwc.SetWriteDeadline(time.Time{})
			c.wdlSet = time.Time{}
		}
		return
	}
	set := c.wdlSet.UnixNano()
	if c.wdlSet.IsZero() || set < want || set > want+int64(h1WriteSlack) {
		c.wdlSet = time.Unix(0, want+int64(h1WriteSlack))
		c.rwc.SetWriteDeadline(c.wdlSet)
	}
}

// noLimit is the read budget outside request headers.
const noLimit = 1<<63 - 1

// serve runs the connection: its TLS handshake, then its request loop.
func (c *h1conn) serve() {
	if tc, ok := c.rwc.(*tls.Conn); ok {
		if serve, handedOff := c.startTLS(tc); !serve {
			c.end(handedOff)
			return
		}
	}
	c.run(true)
}

// end ends the connection: its requests' context, its place in the
// server and, unless it was handed off or hijacked, its socket.
func (c *h1conn) end(handedOff bool) {
	c.cancel()
	c.s.forget(c)
	if !handedOff && !c.isHijacked() {
		c.rwc.Close()
	}
}

// run is the request loop, from the connection's first request (first)
// or from a wait it was parked in. It returns when the connection ends
// or parks.
func (c *h1conn) run(first bool) {
	handedOff, parked := false, false
	defer func() {
		if !parked {
			c.end(handedOff)
		}
	}()
	for {
		c.wdl.Store(0) // a handler's write deadline ends with its response
		c.src.remain = MaxHeaderBytes + h1ReadSlop
		if c.br == nil || c.br.Buffered() == 0 {
			switch c.waitIdle(first) {
			case waitClosed:
				return
			case waitParked:
				parked = true
				return
			}
		}
		c.idle.Store(false)
		c.fresh.Store(false)
		// The header timeout runs from the request's first byte (from
		// the start for the first request: set above). A head that
		// arrived whole needs no deadline: reading it makes no system
		// call (this is the common case, and saves two timer updates
		// per request).
		head, whole := bufferedHead(c.br)
		if !first && !whole {
			c.headerDeadline()
		}
		if first {
			first = false
			// Over TLS, HTTP/2 is negotiated by ALPN (RFC 9113 §3.2):
			// a TLS client that did not ask for h2 and sends the
			// preface gets the HTTP/1.1 answer net/http's server gives.
			if c.tls == nil && c.h2Preface() {
				handedOff = true
				c.handOffH2C()
				return
			}
			head, whole = bufferedHead(c.br) // the preface check may have read more
		}
		req, host, err := c.readRequest(head, whole)
		hitLimit := c.src.remain <= 0
		c.src.remain = noLimit
		if err != nil {
			c.readFailed(err, hitLimit)
			return
		}
		req.TLS = c.tls
		if code, why := checkRequest(req, host); code != 0 {
			c.errorResponse(code, why)
			return
		}
		if !c.serveRequest(req) {
			return
		}
	}
}

// waitIdle waits, with the connection marked idle, for the first byte of
// its next request under the header (first request) or idle deadline:
// waitRequest when it came; waitClosed ends the connection (closed,
// timed out, or shutting down); waitParked: it was parked.
func (c *h1conn) waitIdle(first bool) waitResult {
	c.idle.Store(true)
	if c.s.shutdown.Load() && !first {
		return waitClosed
	}
	if first && c.s.ReadHeaderTimeout > 0 {
		// Before the first request the header timeout runs from the
		// start, as in net/http: a connection that never sends a byte
		// is not kept for the keep-alive timeout.
		c.headerDeadline()
	} else {
		c.idleDeadline()
	}
	// Let the other runnable connections go first: by the time this one
	// reads again its client has often sent the next request, which
	// saves the read that would find nothing and the park and wake-up
	// after it (nginx gets the same effect by handling every ready event
	// before it polls again).
	runtime.Gosched()
	return c.awaitRequest()
}

// handOffH2C passes a cleartext connection that opened with the HTTP/2
// preface to ServeH2 (on this goroutine) or the h2c server, with the
// bytes already read. The HTTP/2
// server's header timeout (WatchH2) runs from when this one started: the
// read deadline set before the first request, less ReadHeaderTimeout.
func (c *h1conn) handOffH2C() {
	var opened time.Time
	if c.s.ReadHeaderTimeout > 0 && !c.rdl.IsZero() {
		opened = c.rdl.Add(-c.s.ReadHeaderTimeout)
	}
	c.src.remain = noLimit
	c.setReadDeadline(time.Time{})
	rc := newReplayConn(c.rwc, c.br, opened)
	c.giveBuffers()
	if c.s.ServeH2 != nil {
		c.s.ServeH2(c.ctx, rc)
		return
	}
	c.s.forget(c)
	c.s.handOff(rc)
}

// readRequest reads the next request, with the fast parser when its head
// (head, whole: from bufferedHead) is all buffered, else with
// http.ReadRequest. The request carries the connection's context; host
// says what its Host fields were, for checkRequest.
func (c *h1conn) readRequest(head []byte, whole bool) (*http.Request, hostFields, error) {
	if whole {
		if r := readRequestFast(c.ctx, c.br, head); r != nil {
			// One Host field (or the parser declines), in r.Host.
			return r, hostInRequest, nil
		}
	}
	// The head is scanned for its framing fields as it goes by: what is
	// buffered (from the request's first byte on), then what c.src
	// reads while http.ReadRequest runs.
	c.scan.reset()
	b, _ := c.br.Peek(c.br.Buffered())
	c.scan.feed(b)
	c.src.scan = &c.scan
	r, err := http.ReadRequest(c.br)
	c.src.scan = nil
	if err != nil {
		return nil, hostInRequest, err
	}
	if err := c.scan.check(r); err != nil {
		return nil, hostInRequest, err
	}
	// textproto accepts spaces in field names ("X A", "Content-Length :"),
	// which net/http's server then refuses; so do we (readRequestFast
	// takes only token names).
	for k := range r.Header {
		if !isToken(k) {
			return nil, hostInRequest, errInvalidFieldName
		}
	}
	host := hostInRequest
	switch {
	case !c.scan.host:
		host = hostMissing
	case c.scan.hostBad:
		host = hostMalformed
	}
	return r.WithContext(c.ctx), host, nil
}

// hostFields is what readRequest saw of a request's Host fields, which
// http.ReadRequest takes out of the header map (and replaces by an
// absolute-form target's authority in r.Host).
type hostFields uint8

const (
	hostInRequest hostFields = iota // at most one field, its value in r.Host unless the target is absolute-form
	hostMissing                     // no Host field
	hostMalformed                   // a Host field validHost refuses
)

// startTLS completes the TLS handshake within ReadHeaderTimeout, as
// net/http does, and hands a connection that negotiated h2 to the HTTP/2
// server. It reports whether the HTTP/1.1 loop should serve the
// connection, and whether it was handed off.
func (c *h1conn) startTLS(tc *tls.Conn) (serve, handedOff bool) {
	tc.SetDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		c.s.Logger.Debug("http1: TLS handshake failed", "remote", c.remote, "err", err)
		return false, false
	}
	tc.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	if st.NegotiatedProtocol == "h2" {
		c.giveBuffers()
		if c.s.ServeH2 != nil {
			c.idle.Store(false)
			c.fresh.Store(false)
			c.s.ServeH2(c.ctx, tc)
		} else {
			c.s.forget(c)
			c.s.handOff(tc)
		}
		return false, true
	}
	c.tls = &st
	return true, false
}

// setReadDeadline sets the connection's read deadline and records it.
func (c *h1conn) setReadDeadline(t time.Time) {
	c.rwc.SetReadDeadline(t)
	c.rdl = t
}

// headerDeadline arms the header timeout (none when ReadHeaderTimeout is
// not positive).
func (c *h1conn) headerDeadline() {
	var t time.Time
	if c.s.ReadHeaderTimeout > 0 {
		t = time.Now().Add(c.s.ReadHeaderTimeout)
	}
	c.setReadDeadline(t)
}

// idleDeadline arms the keep-alive timeout before waiting for a request.
// The deadline is set IdleTimeout/16 late and kept while it is at least
// IdleTimeout away, so a busy connection updates it about once every
// IdleTimeout/16 rather than on every request: an idle connection is
// closed between IdleTimeout and 17/16 × IdleTimeout after its last
// request.
func (c *h1conn) idleDeadline() {
	if c.s.IdleTimeout <= 0 {
		if !c.rdl.IsZero() {
			c.setReadDeadline(time.Time{})
		}
		return
	}
	want, slack := time.Now().Add(c.s.IdleTimeout), c.s.IdleTimeout/16
	if c.rdl.Before(want) || c.rdl.After(want.Add(slack)) { // also when there is none
		c.setReadDeadline(want.Add(slack))
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
	case errors.Is(err, ErrAmbiguousFraming), errors.Is(err, errInvalidFieldName):
		c.errorResponse(http.StatusBadRequest, err.Error())
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

// checkRequest applies net/http's server-side request checks. As in
// net/http's server, the Host checks look at the Host field (host, from
// readRequest), not only at r.Host, which http.ReadRequest takes from an
// absolute-form target: an HTTP/1.1 request without a Host field is
// refused even when its target names a host (RFC 9112 §3.2: a server
// MUST answer 400 to an HTTP/1.1 request that lacks one).
func checkRequest(r *http.Request, host hostFields) (int, string) {
	if r.ProtoMajor != 1 {
		return http.StatusHTTPVersionNotSupported, "unsupported protocol version"
	}
	// http.ReadRequest moved the Host header to r.Host (refusing
	// several) and checked header values; readRequest checked the names.
	// An empty Host with no authority in the target is refused too
	// (net/http accepts it): there is nothing to route by.
	if (host == hostMissing || r.Host == "") && r.ProtoAtLeast(1, 1) && r.Method != http.MethodConnect {
		return http.StatusBadRequest, "missing required Host header"
	}
	if host == hostMalformed || !validHost(r.Host) {
		return http.StatusBadRequest, "malformed Host header"
	}
	return 0, ""
}

// validHost reports whether h is made of the bytes net/http allows in a
// Host header (httpguts.ValidHostHeader, without the x/net dependency):
// RFC 3986's unreserved and sub-delims, '%', ':', '[' and ']'. Not '@':
// a Host with userinfo ("u@x") is refused, as net/http refuses it.
func validHost(h string) bool { return alnumOr(h, "!$%&'()*+,-.:;=[]_~") }

// errorResponse answers with a short text/plain error ("<code> <text>:
// <reason>", the proxy's format) and closes the connection, lingering so
// the answer is not lost to a reset.
func (c *h1conn) errorResponse(code int, reason string) {
	text := http.StatusText(code)
	body := Code3(code) + " " + text + ": " + reason + "\n"
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
	c.setReadDeadline(time.Now().Add(h1LingerTime))
	io.CopyN(io.Discard, c.rwc, h1MaxDrain)
}

// serveRequest runs the handler for r and finishes its response. It
// reports whether the connection may carry another request.
func (c *h1conn) serveRequest(r *http.Request) (keep bool) {
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
		// The body has no deadline, as in net/http: the handler reads it
		// at the pace the backend takes it.
		if !c.rdl.IsZero() {
			c.setReadDeadline(time.Time{})
		}
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
	if gone {
		// The client went away (its request context was cancelled):
		// there is nobody to finish the response for, and a made-up
		// complete response must not be written.
		return false
	}
	w.finish()
	if c.bw.Flush() != nil || gone {
		return false
	}
	keep = !w.closeAfter
	if body != nil && !body.drain() {
		// Unread bytes at close would reset the answer away, whether or
		// not the handler asked to close.
		c.linger()
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
// client is gone, and cancels the request context. A byte an earlier watch
// read (the start of a pipelined request) is held in c.src until the loop
// reads it; while it is, there is no watch, as in net/http (whose
// connReader.startBackgroundRead returns early when it holds a byte): a
// second read would have nowhere to keep its byte.
func (c *h1conn) startWatchLocked() {
	if c.src.hasByte || len(c.src.pend) > 0 {
		// Bytes already taken off the socket come first: a byte read
		// now would be read out of order.
		return
	}
	c.watching = true
	c.watchDone = make(chan struct{})
	// The watch may wait as long as the request runs: no deadline (the
	// idle or header one may still be set). stopWatch records the one it
	// sets to end the watch.
	c.rwc.SetReadDeadline(time.Time{})
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
	c.setReadDeadline(aLongTimeAgo)
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
	// broken: a read failed (malformed chunking, a cut upload, a read
	// deadline): the rest of the stream cannot be trusted or waited for.
	broken bool
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
	switch {
	case err == io.EOF:
		b.eof = true
		b.w.c.bodyEOF()
	case err != nil:
		b.broken = true
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
	c := b.w.c
	if !b.mu.TryLock() {
		// A goroutine the handler left behind (a transport copying the
		// body to a backend that answered early) is in a read, which has
		// no deadline: give it the drain's, or it could hold the body,
		// and this connection, for as long as the client stalls.
		c.setReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
		b.mu.Lock()
	}
	defer b.mu.Unlock()
	b.closed = true
	if b.eof {
		return true
	}
	if b.broken {
		return false // nothing after a failed read is a request
	}
	if b.w.expect100 && !b.w.continued {
		return false // the client may or may not send the body now
	}
	c.setReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
	_, err := io.CopyN(io.Discard, b.rc, h1MaxDrain+1)
	return err == io.EOF
}
