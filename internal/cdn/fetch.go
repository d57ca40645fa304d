package cdn

import (
	"net/http"
	"strconv"
	"time"

	"github.com/spillwaylb/spillway/internal/cdnpolicy"
)

// conditionalHeaders are the client's conditional and range fields: a
// fill drops them (it fetches the whole object) and the cache answers
// them from the stored object.
var conditionalHeaders = []string{"Range", "If-Range", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since"}

// fetch asks the origin for the object of key (revalidating stale when
// it has validators), stores what may be stored, and answers the
// client. It returns the object stored, nil when none.
func (c *Cache) fetch(w http.ResponseWriter, r *http.Request, q *Request, key string, stale *Object, origin Origin, res *Result) *Object {
	start := c.now()
	r2 := r.Clone(r.Context())
	plain := true
	for _, h := range conditionalHeaders {
		if _, ok := r2.Header[h]; ok {
			plain = false
			delete(r2.Header, h)
		}
	}
	conditional := false
	if stale != nil && !stale.Marker {
		if v := stale.Header["Etag"]; len(v) > 0 {
			r2.Header["If-None-Match"] = v[:1]
			conditional = true
		}
		if v := stale.Header["Last-Modified"]; len(v) > 0 {
			r2.Header["If-Modified-Since"] = v[:1]
			conditional = true
		}
	} else {
		stale = nil
	}
	cw := &capture{w: w, c: c, r: r, q: q, stale: stale, conditional: conditional,
		stream: plain && r.Method == http.MethodGet && !IsRefresh(r.Context()), start: start}
	origin(cw, r2)
	return cw.finish(key, res)
}

// capture modes, chosen when the origin's status line arrives.
const (
	modeNone      = iota // nothing written yet
	modePass             // not stored: written through
	modeStore            // stored; written through when streaming
	modeValidated        // 304 to our revalidation: serve the refreshed object
	modeStaleErr         // origin error with a stale object in stale-if-error
)

// capture is the ResponseWriter a fill hands the origin: it decides at
// WriteHeader whether the response is stored, and keeps the body.
type capture struct {
	w           http.ResponseWriter
	c           *Cache
	r           *http.Request
	q           *Request
	stale       *Object
	conditional bool
	stream      bool // write through to the client while storing
	start       time.Time

	mode     int
	status   int
	header   http.Header // the origin's header as stored
	decision cdnpolicy.Decision
	body     []byte
	tooLarge bool
	size     int64 // the origin's Content-Length, -1 when it sent none
	headSent bool  // the client's header was written
	n        int64
}

func (cw *capture) Header() http.Header { return cw.w.Header() }

// Unwrap lets http.ResponseController reach the client's writer.
func (cw *capture) Unwrap() http.ResponseWriter { return cw.w }

func (cw *capture) Flush() {
	if cw.headSent {
		_ = http.NewResponseController(cw.w).Flush()
	}
}

func (cw *capture) WriteHeader(status int) {
	if cw.mode != modeNone || status < 200 {
		if status < 200 && cw.stream {
			cw.w.WriteHeader(status)
		}
		return
	}
	cw.status = status
	h := cw.w.Header()
	now := cw.c.now()
	switch {
	case status == http.StatusNotModified && cw.conditional:
		cw.mode = modeValidated
		cw.header = h.Clone()
		clear(h)
		return
	case status >= 500 && cw.stale != nil && cw.stale.age(now) < cw.stale.TTL+cw.stale.SIE:
		cw.mode = modeStaleErr
		clear(h)
		return
	}
	cw.size = -1
	if cl := h.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil {
			cw.size = n
		}
	}
	req := cdnpolicy.Request{Method: http.MethodGet, Authorization: len(cw.r.Header["Authorization"]) > 0, Signed: cw.q.Signed}
	cw.decision = cw.q.Policy.Decide(req, cdnpolicy.Response{Status: status, Header: h, Size: cw.size}, now)
	if !cw.decision.Store {
		cw.mode = modePass
		h["Cache-Status"] = []string{"Spillway; fwd=" + cw.fwd() + "; fwd-status=" + itoa(int64(status)) + "; detail=" + cw.decision.Reason}
		cw.send(status)
		return
	}
	cw.mode = modeStore
	cw.header = storedHeader(h)
	if cc := cw.decision.ClientCacheControl; cc != "" {
		h["Cache-Control"] = []string{cc}
	}
	h["Cache-Status"] = []string{"Spillway; fwd=" + cw.fwd() + "; fwd-status=" + itoa(int64(status)) + "; stored"}
	if cw.stream {
		cw.send(status)
	}
}

// fwd is the Cache-Status fwd parameter of this fetch.
func (cw *capture) fwd() string {
	if cw.stale != nil {
		return "stale"
	}
	return "miss"
}

func (cw *capture) send(status int) {
	cw.headSent = true
	cw.w.WriteHeader(status)
}

