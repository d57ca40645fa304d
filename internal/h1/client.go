package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Transport is a synchronous HTTP/1.1 client for the common case: a
// body-less, non-upgrade request to a cleartext backend. net/http's
// Transport runs a read goroutine and a write goroutine per connection and
// hands every request and response between them over channels; on a small
// machine those handoffs cost more CPU than the proxying itself. Here the
// request's own goroutine writes the request and reads the response on a
// pooled connection, with no handoff. Everything else (request bodies,
// upgrades, TLS, HTTP/2) goes to the fallback net/http Transport.
//
// The request head is written by Request.Write (net/http's rules,
// without building an *http.Request). A response head is first read
// whole into the connection's buffer (awaitHead: all heads of a response,
// 1xx included, share MaxResponseHeaderBytes, as in net/http's
// Transport), then parsed by readResponseFast or http.ReadResponse, so
// framing (Content-Length, chunked, close-delimited, HEAD, 1xx) is the
// standard library's.
//
// Timeouts and cancellation are connection deadlines, not contexts: an
// attempt sets one deadline on its connection. A caller's context is
// watched only once an attempt has waited probeInterval for its response
// (or when the response body has to be read from the network), so short
// requests never register a cancellation callback.
type Transport struct {
	fallback http.RoundTripper
	dialer   net.Dialer
	pools    sync.Map // backend address → *connPool
	// nextSweep is when a request next sweeps every pool (UnixNano).
	nextSweep atomic.Int64
	// now is the clock the probe deadline is armed from; nil means
	// time.Now (tests inject one).
	now func() time.Time
}

// sweepEvery is how often the pools are swept for connections idle past
// BackendIdleTimeout and for pools nobody has used for as long (backends
// removed by a reload, say). A request that finds the sweep due does it;
// there is no background goroutine.
const sweepEvery = time.Minute

// NewTransport returns a Transport: a synchronous keep-alive HTTP/1.1
// client for body-less requests to cleartext backends (Do, and RoundTrip
// for such requests), with fallback for every other request RoundTrip
// gets; nil means http.DefaultTransport. A fallback *http.Transport whose
// HTTP/1.1 connections are SniffConns lets RoundTrip restore the
// Connection header net/http deletes.
func NewTransport(fallback http.RoundTripper) *Transport {
	if fallback == nil {
		fallback = http.DefaultTransport
	}
	t := &Transport{
		fallback: fallback,
		dialer:   net.Dialer{Timeout: BackendDialTimeout, KeepAlive: 30 * time.Second},
	}
	t.nextSweep.Store(time.Now().Add(sweepEvery).UnixNano())
	return t
}

// probeInterval is how long an attempt waits for its response before it
// starts watching its context: a client that goes away during the first
// probeInterval of an attempt is noticed when the interval ends.
const probeInterval = 100 * time.Millisecond

// connPool holds the idle connections to one backend as a stack: the
// most recently used connection is reused first (LIFO), so a small set of
// connections stays warm and surplus ones age out, and the critical
// section is a slice push or pop.
type connPool struct {
	mu   sync.Mutex
	idle []*pconn
	// lastPut is when a connection was last returned; dead marks a pool
	// a sweep removed from the transport: connections returned to it are
	// closed.
	lastPut time.Time
	dead    bool
}

type pconn struct {
	c        net.Conn
	idle     idleCheck
	br       *bufio.Reader
	bw       *bufio.Writer
	lastUsed time.Time
	pool     *connPool
	// poison unblocks the connection's I/O (cancellation); bound once
	// per connection so that attempts do not allocate it.
	poison func()
	// dl is the deadline set on c (read and write).
	dl time.Time
	// req is handed to http.ReadResponse, which needs only the method
	// (HEAD responses have no body). The connection's current attempt
	// owns it.
	req http.Request
}

func (t *Transport) pool(addr string) *connPool {
	if p, ok := t.pools.Load(addr); ok {
		return p.(*connPool)
	}
	p, _ := t.pools.LoadOrStore(addr, &connPool{lastPut: time.Now()})
	return p.(*connPool)
}

