package proxy

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/cdn"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/geoip"
	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/route"
)

// Snapshot is what one request reads. serve publishes a new one (atomic
// pointer) on every health/drain change or reload; a Snapshot and
// everything it points to is immutable, except the Demand counters.
type Snapshot struct {
	Plan   *plan.Plan
	View   *engine.View
	Routes map[string]*route.Table // by URL map name
	Demand *Demand                 // offered-rate counters, one per plan
	// Loads counts the load reports of UTILIZATION backends' endpoints
	// (nil: not counted).
	Loads *LoadReports
	// Armor is the plan's security policies, nil when no backend
	// service has one; Geo places clients for them (nil: no
	// spillway.geoDatabase).
	Armor *armor.Set
	Geo   *geoip.DB
	// Buckets are the S3-compatible origins of the backend buckets that
	// spillway.buckets maps, by backend bucket name.
	Buckets map[string]*cdn.S3Bucket
}

// Outcome is the result of one attempt to an endpoint, for outlier
// detection, passive health and metrics.
type Outcome struct {
	Endpoint *plan.Endpoint
	// Service is the backend service the attempt was for.
	Service *plan.Service
	// Status is the backend's response status, 0 when there was none.
	Status int
	// Err is why there was no response (nil when Status != 0). A request
	// cancelled by its client reports context.Canceled; that says nothing
	// about the backend.
	Err error
	// ConnectFailure: the connection could not be established.
	ConnectFailure bool
	// Timeout: the per-try or request timeout expired before the response
	// headers arrived.
	Timeout bool
	// Latency is the time from sending the request to receiving the
	// response headers (or the failure).
	Latency time.Duration
	// Mirror marks a shadow request sent by requestMirrorPolicy.
	Mirror bool
	// Regional: the attempt went to a regional layer (an EDGE frontend);
	// Endpoint is then nil: the regional layer chose the endpoint, and
	// judges it.
	Regional bool
	// ClientFault: the attempt failed because of the client's request:
	// reading its body failed (malformed chunking, an upload cut short by
	// a half-close or reset; Err wraps ErrClientBody), or the backend
	// transport refused to send what it holds (Err wraps
	// h1.ErrInvalidRequest).
	ClientFault bool
}

// BackendSignal reports whether the outcome says anything about the
// backend: false for a mirrored request, one its client abandoned
// (context.Canceled) and one that failed because of the client
// (ClientFault). Outlier detection and passive health look only at
// outcomes for which it is true.
func (o *Outcome) BackendSignal() bool {
	return !o.Mirror && !o.ClientFault && !errors.Is(o.Err, ErrClientBody) && !errors.Is(o.Err, h1.ErrInvalidRequest) && !errors.Is(o.Err, context.Canceled)
}

// endpointAddr is the attempt's endpoint address, "" when it had none.
func (o *Outcome) endpointAddr() string {
	if o.Endpoint == nil {
		return ""
	}
	return o.Endpoint.Addr
}

// ErrClientBody is wrapped by the error of an attempt that failed because
// the client's request body could not be read.
var ErrClientBody = errors.New("client request body")

// clientBodyError is a read error of the client's request body.
type clientBodyError struct{ err error }

func (e *clientBodyError) Error() string { return "reading client request body: " + e.err.Error() }

// Is makes errors.Is(err, ErrClientBody) true.
func (e *clientBodyError) Is(target error) bool { return target == ErrClientBody }

func (e *clientBodyError) Unwrap() error { return e.err }

