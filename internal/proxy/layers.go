package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/plan"
)

// Two proxy layers (docs/global.md, "Two proxy layers"): an EDGE
// frontend picks the backend service and the region and forwards to the
// region's regional layer (regions[].regionalLayer) over pooled HTTP/2
// connections, telling it what it decided in internal request headers;
// a REGIONAL frontend believes those headers only from a trusted edge,
// picks zone and endpoint in its region and says what it did in internal
// response headers, which the edge removes before the client sees the
// response.
//
// Internal request headers (edge → regional layer). An EDGE frontend
// removes every X-Spillway-Edge-* and X-Spillway-Regional-* field a
// client sends; a REGIONAL frontend removes them from anyone it does not
// trust.
const (
	edgePrefix     = "X-Spillway-Edge-"
	regionalPrefix = "X-Spillway-Regional-"
	// hdrEdgeService names the backend service the edge chose.
	hdrEdgeService = "X-Spillway-Edge-Service"
	// hdrEdgeClient is the client's IP address; hdrEdgeLB the address the
	// client reached (the edge's, Google's "load balancer IP");
	// hdrEdgeProto the scheme the client used.
	hdrEdgeClient = "X-Spillway-Edge-Client"
	hdrEdgeLB     = "X-Spillway-Edge-Lb"
	hdrEdgeProto  = "X-Spillway-Edge-Proto"
	// hdrEdgeTimeout is what is left of the exchange's timeout, in
	// milliseconds; hdrEdgeRetry the route's retry policy,
	// "retries,conditions,perTryMs" (conditions: plan.RetryCond bits).
	hdrEdgeTimeout = "X-Spillway-Edge-Timeout"
	hdrEdgeRetry   = "X-Spillway-Edge-Retry"
	// Internal response headers (regional layer → edge): the regional
	// layer's statusDetails, and the endpoint and zone it sent the last
	// attempt to.
	hdrRegionalDetails  = "X-Spillway-Regional-Details"
	hdrRegionalEndpoint = "X-Spillway-Regional-Endpoint"
	hdrRegionalZone     = "X-Spillway-Regional-Zone"
)

// sdUntrustedEdge answers a request to a REGIONAL frontend without a URL
// map that does not come from a trusted edge (Spillway's).
const sdUntrustedEdge = "request_not_from_trusted_edge"

// LayerOutcome is what the regional layer said about a request an edge
// forwarded to it (Record.Layer).
type LayerOutcome struct {
	// Address is the regional-layer endpoint the last attempt went to;
	// Region its region. Both "" when the request went to no regional
	// layer.
	Address, Region string
	// Zone, Endpoint and Details are the regional layer's answer: the
	// zone and endpoint it sent the request to and its statusDetails
	// ("" when it did not answer).
	Zone, Endpoint, Details string
}

// stripInternal removes the internal headers of both layers from h. It
// costs one pass over the header names.
func stripInternal(h http.Header) {
	for k := range h {
		if len(k) > 11 && k[:11] == "X-Spillway-" && (strings.HasPrefix(k, edgePrefix) || strings.HasPrefix(k, regionalPrefix)) {
			delete(h, k)
		}
	}
}

// trustedEdge reports whether r comes from an edge a REGIONAL frontend
// trusts: its source address is in trustedEdges, or it presented a
// client certificate the frontend verified.
func (h *handler) trustedEdge(r *http.Request) bool {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return true
	}
	a, err := netip.ParseAddr(hostOnly(r.RemoteAddr))
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range h.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// edgeInfo is what a trusted edge told a regional layer.
type edgeInfo struct {
	service    string
	client, lb string
	proto      string
	timeout    time.Duration
	policy     plan.RetryPolicy
	hasPolicy  bool
}

