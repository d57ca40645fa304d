package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/plan"
)

// exchange is one client request on its way to a backend service: the
// outbound request as prepared once, and the attempts made for it.
type exchange struct {
	h   *handler
	w   http.ResponseWriter
	r   *http.Request
	svc *plan.Service
	rec *Record // nil when no one records requests

	trace traceHeaders // trace context headers to add
	hp    headerPlan
	hdr   http.Header // headers towards the backend, nil until needed (header)
	host  string      // Host towards the backend
	// hostSet: a route's urlRewrite.hostRewrite chose host, which then
	// wins over an endpoint's DNS name; mirror: a mirrored copy.
	hostSet, mirror bool
	path            string
	rawPath         string
	upgrade         string       // Upgrade protocol, "" when not an upgrade
	body            *trackedBody // nil for a body-less request
	timeout         time.Duration
	policy          retryPolicy

	// deadline ends the exchange (now + timeout when serve starts, or
	// when the security policies started reading the body). The
	// fast transport takes it as a connection deadline; ctx, a context
	// with this deadline, is built only for the other transports.
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelFunc

	// Two layers (layers.go). At an EDGE frontend (edgeMode): layer is
	// the regional layer the next attempt goes through (nil: the
	// endpoint directly), layerRID and layerRegion its region, tried the
	// regions already tried, edgeCookie an affinity cookie to pass on.
	// At a REGIONAL frontend: edge is what the trusted edge said (nil
	// for any other request), lastEP the last attempt's endpoint.
	edgeMode    bool
	layer       *layerPool
	layerRID    int
	layerRegion string
	tried       []bool
	edgeCookie  string
	edge        *edgeInfo
	lastEP      *plan.Endpoint
}

// header returns the headers towards the backend. When the handler left
// hdr nil (no upgrade, no header plan), they are built from the client's.
func (x *exchange) header() http.Header {
	if x.hdr == nil {
		x.hdr = x.h.outHeader(x.r, x.upgrade, x.edge)
		x.trace.apply(x.hdr)
	}
	return x.hdr
}

// context returns the exchange's context: the client request's, ending at
// the deadline. It is built on first use.
func (x *exchange) context() context.Context {
	if x.ctx == nil {
		x.ctx, x.cancel = context.WithDeadline(x.r.Context(), x.deadline)
	}
	return x.ctx
}

// done reports whether the exchange is over: its deadline passed or its
// client went away.
func (x *exchange) done() bool {
	return !time.Now().Before(x.deadline) || x.r.Context().Err() != nil
}

// fastPath reports whether an attempt can use the handler's fast
// transport directly: a body-less, non-upgrade request to an HTTP backend.
func (x *exchange) fastPath(ep *plan.Endpoint) bool {
	if ep.Host != "" || ep.TLS {
		return false // named or serverless endpoints: endpointTransport
	}
	if x.h.fast == nil || x.body != nil || x.upgrade != "" || len(x.hdr["Upgrade"]) > 0 {
		return false
	}
	switch x.svc.Protocol {
	case "HTTPS", "HTTP2", "H2C":
		return false
	}
	return true
}

// trackedBody forwards the client's request body and records whether the
// transport has started reading it. Close is passed on only once reading
// started, so that a request whose connection failed before any byte was
// sent can be retried with the same body. The server closes the body when
// the handler returns in any case.
//
// It also records a read error of the client's body (malformed chunking,
// an upload cut short by a half-close or reset): an attempt that failed
// because of it is the client's fault, not the backend's.
//
// It passes on the client's trailers that h1.AllowedTrailer admits:
// trailer is the outbound request's Trailer map, announcing the admitted
// names the client declared, and filled from req.Trailer, which net/http
// fills when the body ends. Both are nil when the request has no
// Trailer field: then no trailer is passed on (over HTTP/2, net/http's
// server keeps only declared ones anyway).
type trackedBody struct {
	rc        io.ReadCloser
	n         atomic.Int64 // bytes read
	touched   atomic.Bool
	clientErr atomic.Pointer[error] // first read error other than io.EOF
	req       *http.Request
	trailer   http.Header
}