func (p *connPool) get(now time.Time) *pconn {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return nil
		}
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		// Checked outside the lock: one non-blocking receive.
		if now.Sub(c.lastUsed) < BackendIdleTimeout && c.br.Buffered() == 0 && c.idle.usableNow() {
			return c
		}
		c.c.Close()
	}
}

func (p *connPool) put(c *pconn) {
	now := time.Now()
	c.lastUsed = now
	var expired *pconn
	p.mu.Lock()
	p.lastPut = now
	if p.dead {
		p.mu.Unlock()
		c.c.Close()
		return
	}
	// The bottom of the stack is the longest idle: age it out here, one
	// per put, so surplus connections of a busy pool do not linger.
	if len(p.idle) > 0 && now.Sub(p.idle[0].lastUsed) >= BackendIdleTimeout {
		expired = p.idle[0]
		p.idle[0] = nil
		p.idle = p.idle[1:]
	}
	if len(p.idle) < MaxIdleConnsPerHost {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if expired != nil {
		expired.c.Close()
	}
	if c != nil {
		c.c.Close()
	}
}

// maybeSweep sweeps the pools when a sweep is due.
func (t *Transport) maybeSweep(now time.Time) {
	next := t.nextSweep.Load()
	if now.UnixNano() < next || !t.nextSweep.CompareAndSwap(next, now.Add(sweepEvery).UnixNano()) {
		return
	}
	t.sweep(now)
}

// sweep closes connections idle for BackendIdleTimeout or more and drops
// the pools left empty that long.
func (t *Transport) sweep(now time.Time) {
	var expired []*pconn
	t.pools.Range(func(addr, v any) bool {
		p := v.(*connPool)
		p.mu.Lock()
		n := 0
		for n < len(p.idle) && now.Sub(p.idle[n].lastUsed) >= BackendIdleTimeout {
			n++
		}
		if n > 0 {
			expired = append(expired, p.idle[:n]...)
			p.idle = append(p.idle[:0], p.idle[n:]...)
			clear(p.idle[len(p.idle):cap(p.idle)])
		}
		if len(p.idle) == 0 && now.Sub(p.lastPut) >= BackendIdleTimeout {
			p.dead = true
			t.pools.CompareAndDelete(addr, p)
		}
		p.mu.Unlock()
		return true
	})
	for _, c := range expired {
		c.c.Close()
	}
}

// fast reports whether req can take the synchronous path.
func fast(req *http.Request) bool {
	return req.URL.Scheme == "http" && (req.Body == nil || req.Body == http.NoBody) &&
		req.Header.Get("Upgrade") == "" && !req.Close
}

// RoundTrip implements http.RoundTripper. The request's context bounds
// the whole exchange, response body included.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !fast(req) {
		// net/http refuses what CheckRequest does, with errors that do
		// not say whose fault it was.
		if err := CheckRequest(req); err != nil {
			return nil, err
		}
		return t.roundTripFallback(req)
	}
	ctx := req.Context()
	d, _ := ctx.Deadline()
	wr := Request{
		Method: req.Method, Host: req.Host, Addr: req.URL.Host,
		Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery,
		Header: req.Header,
	}
	if wr.Host == "" {
		wr.Host = req.URL.Host
	}
	resp, err := t.Do(ctx, &wr, d, d)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	resp.Request = req
	return resp, nil
}

