package proxy

import (
	"net/http"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/cdn"
	"github.com/spillwaylb/spillway/internal/cdnpolicy"
	"github.com/spillwaylb/spillway/internal/plan"
)

// statusDetails tokens of Cloud CDN (Google's) and of signed requests
// (Spillway's).
const (
	sdFromCache          = "response_from_cache"
	sdFromCacheValidated = "response_from_cache_validated"
	sdSignedInvalid      = "signed_request_invalid" // Spillway's: a bad signed URL or cookie (403)
	sdSentByBucket       = "response_sent_by_backend"
)

// cached serves r through the cache for backend (a CDN-enabled service
// or bucket) with policy p: after the security policies, before the
// endpoint is picked, so that a hit is no backend's load. A signed URL
// or cookie that does not verify is refused with 403 and never reaches
// the cache or the origin.
func (h *handler) cached(m *matched, backend string, p *cdnpolicy.Policy, th traceHeaders, w http.ResponseWriter, r *http.Request) {
	rec := m.rec
	scheme := h.scheme(r)
	signed, err := p.Verify(r.Method, scheme+"://"+r.Host+r.RequestURI, r.Header, time.Now())
	if err != nil {
		h.log.Debug("signed request refused", "backend", backend, "err", err)
		if rec != nil {
			rec.Reason = err.Error()
		}
		lbAnswer(rec, w, http.StatusForbidden, sdSignedInvalid, "")
		return
	}
	path := m.fwdRaw
	if path == "" {
		path = m.fwdPath
	}
	q := &cdn.Request{Policy: p, Backend: backend, Scheme: scheme, Host: r.Host, Path: path,
		RawQuery: r.URL.RawQuery, Signed: signed, Refresh: h.refresh}
	var res cdn.Result
	h.cfg.Cache.Serve(w, r, q, func(w2 http.ResponseWriter, r2 *http.Request) {
		if m.svc == nil {
			h.bucketOrigin(m, w2, r2)
			return
		}
		if d, ok := h.endpoint(m, w2, r2); ok {
			h.forward(m, d.Endpoint, th, w2, r2)
		}
	}, &res)
	if rec != nil {
		rec.CacheLookup, rec.CacheHit, rec.CacheValidated, rec.CacheFillBytes = res.Lookup, res.Hit, res.Validated, res.FillBytes
		if res.Hit {
			rec.Status, rec.ResponseSize, rec.Details = res.Status, res.Bytes, sdFromCache
			if res.Validated {
				rec.Details = sdFromCacheValidated
			}
		}
	}
}

// refresh serves a background revalidation (stale-while-revalidate): a
// copy of a request, answered into nothing.
func (h *handler) refresh(r *http.Request) { h.ServeHTTP(&discard{h: http.Header{}}, r) }

// discard is the ResponseWriter of background revalidations.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// serveBucket serves r from backend bucket b: through the cache when
// its enableCdn is on.
func (h *handler) serveBucket(m *matched, b *plan.Bucket, w http.ResponseWriter, r *http.Request) {
	m.bucket = b
	if m.rec != nil {
		m.rec.Bucket = b.Name
	}
	if b.CDN != nil && h.cfg.Cache != nil {
		h.cached(m, b.Name, b.CDN, traceHeaders{}, w, r)
		return
	}
	h.bucketOrigin(m, w, r)
}

// bucketOrigin answers r from m's bucket's directory or S3-compatible
// bucket, with the bucket's custom response headers.
func (h *handler) bucketOrigin(m *matched, w http.ResponseWriter, r *http.Request) {
	b := m.bucket
	hd := w.Header()
	for _, ch := range b.Config.CustomResponseHeaders {
		name, value, _ := strings.Cut(ch, ":")
		hd.Add(strings.TrimSpace(name), strings.TrimSpace(value)) // variables are not expanded on buckets
	}
	cw := &countingWriter{ResponseWriter: w}
	switch {
	case b.S3 == nil:
		cdn.NewBucket(b.Dir).Serve(cw, r, m.fwdPath)
	case m.snap.Buckets[b.Name] != nil:
		m.snap.Buckets[b.Name].Serve(cw, r, m.fwdPath)
	default: // a snapshot built without its origins (none in serve)
		http.Error(cw, "503 Service Unavailable", http.StatusServiceUnavailable)
	}
	if rec := m.rec; rec != nil {
		rec.Status, rec.ResponseSize, rec.Details = cw.status, cw.n, sdSentByBucket
	}
}

// countingWriter notes the status and counts the body bytes written.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (c *countingWriter) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
	c.ResponseWriter.WriteHeader(s)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