// newTrackedBody wraps the body of r, a request with a body.
func newTrackedBody(r *http.Request) *trackedBody {
	b := &trackedBody{rc: r.Body}
	if r.Trailer != nil {
		b.req, b.trailer = r, make(http.Header, len(r.Trailer))
		for k := range r.Trailer {
			if h1.AllowedTrailer(k) {
				b.trailer[k] = nil
			}
		}
	}
	return b
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.touched.Store(true)
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	if err == io.EOF && b.trailer != nil {
		// The transport reads the trailer map after the body, in this
		// goroutine.
		for k, vv := range b.req.Trailer {
			if h1.AllowedTrailer(k) {
				b.trailer[k] = vv
			}
		}
	}
	if err != nil && err != io.EOF {
		// Returned wrapped, so that a transport that passes it on says
		// whose fault it was.
		err = &clientBodyError{err: err}
		b.clientErr.CompareAndSwap(nil, &err)
	}
	return n, err
}

// failed returns the client body's read error, nil when there was none.
func (b *trackedBody) failed() error {
	if b == nil {
		return nil
	}
	if p := b.clientErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (b *trackedBody) Close() error {
	if !b.touched.Load() {
		return nil
	}
	return b.rc.Close()
}

// outHeader builds the headers sent to the backend: the client's, without
// hop-by-hop headers and Expect, plus X-Forwarded-For, X-Forwarded-Proto
// and Via. At a regional layer (ei not nil) the client, the address it
// reached and its scheme are the ones the edge gave.
func (h *handler) outHeader(r *http.Request, upgrade string, ei *edgeInfo) http.Header {
	out := make(http.Header, len(r.Header)+4)
	h1.CopyHeaders(out, r.Header)
	// The proxy answers "Expect: 100-continue" itself (the server sends
	// 100 Continue when the body is first read, i.e. once the request is
	// on its way to a backend), so it is not sent on.
	delete(out, "Expect")
	if te := r.Header["Te"]; len(te) > 0 && h1.Listed(te, "trailers") {
		out["Te"] = h.teTrailers
	}
	if upgrade != "" {
		out["Connection"] = []string{"Upgrade"}
		out["Upgrade"] = r.Header["Upgrade"]
	}
	client, lb, scheme := hostOnly(r.RemoteAddr), localIP(r), h.scheme(r)
	if ei != nil {
		client, scheme = ei.client, ei.proto
		if ei.lb != "" {
			lb = ei.lb
		}
	}
	out["X-Forwarded-For"] = []string{h1.ForwardedFor(r.Header["X-Forwarded-For"], client, lb)}
	if scheme == "https" {
		out["X-Forwarded-Proto"] = h.protoHTTPS
	} else {
		out["X-Forwarded-Proto"] = h.protoHTTP
	}
	out["Via"] = h1.AppendVia(r.Header["Via"], h.via)
	if _, ok := out["User-Agent"]; !ok {
		out["User-Agent"] = h.emptyUA // keep Go from adding its own
	}
	return out
}

// transportFor picks the transport and URL scheme of a backend service.
// namedKey keys handler.named.
type namedKey struct {
	name string
	h2   bool
}

// endpointTransport is transportFor for one endpoint: an endpoint named
// by DNS gets its name's transport (TLS server name = the name), and a
// serverless one (Endpoint.TLS) HTTPS whatever the service's protocol.
func (h *handler) endpointTransport(svc *plan.Service, ep *plan.Endpoint) (http.RoundTripper, string) {
	rt, scheme := h.transportFor(svc)
	if ep.Host == "" && !ep.TLS {
		return rt, scheme
	}
	if ep.TLS {
		scheme = "https"
	}
	if ep.Host == "" || scheme != "https" {
		if ep.TLS && rt == h.h2 && svc.Protocol == "H2C" {
			return h.h2, scheme
		}
		return rt, scheme
	}
	key := namedKey{ep.Host, svc.Protocol == "HTTP2" || svc.Protocol == "H2C"}
	if t, ok := h.named.Load(key); ok {
		return t.(http.RoundTripper), scheme
	}
	var nt http.RoundTripper = newNamedTransport(ep.Host, key.h2)
	if !key.h2 {
		nt = h1.NewTransport(nt.(*http.Transport)) // strips as h.transport does
	}
	t, _ := h.named.LoadOrStore(key, nt)
	return t.(http.RoundTripper), scheme
}

func (h *handler) transportFor(svc *plan.Service) (http.RoundTripper, string) {
	switch svc.Protocol {
	case "HTTPS":
		return h.transport, "https"
	case "HTTP2":
		return h.h2, "https"
	case "H2C":
		return h.h2, "http"
	}
	return h.transport, "http"
}

// attempt is one try: the response (nil on failure) and the outcome.
type attempt struct {
	resp   *http.Response
	out    Outcome
	cancel context.CancelFunc // releases the attempt's context, may be nil
}

// release closes the response body and the attempt's context.
func (at *attempt) release() {
	if at.resp != nil {
		at.resp.Body.Close()
	}
	if at.cancel != nil {
		at.cancel()
	}
}

// discard drains a little of an unused response so its connection can be
// reused, then releases it.
func (at *attempt) discard(buf []byte) {
	if at.resp != nil {
		for range 2 {
			if _, err := at.resp.Body.Read(buf); err != nil {
				break
			}
		}
	}
	at.release()
}

// newRequest builds the outbound request to an endpoint.
func (x *exchange) newRequest(ctx context.Context, scheme string, ep *plan.Endpoint) *http.Request {
	out := &http.Request{
		Method:     x.r.Method,
		URL:        &url.URL{Scheme: scheme, Host: ep.Addr, Path: x.path, RawPath: x.rawPath, RawQuery: x.r.URL.RawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     x.header(),
		Host:       x.host,
	}
	if ep.Host != "" && !x.hostSet {
		// The name the endpoint was resolved from (a mirror keeps its
		// -shadow suffix).
		out.Host = ep.Host
		if x.mirror {
			out.Host += "-shadow"
		}
	}
	if x.body != nil {
		out.Body = x.body
		out.ContentLength = x.r.ContentLength
		out.Trailer = x.body.trailer
	}
	return out.WithContext(ctx)
}

// checkRequest refuses, with an error wrapping h1.ErrInvalidRequest, a
// request that rt would refuse for what it holds. h1.Transport does this
// itself (its RoundTrip calls h1.CheckRequest); net/http's transports
// (the HTTP/2 one) refuse such a request with errors that do not say
// whose fault it was, so it is checked here for them.
func checkRequest(rt http.RoundTripper, req *http.Request) error {
	if _, ok := rt.(*h1.Transport); ok {
		return nil
	}
	return h1.CheckRequest(req)
}

// errPerTryTimeout is the error of an attempt cut by perTryTimeout.
var errPerTryTimeout = errors.New("per-try timeout")

// try sends the request to ep once, bounded by the exchange's deadline
// and perTry.
func (x *exchange) try(ep *plan.Endpoint, perTry time.Duration) attempt {
	if x.layer != nil {
		at := attempt{out: Outcome{Service: x.svc}}
		x.tryLayer(&at)
		return at
	}
	at := attempt{out: Outcome{Endpoint: ep, Service: x.svc}}
	defer x.countInflight(ep).Done(ep) // in-flight count (LEAST_REQUEST, dashboard)
	if x.fastPath(ep) {
		x.tryFast(&at, ep, perTry)
		x.checkStatus(&at)
		return at
	}
	ctx := x.context()
	var timer *time.Timer
	if perTry > 0 {
		ctx, at.cancel = context.WithCancel(ctx)
		timer = time.AfterFunc(perTry, at.cancel)
	}
	rt, scheme := x.h.endpointTransport(x.svc, ep)
	req := x.newRequest(ctx, scheme, ep)
	if err := checkRequest(rt, req); err != nil {
		at.out.Err, at.out.ClientFault = err, true
		if timer != nil {
			timer.Stop()
		}
		return at
	}
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	at.out.Latency = time.Since(start)
	if timer != nil && !timer.Stop() {
		// The per-try timer fired: whatever arrived, this try timed out.
		if resp != nil {
			resp.Body.Close()
			resp = nil
		}
		err = errPerTryTimeout
		at.out.Timeout = true
	}
	if err != nil {
		if cerr := x.body.failed(); cerr != nil {
			// Reading the client's body failed: whatever the transport
			// made of it, the backend is not to blame.
			at.out.Err, at.out.ClientFault = cerr, true
			return at
		}
		at.out.Err = err
		if errors.Is(err, h1.ErrInvalidRequest) {
			at.out.ClientFault = true
			return at
		}
		at.out.ConnectFailure = isConnectFailure(err)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err) {
			at.out.Timeout = true
		}
		return at
	}
	at.resp = resp
	at.out.Status = resp.StatusCode
	x.checkStatus(&at)
	return at
}

// checkStatus turns a response the proxy must not relay into a failed
// attempt (502, a backend fault): a status code below 100, which is not
// HTTP, and a 101 Switching Protocols the client did not ask for, or to
// another protocol than it asked for (relaying it would hand the client's
// connection to whatever the backend chose).
func (x *exchange) checkStatus(at *attempt) {
	resp := at.resp
	if resp == nil || resp.StatusCode >= 100 && resp.StatusCode != http.StatusSwitchingProtocols {
		return
	}
	var err error
	switch got := resp.Header.Get("Upgrade"); {
	case resp.StatusCode < 100:
		err = errors.New("status code " + strconv.Itoa(resp.StatusCode) + " is below 100")
	case x.upgrade == "":
		err = errUnsolicited101
	case !strings.EqualFold(got, x.upgrade):
		err = errors.New("backend switched to protocol " + strconv.Quote(got) + ", not " + strconv.Quote(x.upgrade))
	default:
		return
	}
	resp.Body.Close()
	at.resp = nil
	at.out.Status = 0
	at.out.Err = h1.BadResponse(err)
}

// errUnsolicited101 is the error of a 101 response to a request that
// asked for no upgrade.
var errUnsolicited101 = errors.New("101 Switching Protocols to a request that asked for no upgrade")

// tryFast is try on the fast transport: the deadlines are connection
// deadlines and no context is built.
func (x *exchange) tryFast(at *attempt, ep *plan.Endpoint, perTry time.Duration) {
	wr := h1.Request{
		Method: x.r.Method, Addr: ep.Addr, Host: x.host,
		Path: x.path, RawPath: x.rawPath, RawQuery: x.r.URL.RawQuery,
		Header: x.hdr,
	}
	if wr.Header == nil {
		wr.Forward = h1.Forward{
			Header: x.r.Header, ClientIP: hostOnly(x.r.RemoteAddr), LBIP: localIP(x.r),
			Proto: x.h.scheme(x.r), Via: x.h.via[0], Add: x.trace.add,
		}
		if ei := x.edge; ei != nil {
			wr.Forward.ClientIP, wr.Forward.Proto = ei.client, ei.proto
			if ei.lb != "" {
				wr.Forward.LBIP = ei.lb
			}
		}
	}
	if wr.Host == "" {
		wr.Host = ep.Addr
	}
	start := time.Now()
	headerDeadline := x.deadline
	if perTry > 0 {
		if d := start.Add(perTry); d.Before(headerDeadline) {
			headerDeadline = d
		}
	}
	resp, err := x.h.fast.Do(x.r.Context(), &wr, headerDeadline, x.deadline)
	end := time.Now()
	at.out.Latency = end.Sub(start)
	if err != nil {
		at.out.Err = err
		switch {
		case errors.Is(err, h1.ErrInvalidRequest):
			// Refused before sending: the request's fault.
			at.out.ClientFault = true
		case !end.Before(headerDeadline) && headerDeadline.Before(x.deadline):
			// The per-try timeout expired, whatever the error says.
			at.out.Err = errPerTryTimeout
			at.out.Timeout = true
		default:
			at.out.ConnectFailure = isConnectFailure(err)
			at.out.Timeout = !end.Before(x.deadline) || isTimeout(err)
		}
		return
	}
	at.resp = resp
	at.out.Status = resp.StatusCode
}

// serve forwards the request, retrying per policy (forward), and writes
// the answer (finalize).
func (x *exchange) serve(ep *plan.Endpoint) {
	if x.deadline.IsZero() {
		x.deadline = time.Now().Add(x.timeout)
	}
	if x.body != nil {
		// The client's body must arrive within the exchange's time: a
		// client that stalls its upload fails its own read at the
		// deadline (a client fault, 408) rather than leaving the attempt
		// to time out against the backend.
		_ = http.NewResponseController(x.w).SetReadDeadline(x.deadline)
	}
	defer func() {
		if x.cancel != nil {
			x.cancel()
		}
	}()
	var at attempt
	x.forward(&at, ep)
	defer at.release()
	x.finalize(&at)
}

// forward makes the attempts, the first to ep and each retry to a fresh
// pick, and leaves the last in at.
func (x *exchange) forward(at *attempt, ep *plan.Endpoint) {
	for n := 0; ; n++ {
		*at = x.try(ep, x.policy.PerTry)
		x.lastEP = at.out.Endpoint
		if at.resp != nil && at.out.Endpoint != nil {
			x.observeLoad(at)
		}
		x.h.observe(at.out)
		if x.rec != nil {
			x.rec.noteAttempt(&at.out)
		}
		if n >= x.policy.Retries || x.done() || !x.policy.retriable(at, x.body) {
			return
		}
		next := x.repick(ep)
		if next == nil {
			return
		}
		bp := x.h.bufs.Get().(*[]byte)
		at.discard(*bp)
		x.h.bufs.Put(bp)
		ep = next
	}
}

// observeLoad counts the load report of at's response, if it carries
// one, for its backend's measured capacity.
func (x *exchange) observeLoad(at *attempt) {
	if _, ok := at.resp.Header[hdrLoadMetrics]; !ok {
		return
	}
	if snap := x.h.cfg.Snapshot(); snap != nil && snap.Plan != nil {
		if svc := at.out.Service; svc != nil && svc.ID < len(snap.Plan.Services) && snap.Plan.Services[svc.ID] == svc {
			snap.Loads.observe(svc, at.out.Endpoint, at.resp.Header)
		}
	}
}

// finalize writes the answer of the last attempt at: the backend's
// response, the tunnel of an accepted upgrade, or the failure.
func (x *exchange) finalize(at *attempt) {
	if x.rec != nil && x.body != nil {
		x.rec.RequestSize += x.body.n.Load()
	}
	if at.resp == nil {
		x.fail(at)
		return
	}
	if at.resp.StatusCode == http.StatusSwitchingProtocols && x.upgrade != "" {
		x.h.tunnel(x, at.resp)
		return
	}
	x.respond(at.resp)
}

// repick chooses the endpoint for a retry: the same backend service, from
// a fresh snapshot (so health changes are seen), avoiding the endpoint
// that failed. It returns nil when the service cannot serve.
func (x *exchange) repick(avoid *plan.Endpoint) *plan.Endpoint {
	snap := x.h.cfg.Snapshot()
	if snap == nil || snap.Plan == nil || snap.View == nil {
		return nil
	}
	svc := snap.Plan.ServiceByName[x.svc.Name]
	if svc == nil {
		return nil
	}
	if x.edgeMode && x.layer != nil {
		// The attempt went through a regional layer, which retried
		// inside its region: the edge's retry goes to another region.
		ep, _ := x.repickEdge(snap, svc)
		return ep
	}
	var d engine.Decision
	if x.edge != nil {
		d = snap.View.PickExceptInRegion(svc.ID, x.h.regionID(snap.Plan), x.h.rand(), avoid)
	} else {
		d = snap.View.PickExcept(svc.ID, x.h.client(snap.Plan, x.r), x.h.rand(), avoid)
	}
	if d.Status != 0 {
		return nil
	}
	x.svc = svc
	if x.rec != nil {
		x.rec.Service, x.rec.Backend = svc, d.Backend
	}
	return d.Endpoint
}

// fail answers a request whose last attempt got no response: 400 with
// "Connection: close" when the client failed to deliver its body, 504
// after a timeout, 502 when the backend's response was unacceptable
// (malformed, over a size limit), else 503 (Google's code for connect
// failures and resets).
//
// A client body error is answered even when the request context has
// ended (a client that half-closed inside its upload can still read the
// answer), and the answer closes the connection: the bytes after a body
// that went wrong cannot be trusted as the next request (RFC 9112 §7.1,
// §8), and net/http's server, with EnableFullDuplex, would otherwise read
// on. Any other failure with the client gone aborts the handler
// (http.ErrAbortHandler: both server loops close the connection without
// a response), so the server cannot answer an implicit 200 for it.
func (x *exchange) fail(at *attempt) {
	o := &at.out
	if !o.ClientFault && x.r.Context().Err() != nil {
		if x.rec != nil {
			x.rec.Details = sdClientGone
		}
		panic(http.ErrAbortHandler) // the client is gone; nobody to answer
	}
	// The client gets a neutral body and a statusDetails token; the
	// endpoint and the error are for the log only.
	var details string
	code := http.StatusServiceUnavailable
	switch {
	case o.ClientFault && errors.Is(o.Err, h1.ErrInvalidRequest):
		code, details = http.StatusBadRequest, sdInvalidRequest
	case o.ClientFault:
		code, details = http.StatusBadRequest, sdBadRequestBody
		if errors.Is(o.Err, os.ErrDeadlineExceeded) || isTimeout(o.Err) {
			code = http.StatusRequestTimeout // the client's body did not arrive in time
		}
		x.w.Header().Set("Connection", "close")
	case o.Timeout && !o.ConnectFailure:
		code, details = http.StatusGatewayTimeout, sdBackendTimeout
	case o.ConnectFailure:
		details = sdFailedToConnect
	case h1.IsBadResponse(o.Err):
		code, details = http.StatusBadGateway, sdBackendCorrupted
	default:
		details = sdBackendClosed
	}
	if x.edge != nil {
		x.markRegional(x.w.Header(), details)
	}
	lbAnswer(x.rec, x.w, code, details, "")
	x.h.log.Debug("backend attempt failed", "service", x.svc.Name, "endpoint", o.endpointAddr(), "regionalLayer", x.layerRegion, "status", code, "details", details, "err", o.Err)
}

// respond copies the backend response to the client, streaming the body.
func (x *exchange) respond(resp *http.Response) {
	w := x.w
	dst := w.Header()
	keepSetCookie(dst, resp.Header) // the affinity cookie survives the copy
	h1.CopyHeaders(dst, resp.Header)
	switch {
	case x.edge != nil:
		x.markRegional(dst, sdSentByBackend)
	case x.edgeMode:
		stripInternal(dst) // a backend's, when the edge reached it directly
	}
	dst["Via"] = h1.AppendVia(resp.Header["Via"], x.h.via)
	x.hp.response(dst)
	if _, ok := dst["Content-Type"]; !ok {
		// A proxy does not invent a Content-Type (RFC 9110 §8.3: a
		// recipient may sniff, an intermediary passes on what the
		// origin said): a nil entry stops the server from sniffing one
		// from the body and writes nothing (net/http's convention,
		// which h1.Server follows).
		dst["Content-Type"] = nil
	}
	if len(resp.Trailer) > 0 {
		announceTrailers(dst, resp.Trailer)
	}
	// The exchange deadline also bounds writing to the client, so that a
	// client that does not read cannot hold the backend connection (and
	// this goroutine) past the timeout; a write still blocked at the
	// deadline fails and the stream is aborted like a late backend.
	if wd, ok := w.(writeDeadliner); ok {
		wd.SetWriteDeadline(x.deadline)
	}
	w.WriteHeader(resp.StatusCode)
	rec := x.rec
	if rec != nil {
		rec.Status, rec.Details = resp.StatusCode, sdSentByBackend
	}

	flush := resp.ContentLength < 0 || isEventStream(resp.Header)
	n, err := x.h.copyBody(w, resp.Body, flush)
	if rec != nil {
		rec.ResponseSize = n
	}
	if err != nil {
		if errors.Is(err, h1.ErrClientGone) {
			if rec != nil {
				rec.Details = sdClientGoneLater
			}
			return
		}
		if rec != nil {
			switch {
			case !time.Now().Before(x.deadline):
				rec.Details = sdBackendTimeoutMid
			case x.r.Context().Err() != nil:
				// The read failed because the client went away and
				// its request's context ended.
				rec.Details = sdClientGoneLater
			default:
				rec.Details = sdBackendGoneLater
			}
		}
		// The backend failed or the timeout expired mid-body: the status
		// is already sent, so abort the stream and let the client see a
		// truncated response.
		x.h.log.Debug("response body aborted", "service", x.svc.Name, "err", err, "timeout", !time.Now().Before(x.deadline))
		panic(http.ErrAbortHandler)
	}
	for k, vv := range resp.Trailer {
		if h1.AllowedTrailer(k) {
			dst[http.TrailerPrefix+k] = vv
		}
	}
}

// writeDeadliner is a ResponseWriter whose writes can be bounded:
// h1.Server's, and net/http's HTTP/1 and HTTP/2 ones (asserting it avoids
// http.ResponseController's allocation, not the call's cost). respond
// calls it once per exchange. h1.Server's records the deadline; net/http's
// HTTP/1 one sets the connection's write deadline; net/http's HTTP/2 one
// sends a closure to the connection's serve loop and starts a timer for
// the stream (h2_bundle.go, http2responseWriter.SetWriteDeadline). That is
// the price of cutting off an HTTP/2 client that stops reading: flow
// control would otherwise block the handler, and hold the backend
// connection, until the client goes away.
type writeDeadliner interface {
	SetWriteDeadline(time.Time) error
}

// announceTrailers declares the backend's trailers in the Trailer header,
// but those h1.AllowedTrailer refuses (hop-by-hop names, which describe
// the backend's connection, and framing, routing, authentication and
// response control fields, RFC 9110 §6.5.1), which are not passed on.
func announceTrailers(dst, trailer http.Header) {
	keys := make([]string, 0, len(trailer))
	for k := range trailer {
		if h1.AllowedTrailer(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		dst["Trailer"] = keys
	}
}

// isEventStream reports a text/event-stream response, which is flushed
// after every write.
func isEventStream(h http.Header) bool {
	ct := h["Content-Type"]
	if len(ct) == 0 {
		return false
	}
	v := ct[0]
	const es = "text/event-stream"
	return len(v) >= len(es) && equalFoldASCII(v[:len(es)], es)
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c, d := a[i], b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// copyBody streams src to w with a pooled buffer, flushing after each
// write when flush is set. It returns the bytes written, and
// h1.ErrClientGone when writing to the client fails, or the read error
// when the backend body fails.
func (h *handler) copyBody(w http.ResponseWriter, src io.Reader, flush bool) (written int64, err error) {
	bp := h.bufs.Get().(*[]byte)
	defer h.bufs.Put(bp)
	buf := *bp
	var flusher func() error
	if flush {
		if f, ok := w.(http.Flusher); ok {
			flusher = func() error { f.Flush(); return nil }
		} else {
			flusher = http.NewResponseController(w).Flush
		}
	}
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			m, err := w.Write(buf[:n])
			written += int64(m)
			if err != nil {
				return written, h1.ErrClientGone
			}
			if flusher != nil {
				if err := flusher(); err != nil {
					return written, h1.ErrClientGone
				}
			}
		}
		if rerr == io.EOF {
			return written, nil
		}
		if rerr != nil {
			return written, rerr
		}
	}
}