// roundTripFallback sends req with the fallback transport. net/http bounds
// all heads of a response, 1xx included, by its MaxResponseHeaderBytes
// together, as the fast path does (no Got1xxResponse hook is installed:
// one would reset that budget for every 1xx). When the fallback is a
// Transport from NewTransport, whose connections keep the Connection
// header of the response they carry (sniffConn), that header is put back
// where net/http deleted it (see restoreConnection), and an HTTP/1.0
// response with Transfer-Encoding, which net/http reads as if it had
// none, is refused (http10TE). A final response with a field name that
// is not a token is refused like on the fast path.
func (t *Transport) roundTripFallback(req *http.Request) (*http.Response, error) {
	ft := new(fallbackTrace)
	ft.trace.GotConn = ft.gotConn
	resp, err := t.fallback.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), &ft.trace)))
	if err != nil {
		return nil, err
	}
	if ferr := checkFieldNames(resp.Header); ferr != nil {
		resp.Body.Close()
		return nil, BadResponse(ferr)
	}
	if ft.sc != nil && resp.ProtoMajor == 1 {
		if resp.ProtoMinor == 0 && ft.sc.http10TE() {
			resp.Body.Close() // not read to its end: the connection closes
			return nil, BadResponse(errHTTP10TE)
		}
		restoreConnection(resp, ft.sc.connection())
	}
	return resp, nil
}

// fallbackTrace is a fallback request's trace and the connection it got,
// in one allocation (with its hook's).
type fallbackTrace struct {
	trace httptrace.ClientTrace
	sc    *sniffConn
}

func (ft *fallbackTrace) gotConn(info httptrace.GotConnInfo) {
	if c, ok := info.Conn.(*sniffConn); ok {
		c.arm()
		ft.sc = c
	}
}

// Do sends wr, a body-less request, to wr.Addr on a pooled connection
// (dialling one when none is idle) and reads the response head.
// headerDeadline bounds the attempt until the response head has arrived,
// deadline (not before headerDeadline) the response body; zero means none.
// ctx is watched for cancellation (the client going away); its own
// deadline is not looked at. A canceled ctx makes Do fail with ctx.Err().
// A response the transport refuses fails with an error IsBadResponse
// reports. The response body must be read to the end or closed; the
// connection goes back to the pool when it was read to the end.
func (t *Transport) Do(ctx context.Context, wr *Request, headerDeadline, deadline time.Time) (*http.Response, error) {
	p := t.pool(wr.Addr)
	now := time.Now()
	t.maybeSweep(now)
	// A pooled connection may have been closed by the backend while idle;
	// a request that fails on one before any response byte is retried
	// once on a fresh connection (it had no body, so this is safe).
	if c := p.get(now); c != nil {
		resp, err := t.exchange(ctx, c, wr, headerDeadline, deadline, true)
		if err == nil {
			return resp, nil
		}
		if !isCutBeforeSent(err) && (!isNoResponse(err) || !staleConn(err) || !replayable(wr.Method)) {
			return resp, unwrapNoResponse(err)
		}
	}
	resp, err := t.dialExchange(ctx, p, wr, headerDeadline, deadline, true)
	if isCutBeforeSent(err) {
		// Once more, watching ctx from the start: no probe deadline
		// that a second pause could cut.
		resp, err = t.dialExchange(ctx, p, wr, headerDeadline, deadline, false)
	}
	return resp, unwrapNoResponse(err)
}

// dialExchange runs wr on a fresh connection to p's backend (see
// exchange for probe).
func (t *Transport) dialExchange(ctx context.Context, p *connPool, wr *Request, headerDeadline, deadline time.Time, probe bool) (*http.Response, error) {
	dctx := ctx
	if !headerDeadline.IsZero() {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, headerDeadline)
		defer cancel()
	}
	nc, err := t.dialer.DialContext(dctx, "tcp", wr.Addr)
	if err != nil {
		return nil, err
	}
	c := &pconn{c: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 4<<10), pool: p}
	c.idle.init(nc)
	c.poison = func() { nc.SetDeadline(aLongTimeAgo) }
	return t.exchange(ctx, c, wr, headerDeadline, deadline, probe)
}

// noResponse marks a failure before any byte of the response arrived: only
// then may a request be replayed on a fresh connection.
type noResponse struct {
	err error
	// cutBeforeSent: the probe deadline expired before the request was
	// written whole (the goroutine was not scheduled for probeInterval,
	// as on a CPU-starved machine). The backend never got a complete
	// request, so it cannot have acted on it, whatever the method; and
	// it is no backend timeout.
	cutBeforeSent bool
}