// Config configures a frontend's handler.
type Config struct {
	// Frontend is the frontend served: its URL map, region and protocol.
	Frontend *plan.Frontend
	// Snapshot returns the current snapshot; it is called once per request
	// (and again for each retry) and must be cheap (an atomic load).
	Snapshot func() *Snapshot
	// Transport carries requests to HTTP and HTTPS backend services
	// (default h1.NewTransport(NewTransport())).
	Transport http.RoundTripper
	// H2Transport carries requests to HTTP2 and H2C backend services
	// (default NewH2Transport()).
	H2Transport http.RoundTripper
	// Observe, when set, is called once per attempt (including mirrored
	// requests, from their own goroutine) right after the response headers
	// or the failure. It must be cheap and safe for concurrent use.
	Observe func(Outcome)
	// Rand returns uniform random numbers (default math/rand/v2.Uint64).
	Rand func() uint64
	// Logger receives per-request problems at Debug and server errors at
	// Warn (default slog.Default()).
	Logger *slog.Logger
	// MirrorConcurrency bounds in-flight mirrored requests; copies beyond
	// it are dropped (default 64).
	MirrorConcurrency int
	// Record, when set, is called once per request when the handler is
	// done with it, with what the handler learnt (Record). It runs on the
	// request's goroutine: it must be cheap, safe for concurrent use, and
	// must not keep the *Record (it is pooled).
	Record func(*Record)
	// TraceRand draws the ids of generated trace contexts (default
	// math/rand/v2.Uint64).
	TraceRand func() uint64
	// Layers holds the connection pools to regional layers, for an EDGE
	// frontend (default: the handler's own).
	Layers *Layers
	// Cache is Cloud CDN's cache of the CDN-enabled backend services and
	// buckets (nil: nothing is cached). It outlives reloads.
	Cache *cdn.Cache
}

// handler is the http.Handler of one frontend.
type handler struct {
	cfg    Config
	urlMap string
	region string // frontend region name, "" for none
	// layer is the frontend's proxy layer ("", EDGE, REGIONAL), trusted
	// a REGIONAL frontend's trusted edges, layers the pools an EDGE
	// frontend forwards on.
	layer     string
	trusted   []netip.Prefix
	layers    *Layers
	https     bool // frontend protocol HTTPS
	transport http.RoundTripper
	fast      *h1.Transport // transport when it is the fast one, else nil
	h2        http.RoundTripper
	// named holds the transports of endpoints named by DNS (plan
	// Endpoint.Host), one per name and HTTP version, made on first use.
	named    sync.Map // namedKey → *http.Transport
	rand     func() uint64
	traceRnd func() uint64
	log      *slog.Logger

	adapters sync.Pool // *adapter
	records  sync.Pool // *Record
	// nextShard numbers new Records (Record.Shard).
	nextShard atomic.Uint32
	bufs      sync.Pool // *[]byte of bufSize
	mirrors   chan struct{}

	// Shared header values. They are never modified: header maps only
	// replace or append (append reallocates, capacity equals length).
	via, protoHTTP, protoHTTPS, emptyUA, teTrailers []string
}

// bufSize is the size of the pooled body-copy buffers.
const bufSize = 32 << 10

// defaultTimeout is backendService.timeoutSec's default.
const defaultTimeout = 30 * time.Second

// NewHandler returns the data-plane handler of a frontend.
func NewHandler(cfg Config) http.Handler {
	h := &handler{
		cfg:        cfg,
		transport:  cfg.Transport,
		h2:         cfg.H2Transport,
		rand:       cfg.Rand,
		log:        cfg.Logger,
		via:        []string{"1.1 spillway"},
		protoHTTP:  []string{"http"},
		protoHTTPS: []string{"https"},
		emptyUA:    []string{""},
		teTrailers: []string{"trailers"},
	}
	if f := cfg.Frontend; f != nil {
		if f.URLMap != nil {
			h.urlMap = f.URLMap.Name
		}
		h.region = f.Region
		h.https = f.Protocol == "HTTPS"
		h.layer, h.trusted = f.Layer, f.TrustedEdges
	}
	h.layers = cfg.Layers
	if h.layers == nil {
		h.layers = NewLayers()
	}
	if h.transport == nil {
		h.transport = h1.NewTransport(NewTransport())
	}
	h.fast, _ = h.transport.(*h1.Transport)
	if h.h2 == nil {
		h.h2 = NewH2Transport()
	}
	if h.rand == nil {
		h.rand = rand.Uint64
	}
	h.traceRnd = cfg.TraceRand
	if h.traceRnd == nil {
		h.traceRnd = rand.Uint64
	}
	h.records.New = func() any { return &Record{Shard: h.nextShard.Add(1) - 1} }
	if h.log == nil {
		h.log = slog.Default()
	}
	n := cfg.MirrorConcurrency
	if n <= 0 {
		n = 64
	}
	h.mirrors = make(chan struct{}, n)
	h.adapters.New = func() any {
		a := &adapter{}
		a.req.Header = a.lookup // bound once, reused by every request
		return a
	}
	h.bufs.New = func() any {
		b := make([]byte, bufSize)
		return &b
	}
	return h
}

