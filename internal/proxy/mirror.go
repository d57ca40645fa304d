package proxy

import (
	"context"
	"io"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// mirror sends a fire-and-forget copy of a body-less request to the
// policy's backend service with Host "<host>-shadow" (Google's
// requestMirrorPolicy). It never delays the primary request: the copy runs
// in its own goroutine, at most MirrorConcurrency at once, and is dropped
// when that many are in flight or the mirror service cannot serve. Its
// response is read and discarded.
func (h *handler) mirror(snap *Snapshot, mp *config.RequestMirrorPolicy, x *exchange) {
	svc := snap.Plan.ServiceByName[config.RefName(mp.BackendService)]
	if svc == nil {
		return
	}
	region := h.regionID(snap.Plan)
	d := snap.View.Pick(svc.ID, region, h.rand())
	if d.Status != 0 {
		return
	}
	select {
	case h.mirrors <- struct{}{}:
	default:
		return // saturated: drop the copy
	}
	snap.Demand.Add(svc.ID, region)
	timeout := svc.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	hdr := x.hdr.Clone()
	if hdr == nil {
		hdr = h.outHeader(x.r, x.upgrade, nil) // built now: the copy may outlive the request
	}
	m := exchange{h: h, r: x.r, svc: svc, path: x.path, rawPath: x.rawPath, hdr: hdr, host: x.host + "-shadow", hostSet: x.hostSet, mirror: true}
	ep := d.Endpoint
	rt, scheme := h.endpointTransport(svc, ep)
	go func() {
		defer func() { <-h.mirrors }()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		o := Outcome{Endpoint: ep, Service: svc, Mirror: true}
		start := time.Now()
		resp, err := rt.RoundTrip(m.newRequest(ctx, scheme, ep))
		o.Latency = time.Since(start)
		if err != nil {
			o.Err, o.ConnectFailure, o.Timeout = err, isConnectFailure(err), isTimeout(err) || ctx.Err() != nil
			h.observe(o)
			return
		}
		o.Status = resp.StatusCode
		h.observe(o)
		bp := h.bufs.Get().(*[]byte)
		_, _ = io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, *bp)
		h.bufs.Put(bp)
		resp.Body.Close()
	}()
}