func (e noResponse) Error() string { return e.err.Error() }
func (e noResponse) Unwrap() error { return e.err }

func isNoResponse(err error) bool {
	var nr noResponse
	return errors.As(err, &nr)
}

func isCutBeforeSent(err error) bool {
	var nr noResponse
	return errors.As(err, &nr) && nr.cutBeforeSent
}

func unwrapNoResponse(err error) error {
	if err == nil {
		return nil
	}
	var nr noResponse
	if errors.As(err, &nr) {
		return nr.err
	}
	return err
}

// replayable reports whether a body-less request may be sent again after
// a pooled connection turned out dead: only idempotent methods, as
// net/http does (a POST that reached the backend must not run twice).
func replayable(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// staleConn reports an error that means "the idle connection was dead".
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// aLongTimeAgo is a deadline in the past: setting it unblocks pending I/O.
var aLongTimeAgo = time.Unix(1, 0)

// exchange runs one request on c, in stages: send the request, wait
// for the first response byte, read heads until the final one, and
// attach the body. See do. Without probe, ctx is watched from the start
// rather than once the probe deadline expires.
func (t *Transport) exchange(ctx context.Context, c *pconn, wr *Request, headerDeadline, deadline time.Time, probe bool) (*http.Response, error) {
	x := &exchangeState{ctx: ctx, c: c, headerDeadline: headerDeadline, deadline: deadline, watch: ctx.Done() != nil}
	if probe {
		x.armDeadline(t.now)
	} else {
		x.armWatching()
	}
	if err := wr.Write(c.bw); err != nil {
		c.bw.Reset(c.c)
		if x.probeCut(err) {
			return x.fail(noResponse{err: err, cutBeforeSent: true})
		}
		return x.fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return x.fail(noResponse{err: err, cutBeforeSent: x.probeCut(err)})
	}
	if err := x.awaitFirstByte(); err != nil {
		return x.fail(err)
	}
	c.req.Method = wr.Method
	resp, pb, r, err := x.readFinalHead(wr.Method)
	if err != nil {
		return x.fail(err)
	}
	return x.attachBody(resp, pb, r)
}

// exchangeState is one exchange on a connection: the deadline set on it
// (cur: headerDeadline, or the probe deadline while the context is not
// watched yet) and the cancellation callback registered (stop).
type exchangeState struct {
	ctx                      context.Context
	c                        *pconn
	headerDeadline, deadline time.Time
	cur                      time.Time
	watch                    bool        // ctx can be cancelled
	stop                     func() bool // unregisters the cancellation callback
}

// armDeadline sets the connection's deadline for the request and its
// response head: the header deadline, or sooner the probe deadline that
// makes the exchange start watching ctx if the answer is slow.
func (x *exchangeState) armDeadline(clock func() time.Time) {
	x.cur = x.headerDeadline
	if x.watch {
		now := readClock(clock)
		if p := now.Add(probeInterval); x.cur.IsZero() || p.Before(x.cur) {
			x.cur = p
			// A probe deadline left by the previous attempt serves when it
			// is still at least half an interval away: a busy connection
			// updates its deadline about every probeInterval/2, not per
			// request.
			if x.c.dl.After(now.Add(probeInterval/2)) && !x.c.dl.After(x.cur) {
				x.cur = x.c.dl
			}
		}
	}
	x.c.setDeadline(x.cur)
}

// armWatching sets the header deadline and watches ctx from the start.
func (x *exchangeState) armWatching() {
	x.cur = x.headerDeadline
	x.c.setDeadline(x.cur)
	if x.watch {
		x.stop = context.AfterFunc(x.ctx, x.c.poison)
	}
}

// probeCut reports whether err, from writing the request, is the probe
// deadline expiring (not the header deadline, nor ctx ending).
func (x *exchangeState) probeCut(err error) bool {
	return !x.cur.Equal(x.headerDeadline) && isTimeout(err) && x.ctx.Err() == nil
}

// readClock reads clock, or time.Now when it is nil.
func readClock(clock func() time.Time) time.Time {
	if clock != nil {
		return clock()
	}
	return time.Now()
}

// fail closes the connection and returns err, or ctx's error when ctx
// ended.
func (x *exchangeState) fail(err error) (*http.Response, error) {
	if x.stop != nil {
		x.stop()
	}
	x.c.c.Close()
	if cerr := x.ctx.Err(); cerr != nil {
		return nil, cerr
	}
	return nil, err
}

// awaitFirstByte waits for the first response byte; when the probe
// deadline expires first, it watches the context from then on.
func (x *exchangeState) awaitFirstByte() error {
	for {
		_, err := x.c.br.Peek(1)
		if err == nil {
			return nil
		}
		if x.cur.Equal(x.headerDeadline) || !isTimeout(err) {
			return noResponse{err: err}
		}
		if x.ctx.Err() != nil {
			return err
		}
		x.cur = x.headerDeadline
		x.c.setDeadline(x.cur)
		x.stop = context.AfterFunc(x.ctx, x.c.poison)
	}
}

// readFinalHead reads response heads until the final one (1xx
// informational heads are discarded, as net/http's Transport does) and
// returns it, its body's pooled wrapper and the reader the body follows
// in. All heads share one size budget.
func (x *exchangeState) readFinalHead(method string) (*http.Response, *pooledBody, *bufio.Reader, error) {
	budget := MaxResponseHeaderBytes
	// r is c.br until a head too big for it is read through a larger
	// reader stacked on it (awaitHead), which may have buffered what
	// follows: from then on every head and the body are read through it.
	r := x.c.br
	for {
		n := headLen(buffered(r), 0)
		if n == 0 {
			// The response has started: the rest of its head gets the
			// header deadline, not the probe's.
			if !x.cur.Equal(x.headerDeadline) {
				x.cur = x.headerDeadline
				x.c.setDeadline(x.cur)
			}
			var err error
			if r, n, err = awaitHead(r, budget); err != nil {
				return nil, nil, nil, err
			}
		}
		if n > budget {
			return nil, nil, nil, BadResponse(errHeadTooLarge)
		}
		budget -= n
		resp, pb, err := x.parseHead(r, buffered(r)[:n], method)
		if err != nil {
			return nil, nil, nil, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue // within what is left of the budget
		}
		return resp, pb, r, nil
	}
}

// parseHead parses one buffered response head: through the fast path
// when it is the connection's own reader and a head it takes, else
// through net/http with the checks net/http does not make.
func (x *exchangeState) parseHead(r *bufio.Reader, head []byte, method string) (*http.Response, *pooledBody, error) {
	if r == x.c.br && bytes.HasSuffix(head, []byte(crlf2)) {
		if fr := readResponseFast(x.c.br, head, method); fr != nil {
			return &fr.resp, &fr.pooled, nil
		}
	}
	conn := connectionValues(head)
	te10 := http10TE(head)
	// The whole head is buffered: an error here is the response's, not
	// the connection's.
	resp, err := http.ReadResponse(r, &x.c.req)
	if err != nil {
		return nil, nil, BadResponse(err)
	}
	restoreConnection(resp, conn)
	if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		return resp, nil, nil
	}
	// textproto accepts a space in a field name ("Content-Length :
	// 5"); readResponseFast takes only tokens. It takes no HTTP/1.0
	// response either, and http.ReadResponse ignores an HTTP/1.0 one's
	// Transfer-Encoding.
	if err := checkFieldNames(resp.Header); err != nil {
		return nil, nil, BadResponse(err)
	}
	if te10 {
		return nil, nil, BadResponse(errHTTP10TE)
	}
	return resp, new(pooledBody), nil
}