func (cw *capture) Write(p []byte) (int, error) {
	if cw.mode == modeNone {
		cw.WriteHeader(http.StatusOK)
	}
	switch cw.mode {
	case modePass:
		n, err := cw.w.Write(p)
		cw.n += int64(n)
		return n, err
	case modeStore:
		if !cw.tooLarge {
			if int64(len(cw.body)+len(p)) > cw.q.Policy.MaxObjectBytes {
				cw.overflow()
			} else {
				cw.body = append(cw.body, p...)
			}
		}
		if cw.headSent {
			n, err := cw.w.Write(p)
			cw.n += int64(n)
			return n, err
		}
	}
	return len(p), nil
}

// overflow gives up storing a body over the size bound: what was kept
// goes to the client if it has not yet, and the rest streams through.
func (cw *capture) overflow() {
	cw.tooLarge = true
	if !cw.headSent {
		cw.w.Header()["Cache-Status"] = []string{"Spillway; fwd=miss; detail=too-large"}
		cw.send(cw.status)
		n, _ := cw.w.Write(cw.body)
		cw.n += int64(n)
	}
	cw.body = nil
}

// finish stores what the origin sent, when it may be stored, and serves
// the client what it has not been sent yet.
func (cw *capture) finish(key string, res *Result) *Object {
	c, now := cw.c, cw.c.now()
	switch cw.mode {
	case modeValidated:
		return cw.revalidated(key, now, res)
	case modeStaleErr:
		res.Hit = true
		c.serve(cw.w, cw.r, cw.stale, c.Counters(cw.q.Backend), now, "Spillway; fwd=stale; fwd-status="+itoa(int64(cw.status))+"; detail=stale-if-error", res)
		return nil
	case modeStore:
		if cw.tooLarge || (cw.size >= 0 && cw.size != int64(len(cw.body))) {
			return nil
		}
		o := cw.object(cw.status, cw.header, cw.body, now)
		if !c.put(key, cw.r.Header, o, cw.start) {
			o = nil
		} else {
			res.FillBytes = int64(len(cw.body))
			c.Counters(cw.q.Backend).FillBytes.Add(uint64(len(cw.body)))
		}
		if !cw.headSent && o != nil {
			clear(cw.w.Header())
			c.serve(cw.w, cw.r, o, c.Counters(cw.q.Backend), now, "Spillway; fwd="+cw.fwd()+"; stored", res)
			res.Hit = false
		} else if !cw.headSent {
			cw.send(cw.status)
			_, _ = cw.w.Write(cw.body)
		}
		return o
	}
	return nil
}

// revalidated refreshes the stale object with the 304's header and
// serves it.
func (cw *capture) revalidated(key string, now time.Time, res *Result) *Object {
	c, s := cw.c, cw.stale
	h := s.Header.Clone()
	for _, k := range []string{"Cache-Control", "Cdn-Cache-Control", "Expires", "Date", "Etag", "Last-Modified", "Vary", "Age"} {
		if v, ok := cw.header[k]; ok {
			h[k] = v
		}
	}
	req := cdnpolicy.Request{Method: http.MethodGet, Authorization: len(cw.r.Header["Authorization"]) > 0, Signed: cw.q.Signed}
	cw.decision = cw.q.Policy.Decide(req, cdnpolicy.Response{Status: s.Status, Header: h, Size: int64(len(s.Body))}, now)
	res.Validated, res.Hit = true, true
	o := s
	if cw.decision.Store {
		o = cw.object(s.Status, storedHeader(h), s.Body, now)
		if !c.put(key, cw.r.Header, o, cw.start) {
			o = s
		}
	}
	c.serve(cw.w, cw.r, o, c.Counters(cw.q.Backend), now, "Spillway; fwd=stale; fwd-status=304", res)
	if o == s {
		return nil
	}
	return o
}

// object builds the stored object of a response.
func (cw *capture) object(status int, h http.Header, body []byte, now time.Time) *Object {
	d := cw.decision
	age := cdnpolicy.AgeAtReceipt(h)
	delete(h, "Age")
	return (&Object{
		Host: cw.q.Host, Path: pathOnly(cw.q.Path), Status: status, Header: h, Body: body,
		Date: now.Add(-age), TTL: d.TTL, SWR: d.StaleWhileRevalidate, SIE: d.StaleIfError,
		ClientCC: d.ClientCacheControl, Vary: d.Vary,
	}).prepare()
}

// storedHeader is the origin's header as stored: without the fields
// that are per response (Cache-Status, Content-Length, which serving
// sets again) and without Set-Cookie (never stored).
func storedHeader(h http.Header) http.Header {
	s := h.Clone()
	for _, k := range []string{"Cache-Status", "Content-Length", "Set-Cookie", "X-Spillway-Status-Details"} {
		delete(s, k)
	}
	if s == nil {
		s = http.Header{}
	}
	return s
}

func pathOnly(p string) string {
	for i := 0; i < len(p); i++ {
		if p[i] == '?' {
			return p[:i]
		}
	}
	return p
}