// readEdge takes the internal headers out of r (a REGIONAL frontend's
// request) and returns what they say, ok false when r is not a trusted
// edge's request for a backend service.
func (h *handler) readEdge(r *http.Request) (ei edgeInfo, ok bool) {
	hd := r.Header
	trusted := h.trustedEdge(r)
	if trusted {
		ei.service = first(hd[hdrEdgeService])
		ei.client = first(hd[hdrEdgeClient])
		ei.lb = first(hd[hdrEdgeLB])
		ei.proto = first(hd[hdrEdgeProto])
		if ms, err := strconv.ParseInt(first(hd[hdrEdgeTimeout]), 10, 64); err == nil && ms > 0 {
			ei.timeout = time.Duration(ms) * time.Millisecond
		}
		ei.policy, ei.hasPolicy = parseEdgeRetry(first(hd[hdrEdgeRetry]))
	}
	stripInternal(hd)
	if !trusted || ei.service == "" {
		return edgeInfo{}, false
	}
	if a, err := netip.ParseAddr(ei.client); err == nil {
		ei.client = a.String()
	} else {
		ei.client = hostOnly(r.RemoteAddr) // the edge did not say: the edge
	}
	if ei.proto != "https" {
		ei.proto = "http"
	}
	return ei, true
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// formatEdgeRetry renders a retry policy for hdrEdgeRetry.
func formatEdgeRetry(p plan.RetryPolicy) string {
	return strconv.Itoa(p.Retries) + "," + strconv.FormatUint(uint64(p.Cond), 10) + "," + strconv.FormatInt(p.PerTry.Milliseconds(), 10)
}

// parseEdgeRetry parses hdrEdgeRetry; ok false when it is absent or
// malformed (the regional layer then uses the default policy).
func parseEdgeRetry(s string) (plan.RetryPolicy, bool) {
	a, rest, ok1 := strings.Cut(s, ",")
	b, c, ok2 := strings.Cut(rest, ",")
	if !ok1 || !ok2 {
		return plan.RetryPolicy{}, false
	}
	n, err1 := strconv.Atoi(a)
	cond, err2 := strconv.ParseUint(b, 10, 16)
	ms, err3 := strconv.ParseInt(c, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || n < 0 || n > 25 || ms < 0 || ms > 86_400_000 {
		return plan.RetryPolicy{}, false
	}
	return plan.RetryPolicy{Retries: n, Cond: plan.RetryCond(cond), PerTry: time.Duration(ms) * time.Millisecond}, true
}

// serveRegional serves a REGIONAL frontend's request. A trusted edge's
// request for a backend service is served in the frontend's region
// (View.PickInRegion), without the URL map: the edge matched it,
// rewrote it and applied the security policies and header actions. It
// returns false for any other request, with the internal headers
// removed, which then goes through the frontend's URL map as usual (or
// is refused when the frontend has none).
func (h *handler) serveRegional(rec *Record, th traceHeaders, w http.ResponseWriter, r *http.Request) bool {
	ei, ok := h.readEdge(r)
	if !ok {
		if h.urlMap == "" {
			lbAnswer(rec, w, http.StatusForbidden, sdUntrustedEdge, "")
			return true
		}
		return false
	}
	if rec != nil {
		rec.ClientIP = ei.client
	}
	snap := h.cfg.Snapshot()
	if snap == nil || snap.Plan == nil || snap.View == nil {
		regionalAnswer(rec, w, http.StatusServiceUnavailable, sdConfigNotFound)
		return true
	}
	svc := snap.Plan.ServiceByName[ei.service]
	region := h.regionID(snap.Plan)
	if svc == nil || region < 0 {
		if rec != nil {
			rec.Reason = "backend service " + ei.service + " is not served in region " + h.region
		}
		regionalAnswer(rec, w, http.StatusServiceUnavailable, sdFailedToPick)
		return true
	}
	if rec != nil {
		rec.Service = svc
	}
	c := engine.Client{Region: region, Addr: engine.HashKey(ei.client), HasAddr: true}
	key, hasKey := h.affinityKey(w, r, svc, c)
	d := snap.View.PickInRegion(svc.ID, region, snap.View.NextDraw(svc.ID, region), key, hasKey)
	if rec != nil {
		rec.Backend = d.Backend
	}
	if d.Status != 0 {
		if rec != nil {
			rec.Reason = d.Reason
		}
		regionalAnswer(rec, w, d.Status, sdFailedToPick)
		return true
	}
	h.forwardRegional(snap, svc, &ei, d.Endpoint, th, rec, w, r)
	return true
}

// regionalAnswer is lbAnswer at a regional layer: the statusDetails
// also in hdrRegionalDetails, for the edge.
func regionalAnswer(rec *Record, w http.ResponseWriter, code int, details string) {
	w.Header()[hdrRegionalDetails] = []string{details}
	lbAnswer(rec, w, code, details, "")
}

// forwardRegional is forward for a trusted edge's request: the path and
// Host as the edge sent them, no header actions, the edge's timeout and
// retry policy, retries inside the region.
func (h *handler) forwardRegional(snap *Snapshot, svc *plan.Service, ei *edgeInfo, ep *plan.Endpoint, th traceHeaders, rec *Record, w http.ResponseWriter, r *http.Request) {
	x := exchange{h: h, w: w, r: r, svc: svc, rec: rec, trace: th, edge: ei}
	x.host, x.path, x.rawPath = r.Host, r.URL.Path, r.URL.RawPath
	x.timeout = exchangeTimeout(0, svc)
	if ei.timeout > 0 && ei.timeout < x.timeout {
		x.timeout = ei.timeout
	}
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		x.body = newTrackedBody(r)
	}
	x.policy = retryPolicy(snap.Plan.RetryPolicy(nil, r.Method))
	if ei.hasPolicy {
		x.policy = retryPolicy(ei.policy)
	}
	if x.upgrade = upgradeType(r.Header); x.upgrade != "" {
		x.policy.Retries = 0 // upgrades are never retried
	}
	x.serve(ep)
}

// markRegional sets the internal response headers of a regional layer's
// answer for the edge: statusDetails, and the endpoint and zone of the
// last attempt.
func (x *exchange) markRegional(dst http.Header, details string) {
	dst[hdrRegionalDetails] = []string{details}
	if ep := x.lastEP; ep != nil {
		dst[hdrRegionalEndpoint] = []string{ep.Addr}
		if ep.Group != nil {
			dst[hdrRegionalZone] = []string{ep.Group.Zone}
		}
	}
}

// edgeLayer returns the pool of the regional layer an EDGE frontend
// forwards decision d to, nil when d's region has none (the edge then
// sends the request to d's endpoint itself).
func (h *handler) edgeLayer(p *plan.Plan, d engine.Decision) *layerPool {
	if d.Backend == nil {
		return nil
	}
	rid := d.Backend.Group.RegionID
	if rid < 0 || rid >= len(p.RegionalLayers) || p.RegionalLayers[rid] == nil {
		return nil
	}
	pool, err := h.layers.pool(p.Regions[rid], p.RegionalLayers[rid])
	if err != nil {
		h.log.Warn("regional layer unusable", "region", p.Regions[rid], "err", err)
		return nil
	}
	return pool
}

// pickEdge is an EDGE frontend's pick: the engine's decision, avoiding
// regions whose regional layer has every endpoint set aside.
func (h *handler) pickEdge(w http.ResponseWriter, r *http.Request, snap *Snapshot, svc *plan.Service, c engine.Client) (engine.Decision, *layerPool) {
	d := h.pickEndpoint(w, r, snap, svc, c)
	if d.Status != 0 {
		return d, nil
	}
	pool := h.edgeLayer(snap.Plan, d)
	if pool == nil || !pool.down(time.Now()) {
		return d, pool
	}
	avoid := make([]bool, len(snap.Plan.Regions))
	for {
		avoid[d.Backend.Group.RegionID] = true
		d = snap.View.PickAvoiding(svc.ID, c, h.rand(), 0, false, avoid)
		if d.Status != 0 {
			return d, nil
		}
		if pool = h.edgeLayer(snap.Plan, d); pool == nil || !pool.down(time.Now()) {
			return d, pool
		}
	}
}

// edgeHeader adds the internal request headers to x's outbound header
// for an attempt through a regional layer.
func (x *exchange) edgeHeader() http.Header {
	hd := x.header()
	hd[hdrEdgeService] = []string{x.svc.Name}
	hd[hdrEdgeClient] = []string{hostOnly(x.r.RemoteAddr)}
	if lb := localIP(x.r); lb != "" {
		hd[hdrEdgeLB] = []string{lb}
	}
	hd[hdrEdgeProto] = []string{x.h.scheme(x.r)}
	hd[hdrEdgeTimeout] = []string{strconv.FormatInt(max(time.Until(x.deadline).Milliseconds(), 1), 10)}
	hd[hdrEdgeRetry] = []string{formatEdgeRetry(plan.RetryPolicy(x.policy))}
	// The edge's own X-Forwarded-* and a cookie it generated: the
	// regional layer computes X-Forwarded-For from the client address
	// given above, as a single layer would.
	if xff, ok := x.r.Header["X-Forwarded-For"]; ok {
		hd["X-Forwarded-For"] = xff
	} else {
		delete(hd, "X-Forwarded-For")
	}
	delete(hd, "X-Forwarded-Proto")
	if c := x.edgeCookie; c != "" {
		hd["Cookie"] = append(hd["Cookie"][:len(hd["Cookie"]):len(hd["Cookie"])], c)
	}
	return hd
}

// dropEdgeHeader removes the internal headers before an attempt that
// goes to an endpoint directly (a retry in a region without a regional
// layer).
func (x *exchange) dropEdgeHeader() {
	if x.hdr != nil {
		stripInternal(x.hdr)
	}
}

// tryLayer is try through the regional layer of x.layer: one HTTP/2
// stream on a pooled connection. The exchange's deadline bounds it; the
// per-try timeout is the regional layer's to apply to its own attempts
// (it gets the policy), so it does not cut the regional layer's retries.
func (x *exchange) tryLayer(at *attempt) {
	at.out.Regional = true
	pool := x.layer
	now := time.Now()
	e := pool.endpoint(now)
	if e == nil {
		pool.downs.Add(1)
		at.out.Err, at.out.ConnectFailure = errLayerDown, true
		return
	}
	if x.rec != nil {
		x.rec.Layer = LayerOutcome{Address: e.addr, Region: x.layerRegion}
		x.rec.Endpoint = nil // until the regional layer names one
	}
	ctx := x.context()
	hd := x.edgeHeader()
	scheme := "http"
	if pool.tls {
		scheme = "https"
	}
	req := (&http.Request{
		Method: x.r.Method, Proto: "HTTP/2.0", ProtoMajor: 2, Header: hd, Host: x.host,
		URL: &url.URL{Scheme: scheme, Host: e.addr, Path: x.path, RawPath: x.rawPath, RawQuery: x.r.URL.RawQuery},
	}).WithContext(ctx)
	if req.Host == "" {
		req.Host = x.r.Host
	}
	if x.body != nil {
		req.Body, req.ContentLength, req.Trailer = x.body, x.r.ContentLength, x.body.trailer
	}
	if err := h1.CheckRequest(req); err != nil {
		at.out.Err, at.out.ClientFault = err, true
		return
	}
	start := time.Now()
	var resp *http.Response
	var err error
	if x.upgrade != "" {
		// An upgrade cannot cross the pooled HTTP/2 connections: it
		// goes over an HTTP/1.1 connection of its own (layerupgrade.go).
		req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/1.1", 1, 1
		resp, err = pool.upgradeRoundTrip(e, req)
	} else {
		resp, err = x.roundTripLayer(ctx, pool, e, req)
	}
	at.out.Latency = time.Since(start)
	if err != nil {
		x.layerFailed(at, ctx, err)
		e.outcomes[layerOutcome(&at.out)].Add(1)
		return
	}
	at.resp, at.out.Status = resp, resp.StatusCode
	e.outcomes[layerOutcome(&at.out)].Add(1)
	x.readRegional(resp.Header)
	x.checkStatus(at)
}

// layerOutcome is the outcome label (index) of an attempt through a
// regional layer.
func layerOutcome(o *Outcome) int {
	switch {
	case o.Status >= 100 && o.Status <= 599:
		return layer1xx + o.Status/100 - 1
	case o.ConnectFailure:
		return layerConnectFailure
	case o.Timeout:
		return layerTimeout
	case o.ClientFault || errors.Is(o.Err, context.Canceled):
		return layerCancelled
	}
	return layerError
}

// roundTripLayer sends req on a connection to e, once more on a fresh
// connection when the first could not take it (closed or going away
// between the pick and the send) and the body is untouched.
func (x *exchange) roundTripLayer(ctx context.Context, pool *layerPool, e *layerEndpoint, req *http.Request) (*http.Response, error) {
	for try := 0; ; try++ {
		cc, err := pool.conn(ctx, e)
		if err != nil {
			return nil, err
		}
		resp, err := cc.RoundTrip(req)
		if err == nil || try > 0 || cc.CanTakeNewRequest() || (x.body != nil && x.body.touched.Load()) {
			return resp, err
		}
	}
}

// layerFailed fills at's outcome after a failed regional-layer attempt.
func (x *exchange) layerFailed(at *attempt, ctx context.Context, err error) {
	if cerr := x.body.failed(); cerr != nil {
		at.out.Err, at.out.ClientFault = cerr, true
		return
	}
	at.out.Err = err
	at.out.ConnectFailure = isConnectFailure(err)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err) {
		at.out.Timeout = true
	}
}