// attachBody wraps the final response's body for reuse of the
// connection. A body already in the buffer needs neither a deadline nor
// cancellation; one still to be read gets both.
func (x *exchangeState) attachBody(resp *http.Response, pb *pooledBody, r *bufio.Reader) (*http.Response, error) {
	resp.Request = nil
	inBuffer := resp.Body == http.NoBody ||
		(resp.ContentLength >= 0 && int64(r.Buffered()) >= resp.ContentLength)
	if !inBuffer {
		if !x.cur.Equal(x.deadline) {
			if x.stop != nil && !x.stop() {
				resp.Body.Close()
				x.stop = nil
				return x.fail(context.Canceled)
			}
			x.c.setDeadline(x.deadline)
			x.stop = nil
		}
		if x.stop == nil && x.watch {
			x.stop = context.AfterFunc(x.ctx, x.c.poison)
		}
	}
	// A head too big for c.br was read through a larger reader, which
	// may hold bytes c.br no longer has: such a connection is not
	// reused.
	*pb = pooledBody{rc: resp.Body, c: x.c, stop: x.stop, reuse: !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols && r == x.c.br}
	resp.Body = pb
	return resp, nil
}

// errHeadTooLarge fails an attempt whose response heads (any 1xx and the
// final one together, as net/http's Transport counts them) exceed
// MaxResponseHeaderBytes: a badResponse error (502 to the client).
var errHeadTooLarge = errors.New("response headers exceed 128 KiB")