// adapter presents an *http.Request as a route.Request. Adapters are
// pooled so that matching allocates nothing.
type adapter struct {
	req route.Request
	h   http.Header
}

func (a *adapter) reset(r *http.Request) {
	a.req.Host = r.Host
	a.req.Path = r.URL.Path
	a.req.RawQuery = r.URL.RawQuery
	a.req.Method = r.Method
	a.h = r.Header
}

// lookup implements route.Request.Header: canonical or lower-case names,
// several values joined with ",".
func (a *adapter) lookup(name string) (string, bool) {
	vv, ok := a.h[name]
	if !ok {
		if c := http.CanonicalHeaderKey(name); c != name {
			vv, ok = a.h[c]
		}
	}
	switch {
	case !ok:
		return "", false
	case len(vv) == 1:
		return vv[0], true
	}
	return strings.Join(vv, ","), true
}

func (h *handler) putAdapter(a *adapter) {
	a.req.Host, a.req.Path, a.req.EscapedPath, a.req.RawQuery, a.req.Method, a.h = "", "", "", "", "", nil
	h.adapters.Put(a)
}

// regionID returns the frontend's region in p (-1 for none). It is looked
// up by name because a reload may renumber regions.
func (h *handler) regionID(p *plan.Plan) int {
	if h.region == "" {
		return -1
	}
	if id, ok := p.RegionIndex[h.region]; ok {
		return id
	}
	return -1
}

// client is who r comes from, for the engine: the frontend's region and
// the client's address, which binds it to its second-layer proxies under
// WATERFALL_BY_REGION.
func (h *handler) client(p *plan.Plan, r *http.Request) engine.Client {
	return engine.Client{Region: h.regionID(p), Addr: engine.HashKey(hostOnly(r.RemoteAddr)), HasAddr: true}
}

// scheme is the scheme the client used.
func (h *handler) scheme(r *http.Request) string {
	if h.https || r.TLS != nil {
		return "https"
	}
	return "http"
}

// observe reports an attempt.
func (h *handler) observe(o Outcome) {
	if h.cfg.Observe != nil {
		h.cfg.Observe(o)
	}
}

// ServeHTTP serves one request in stages, as Caddy's reverse proxy does:
//
//	match → pick → forward → finalize
//
// match admits the request and matches it against the frontend's URL
// map, answering what it refuses, redirects and injected faults itself;
// pick chooses the backend service and its endpoint; forward prepares
// the outbound request and sends it, retrying per policy
// (exchange.forward); finalize writes the backend's answer, the tunnel
// or the failure (exchange.finalize). The Record, if kept, is finished
// when ServeHTTP returns.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A cache's background refresh (stale-while-revalidate) runs the
	// handler again: it is neither recorded nor checked by the policies.
	refresh := h.cfg.Cache != nil && cdn.IsRefresh(r.Context())
	var rec *Record
	if h.cfg.Record != nil && !refresh {
		rec = h.record(r, time.Now())
		defer h.finish(rec)
	}
	var tc TraceContext
	th := h.trace(r, &tc)
	if rec != nil {
		rec.Trace = tc
	}
	if !h.admit(rec, w, r) {
		return
	}
	switch h.layer {
	case config.LayerEdge:
		stripInternal(r.Header) // a client cannot speak for the edge
	case config.LayerRegional:
		if h.serveRegional(rec, th, w, r) {
			return
		}
	}
	m := matched{rec: rec, refresh: refresh}
	ok := h.match(&m, w, r)
	if m.ad != nil {
		defer h.putAdapter(m.ad)
	}
	if !ok {
		return
	}
	d, ok := h.pick(&m, th, w, r)
	if !ok {
		return
	}
	h.forward(&m, d.Endpoint, th, w, r)
}