// readRegional takes the regional layer's internal response headers out
// of hd into the record: what it said, and the backend and endpoint of
// this plan it names (so that the edge's metrics count the zone the
// regional layer chose, not the one the edge's pick happened to name).
func (x *exchange) readRegional(hd http.Header) {
	if x.rec != nil {
		l := &x.rec.Layer
		l.Details, l.Endpoint, l.Zone = first(hd[hdrRegionalDetails]), first(hd[hdrRegionalEndpoint]), first(hd[hdrRegionalZone])
		if l.Details == "" {
			// An answer of the regional layer's own before it knew it
			// was serving an edge (or of a regional layer that predates
			// these headers).
			l.Details = first(hd[statusDetailsHeader])
		}
		if b, ep := x.regionalPick(l.Zone, l.Endpoint); b != nil {
			x.rec.Backend, x.rec.Endpoint = b, ep
		}
	}
	stripInternal(hd)
}

// regionalPick returns the backend of x's service in the regional
// layer's region whose zone is zone, and its endpoint at addr (nil when
// it has none; the first such backend when none has). A group without a
// zone is found by the endpoint's address alone. nil, nil when there is
// no such backend.
func (x *exchange) regionalPick(zone, addr string) (*plan.Backend, *plan.Endpoint) {
	if (zone == "" && addr == "") || x.svc == nil {
		return nil, nil
	}
	var found *plan.Backend
	for _, b := range x.svc.Backends {
		if b.Group.RegionID != x.layerRID || b.Group.Zone != zone {
			continue
		}
		for _, ep := range b.Endpoints {
			if ep.Addr == addr {
				return b, ep
			}
		}
		if found == nil && zone != "" {
			found = b
		}
	}
	return found, nil
}