// badResponseError marks a backend response the proxy refuses (malformed,
// over a limit, switching protocols unasked), as opposed to the
// connection failing. A proxy answers 502.
type badResponseError struct{ err error }

func (e badResponseError) Error() string { return e.err.Error() }
func (e badResponseError) Unwrap() error { return e.err }

// BadResponse wraps err as the error of a response refused because of
// what the backend sent (a proxy answers 502); IsBadResponse reports it.
func BadResponse(err error) error { return badResponseError{err} }

// IsBadResponse reports an attempt that failed because of what the
// backend sent: BadResponse errors (Transport's included), and net/http Transport's header limit
// and malformed-response errors, HTTP/1.1 and HTTP/2 (which it does not
// export).
func IsBadResponse(err error) bool {
	if err == nil {
		return false
	}
	var be badResponseError
	var pe textproto.ProtocolError
	if errors.As(err, &be) || errors.As(err, &pe) {
		return true
	}
	// Parts of the errors net/http's Transport returns for a response
	// it cannot accept (ReadResponse's and readTransfer's; for HTTP/2,
	// protocol errors, header lists over the limit included).
	msg := err.Error()
	for _, m := range [...]string{
		"server response headers exceeded",
		"malformed HTTP",
		"bad Content-Length",
		"multiple Content-Length",
		"transfer encoding",
		"Transfer-Encoding",
		"PROTOCOL_ERROR",
		"header list larger",
		"malformed response",
	} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// checkFieldNames returns an error wrapping errInvalidFieldName when a
// name in h is not a token: textproto accepts names with spaces
// ("Content-Length : 5"), which would then not be taken for the field
// they look like.
func checkFieldNames[H ~map[string][]string](h H) error {
	for k := range h {
		if !isToken(k) {
			return fmt.Errorf("%w in response: %q", errInvalidFieldName, k)
		}
	}
	return nil
}

// errHTTP10TE fails an attempt whose response is HTTP/1.0 with a
// Transfer-Encoding field: a badResponse error (502 to the client).
var errHTTP10TE = errors.New("HTTP/1.0 response with Transfer-Encoding: faulty framing")

// http10TE reports a message head (the status line first) of an HTTP/1.0
// response with a Transfer-Encoding field. RFC 9112 §6.1: HTTP/1.0 has no
// transfer codings, so a recipient must treat such a message's framing
// as faulty (and close the connection); http.ReadResponse ignores the
// field and would read the chunk framing as the body.
func http10TE(head []byte) bool {
	return bytes.HasPrefix(head, []byte("HTTP/1.0 ")) && fieldValues(head, "transfer-encoding:") != nil
}

// connectionValues returns the values of the Connection fields of a
// message head (lines ending in LF or CRLF, the start line first), or nil.
func connectionValues(head []byte) []string { return fieldValues(head, "connection:") }

// fieldValues returns the values of the fields of a message head named
// name (lower case, with its colon), or nil.
func fieldValues(head []byte, name string) []string {
	var vv []string
	_, head, _ = bytes.Cut(head, []byte("\n")) // the start line
	for len(head) > 0 {
		var line []byte
		line, head, _ = bytes.Cut(head, []byte("\n"))
		if len(line) >= len(name) && bytes.EqualFold(line[:len(name)], []byte(name)) {
			vv = append(vv, trimOWS(string(bytes.TrimSuffix(line[len(name):], []byte("\r")))))
		}
	}
	return vv
}

// restoreConnection puts back the Connection header that
// http.ReadResponse deletes from an HTTP/1.1 response when it says
// "close": without it, the fields it also lists would be forwarded as if
// they were end-to-end. conn is from connectionValues.
func restoreConnection(resp *http.Response, conn []string) {
	if len(conn) > 0 && resp.Header["Connection"] == nil {
		resp.Header["Connection"] = conn
	}
}

// buffered returns the bytes buffered in r without reading.
func buffered(r *bufio.Reader) []byte {
	b, _ := r.Peek(r.Buffered())
	return b
}

// headLen returns the length of the message head at the start of b,
// through the empty line that ends it (CRLF or bare LF, as textproto
// reads lines), or 0 when b does not hold all of it. from is where to
// start looking (a previous call's len(b), less the separator's length).
func headLen(b []byte, from int) int {
	if from > len(b) {
		return 0
	}
	end := 0
	if i := bytes.Index(b[from:], []byte(crlfEnd)); i >= 0 {
		end = from + i + len(crlfEnd)
	}
	stop := len(b)
	if end > 0 {
		stop = end
	}
	// A bare-LF empty line earlier than the CRLF one ends the head there.
	if i := bytes.Index(b[from:stop], []byte(lfEnd)); i >= 0 {
		end = from + i + len(lfEnd)
	}
	return end
}

// crlfEnd and lfEnd end a message head: a line end, then an empty line.
const (
	crlfEnd = "\n\r\n"
	lfEnd   = "\n\n"
)

// awaitHead reads until the message head at the start of br is complete,
// and returns the reader that holds it whole and its length. A head
// longer than br's buffer continues into a larger reader stacked on br;
// one longer than limit fails with a badResponse error, having read at
// most limit bytes (plus one buffer fill).
func awaitHead(br *bufio.Reader, limit int) (*bufio.Reader, int, error) {
	r, from := br, 0
	for {
		b := buffered(r)
		if n := headLen(b, from); n > 0 {
			return r, n, nil
		}
		if len(b) >= limit {
			return nil, 0, BadResponse(errHeadTooLarge)
		}
		from = max(len(b)-len(crlfEnd), 0)
		if len(b) == r.Size() {
			r, from = bufio.NewReaderSize(r, limit), 0
			continue
		}
		if _, err := r.Peek(len(b) + 1); err != nil {
			return nil, 0, err
		}
	}
}

// setDeadline sets c's read and write deadline, unless it is set already.
func (c *pconn) setDeadline(t time.Time) {
	if !t.Equal(c.dl) {
		c.c.SetDeadline(t)
		c.dl = t
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
	stop  func() bool // nil when no cancellation callback is registered
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
	// poisoned the deadline: then the connection cannot be reused. The
	// next attempt on a reused connection sets its own deadline.
	if (b.stop == nil || b.stop()) && eof && b.reuse && b.c.br.Buffered() == 0 {
		b.c.pool.put(b.c)
		return
	}
	b.c.c.Close()
}