// matched is a request on its way through ServeHTTP's stages: what match
// found and pick chose.
type matched struct {
	rec     *Record // nil when no one records requests
	snap    *Snapshot
	ad      *adapter // the request as route sees it; back to the pool when ServeHTTP returns
	a       *route.Action
	fwdPath string // the normalised path to forward, decoded
	fwdRaw  string // and escaped ("" when the default encoding)
	svc     *plan.Service
	bucket  *plan.Bucket // the backend bucket, when the action names one
	wi      int          // the index of svc in a.Services
	refresh bool         // a cache's background refresh (cdn.IsRefresh)
	// bodyStart is when the security policies started reading the
	// body (inspectBody), zero when they did not.
	bodyStart time.Time
	// layer is the regional layer an EDGE frontend forwards to (nil:
	// the endpoint directly), layerRID its region; edgeCookie an
	// affinity cookie the edge generated ("name=value"), which the
	// regional layer must see.
	layer      *layerPool
	layerRID   int
	edgeCookie string
}

// admit answers, and returns false for, a request the load balancer
// refuses whatever the config: a '#' in the path, an HTTP/2 request that
// cannot be forwarded, a header block over h1.MaxHeaderBytes, CONNECT.
func (h *handler) admit(rec *Record, w http.ResponseWriter, r *http.Request) bool {
	if strings.IndexByte(r.URL.Path, '#') >= 0 {
		lbAnswer(rec, w, http.StatusBadRequest, sdInvalidPath, "'#' in request path")
		return false
	}
	if r.ProtoMajor != 1 {
		if why := badH2Request(r); why != "" {
			lbAnswer(rec, w, http.StatusBadRequest, sdInvalidRequest, why)
			return false
		}
	}
	hb := headerBlockSize(r)
	if rec != nil {
		rec.RequestSize = int64(hb)
	}
	if hb > h1.MaxHeaderBytes {
		lbAnswer(rec, w, http.StatusRequestHeaderFieldsTooLarge, sdHeadersTooLong, "request line and headers exceed 60 KiB")
		return false
	}
	if r.Method == http.MethodConnect {
		lbAnswer(rec, w, http.StatusMethodNotAllowed, sdUnsupportedMethod, "CONNECT is not supported")
		return false
	}
	return true
}

// match finds r's route action in the current snapshot's URL map and
// fills m. It answers, and returns false for, a request it cannot route
// (no snapshot or URL map yet, a path that does not normalise), a
// redirect and an injected fault. m.ad, once set, must be returned to
// the pool whatever match returns.
func (h *handler) match(m *matched, w http.ResponseWriter, r *http.Request) bool {
	rec := m.rec
	snap := h.cfg.Snapshot()
	if snap == nil || snap.Plan == nil || snap.View == nil {
		lbAnswer(rec, w, http.StatusServiceUnavailable, sdConfigNotFound, "load balancer is starting")
		return false
	}
	table := snap.Routes[h.urlMap]
	if table == nil {
		h.log.Warn("URL map missing from the snapshot", "urlMap", h.urlMap)
		lbAnswer(rec, w, http.StatusServiceUnavailable, sdConfigNotFound, "")
		return false
	}
	m.snap = snap
	m.ad = h.adapters.Get().(*adapter)
	m.ad.reset(r)
	popts := pathOptions(snap.Plan.Config)
	var ok bool
	if m.fwdPath, m.fwdRaw, ok = normalizePath(rec, w, r, popts); !ok {
		return false
	}
	m.ad.req.Path = route.MatchPath(m.fwdPath, popts)
	m.a = table.Match(&m.ad.req)
	if rec != nil {
		rec.Route = m.a.Source
	}
	if m.a.Redirect != nil {
		h.redirect(m, w, r)
		return false
	}
	return m.a.Fault == nil || !h.fault(rec, w, r, m.a.Fault)
}