// repickEdge chooses the decision for an edge's retry: another region
// than those already tried (View.PickAvoiding), through its regional
// layer when it has one. It returns false when no region is left.
func (x *exchange) repickEdge(snap *Snapshot, svc *plan.Service) (*plan.Endpoint, bool) {
	if len(x.tried) != len(snap.Plan.Regions) {
		x.tried = make([]bool, len(snap.Plan.Regions)) // a reload renumbered the regions
		if x.layerRID >= 0 && x.layerRID < len(x.tried) {
			x.tried[x.layerRID] = true
		}
	}
	c := x.h.client(snap.Plan, x.r)
	for range len(snap.Plan.Regions) {
		d := snap.View.PickAvoiding(svc.ID, c, x.h.rand(), 0, false, x.tried)
		if d.Status != 0 {
			return nil, false
		}
		rid := d.Backend.Group.RegionID
		x.tried[rid] = true
		pool := x.h.edgeLayer(snap.Plan, d)
		if pool != nil && pool.down(time.Now()) {
			continue
		}
		x.setLayer(pool, snap.Plan, rid)
		x.svc = svc
		if x.rec != nil {
			x.rec.Service, x.rec.Backend = svc, d.Backend
		}
		return d.Endpoint, true
	}
	return nil, false
}

// setLayer makes pool (nil: none) the regional layer of the next attempt.
func (x *exchange) setLayer(pool *layerPool, p *plan.Plan, rid int) {
	x.layer, x.layerRID, x.layerRegion = pool, rid, ""
	if pool != nil {
		x.layerRegion = p.Regions[rid]
	} else {
		x.dropEdgeHeader()
	}
}