// redirect answers a request whose action is a redirect.
func (h *handler) redirect(m *matched, w http.ResponseWriter, r *http.Request) {
	ad, a := m.ad, m.a
	// Redirect from the path that matched: when it differs from the
	// forwarded one (an escaped slash or backslash made new segments),
	// cutting the matched prefix out of the forwarded path would splice
	// two different paths. RedirectURL escapes Path itself when
	// EscapedPath is "".
	ad.req.EscapedPath = ""
	if ad.req.Path == m.fwdPath {
		u := url.URL{Path: m.fwdPath, RawPath: m.fwdRaw}
		ad.req.EscapedPath = u.EscapedPath()
	}
	w.Header()["Location"] = []string{a.RedirectURL(&ad.req, h.scheme(r))}
	w.WriteHeader(a.Redirect.Code)
	if m.rec != nil {
		m.rec.Status, m.rec.Details = a.Redirect.Code, sdRedirect
	}
}

// pick chooses the backend service of m's action (noting it in m) and
// its endpoint for r. It answers 503, and returns false, when the
// service cannot be served or has no endpoint to pick. A backend
// bucket, and a CDN-enabled service, are served here (cdn.go), and
// pick returns false for them too.
func (h *handler) pick(m *matched, th traceHeaders, w http.ResponseWriter, r *http.Request) (engine.Decision, bool) {
	rec, snap := m.rec, m.snap
	name, wi := m.a.PickService(m.a.NextDraw())
	svc := snap.Plan.ServiceByName[name]
	if svc == nil {
		if b := snap.Plan.Buckets[name]; b != nil {
			h.serveBucket(m, b, w, r)
			return engine.Decision{}, false
		}
		h.log.Debug("backend service cannot be served", "service", name)
		if rec != nil {
			rec.Reason = "backend service " + name + " cannot be served"
		}
		lbAnswer(rec, w, http.StatusServiceUnavailable, sdFailedToPick, "")
		return engine.Decision{}, false
	}
	m.svc, m.wi = svc, wi
	if rec != nil {
		rec.Service = svc
	}
	if snap.Armor != nil && !m.refresh && !h.enforce(m, svc, w, r) {
		return engine.Decision{}, false
	}
	if svc.CDN != nil && h.cfg.Cache != nil {
		h.cached(m, svc.Name, svc.CDN, th, w, r)
		return engine.Decision{}, false
	}
	return h.endpoint(m, w, r)
}

// endpoint picks the endpoint of m's service for r: the request counts
// as the service's load from here on. It answers 503, and returns
// false, when there is none.
func (h *handler) endpoint(m *matched, w http.ResponseWriter, r *http.Request) (engine.Decision, bool) {
	rec, snap, svc := m.rec, m.snap, m.svc
	client := h.client(snap.Plan, r)
	snap.Demand.Add(svc.ID, client.Region)
	var d engine.Decision
	if h.layer == config.LayerEdge {
		d, m.layer = h.pickEdge(w, r, snap, svc, client)
		if d.Backend != nil {
			m.layerRID = d.Backend.Group.RegionID
		}
		m.edgeCookie = generatedCookie(w, svc)
	} else {
		d = h.pickEndpoint(w, r, snap, svc, client)
	}
	if rec != nil {
		rec.Backend = d.Backend
	}
	if d.Status != 0 {
		h.log.Debug("no backend picked", "service", svc.Name, "status", d.Status, "reason", d.Reason)
		if rec != nil {
			rec.Reason = d.Reason
		}
		lbAnswer(rec, w, d.Status, sdFailedToPick, "")
		return engine.Decision{}, false
	}
	return d, true
}

// forward prepares the exchange of r with m's service, starting at
// endpoint ep, and serves it: headers, URL rewrite, timeout, body,
// retry policy and mirroring.
func (h *handler) forward(m *matched, ep *plan.Endpoint, th traceHeaders, w http.ResponseWriter, r *http.Request) {
	a, svc, ad := m.a, m.svc, m.ad
	x := exchange{h: h, w: w, r: r, svc: svc, rec: m.rec, trace: th, edgeMode: h.layer == config.LayerEdge, edgeCookie: m.edgeCookie}
	x.hp = headerPlan{req: r, svc: svc.Config, weight: a.Services[m.wi].HeaderAction, actions: a.HeaderActions}
	x.host, x.path = a.RewriteURL(&ad.req)
	x.hostSet = a.Rewrite != nil && a.Rewrite.Host != ""
	if x.path == ad.req.Path {
		// Not rewritten: forward the normalised path, escapes kept.
		x.path, x.rawPath = m.fwdPath, m.fwdRaw
	}
	x.upgrade = upgradeType(r.Header)
	// An invalid traceparent of the client's must go: only the header
	// map can drop it.
	if x.upgrade != "" || x.hp.rewritesRequest() || th.replace {
		// Else the fast path writes the headers without this map.
		x.hdr = h.outHeader(r, x.upgrade, nil)
		th.apply(x.hdr)
		x.hp.request(x.hdr)
	}
	x.timeout = exchangeTimeout(a.Timeout, svc)
	if !m.bodyStart.IsZero() {
		// The exchange started when the policies read the body.
		x.deadline = m.bodyStart.Add(x.timeout)
	}
	// Body-less: HTTP/1.1 without Content-Length or Transfer-Encoding, or
	// HTTP/2 with END_STREAM on the headers (whose Body is not NoBody).
	bodyless := r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody
	if !bodyless {
		x.body = newTrackedBody(r)
		if r.ProtoMajor == 1 {
			// The backend may answer while the client still sends.
			_ = http.NewResponseController(w).EnableFullDuplex()
		}
	}
	x.policy = retryPolicy(m.snap.Plan.RetryPolicy(a.Retry, r.Method))
	if x.upgrade != "" {
		x.policy.Retries = 0
	}
	if x.edgeMode {
		x.setLayer(m.layer, m.snap.Plan, m.layerRID)
	}
	if a.Mirror != nil && bodyless && x.upgrade == "" && hit(h.rand, a.Mirror.MirrorPercent) {
		h.mirror(m.snap, a.Mirror, &x)
	}
	x.serve(ep)
}

// exchangeTimeout is the timeout of an exchange: the route's,
// else the backend service's timeoutSec, else 30 s.
func exchangeTimeout(routeTimeout time.Duration, svc *plan.Service) time.Duration {
	if routeTimeout > 0 {
		return routeTimeout
	}
	if svc.Timeout > 0 {
		return svc.Timeout
	}
	return defaultTimeout
}

// pathOptions returns the path normalisation options of a config.
func pathOptions(c *config.Config) route.PathOptions {
	if c == nil {
		return route.PathOptions{}
	}
	return route.PathOptionsFor(c.Spillway)
}

// targetPath returns the path of the request target as the client sent
// it, escapes included. r.URL.EscapedPath is not that: when RawPath is
// not a valid encoding (raw non-ASCII, '|' or '{' bytes, say) url.URL
// drops it and re-escapes the decoded path, turning %2F into '/' behind
// the escaped-slash action's back. HTTP/2's :path is in RequestURI too.
func targetPath(r *http.Request) string {
	t := r.RequestURI
	if t == "" || t == "*" {
		return r.URL.EscapedPath()
	}
	if t[0] != '/' { // absolute-form: the path starts after the authority
		i := strings.Index(t, "://")
		if i < 0 {
			return r.URL.EscapedPath()
		}
		t = t[i+3:]
		j := strings.IndexAny(t, "/?")
		if j < 0 || t[j] == '?' {
			return "/"
		}
		t = t[j:]
	}
	if i := strings.IndexByte(t, '?'); i >= 0 {
		t = t[:i]
	}
	return t
}

// normalizePath normalises the request path (route.NormalizePath) and
// returns the path to forward, decoded and escaped (the escaped form is ""
// when it is the default encoding of the decoded one, as in url.URL). A
// path that is already normal is returned as received, without
// allocating. A path that cannot be normalised is answered with 400 and
// ok is false.
func normalizePath(rec *Record, w http.ResponseWriter, r *http.Request, opts route.PathOptions) (path, raw string, ok bool) {
	if opts.Off {
		return r.URL.Path, r.URL.RawPath, true
	}
	esc := targetPath(r)
	norm, err := route.NormalizePath(esc, opts)
	if err != nil {
		lbAnswer(rec, w, http.StatusBadRequest, sdInvalidPath, err.Error())
		return "", "", false
	}
	if norm == esc {
		return r.URL.Path, r.URL.RawPath, true
	}
	dec, err := url.PathUnescape(norm)
	if err != nil { // unreachable: norm has only well-formed escapes
		lbAnswer(rec, w, http.StatusBadRequest, sdInvalidPath, "malformed request path")
		return "", "", false
	}
	if dec == norm {
		return dec, "", true
	}
	return dec, norm, true
}

// statusDetails tokens: why the load balancer answered itself, in the
// vocabulary of Google's statusDetails log field where it has a word for
// it. They are sent in X-Spillway-Status-Details and in the body, and
// never carry an address, a name from the config or an error's text
// (those go to the log).
const (
	sdFailedToPick      = "failed_to_pick_backend"
	sdFailedToConnect   = "failed_to_connect_to_backend"
	sdBackendTimeout    = "backend_timeout"
	sdBackendClosed     = "backend_connection_closed_before_data_sent_to_client"
	sdFaultAbort        = "fault_filter_abort"
	sdConfigNotFound    = "config_not_found"
	sdHeadersTooLong    = "headers_too_long"
	sdUnsupportedMethod = "unsupported_method"
	sdInvalidPath       = "invalid_request_path"   // Spillway's
	sdBadRequestBody    = "malformed_request_body" // Spillway's: malformed chunking, truncated upload
	sdUpgradeFailed     = "websocket_handshake_failed"
	sdBackendCorrupted  = "backend_response_corrupted" // a response the proxy refuses (502)
	sdBadFraming        = "ambiguous_request_framing"  // Spillway's: Content-Length with Transfer-Encoding
	sdInvalidRequest    = "invalid_request"            // Spillway's: a request that cannot be forwarded as it is (badH2Request, h1.ErrInvalidRequest)
)

// statusDetailsHeader carries the statusDetails token of a response the
// load balancer generated (a Spillway extension; Google logs the field).
const statusDetailsHeader = "X-Spillway-Status-Details"

// defaultMessage is the body text of a token when the caller has none:
// short and neutral, worded like Google's and Envoy's own answers.
func defaultMessage(details string) string {
	switch details {
	case sdFailedToPick:
		return "no healthy upstream"
	case sdFailedToConnect, sdBackendClosed:
		return "upstream connect error or disconnect/reset before headers"
	case sdBackendTimeout:
		return "upstream request timeout"
	case sdFaultAbort:
		return "fault filter abort"
	case sdConfigNotFound:
		return "no configuration for this request"
	case sdBadRequestBody:
		return "malformed or incomplete request body"
	case sdUpgradeFailed:
		return "connection upgrade failed"
	case sdBackendCorrupted:
		return "invalid response from upstream"
	case sdInvalidRequest:
		return "malformed request"
	case sdDeniedByPolicy:
		return "request denied by security policy"
	}
	return "request not served"
}

// lbError writes a response generated by the load balancer itself: a
// text/plain body "503 Service Unavailable: message (details)\n" and
// details in X-Spillway-Status-Details. message "" means the token's
// default text. Neither may carry backend addresses or error text. It
// returns the number of body bytes written.
func lbError(w http.ResponseWriter, code int, details, message string) int {
	if message == "" {
		message = defaultMessage(details)
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set(statusDetailsHeader, details)
	hd.Del("Content-Length")
	w.WriteHeader(code)
	text := http.StatusText(code)
	if text == "" {
		text = "Status"
	}
	var b strings.Builder
	b.Grow(4 + len(text) + 2 + len(message) + 2 + len(details) + 2)
	b.WriteString(h1.Code3(code))
	b.WriteByte(' ')
	b.WriteString(text)
	b.WriteString(": ")
	b.WriteString(message)
	b.WriteString(" (")
	b.WriteString(details)
	b.WriteString(")\n")
	n, _ := w.Write([]byte(b.String()))
	return n
}
