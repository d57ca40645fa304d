package proxy

import (
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/plan"
)

// statusDetails of requests a security policy refused.
const (
	sdDeniedByPolicy     = "denied_by_security_policy"
	sdRedirectedByPolicy = "redirected_by_security_policy"
)

// enforce runs svc's security policies on r, the edge policy first,
// then the backend policy, before a backend is picked: a refused request
// never reaches a backend, never counts in the service's demand and
// never counts against a backend (no Outcome). It answers a refused
// request itself and returns false; an allowed one gets the allowing
// rule's request headers.
//
// When a policy inspects bodies (armor.Policy.NeedsBody) and r has one,
// the start of the body is read first (inspectBody) and r.Body made the
// whole body again; for the other policies the body is not touched.
func (h *handler) enforce(m *matched, svc *plan.Service, w http.ResponseWriter, r *http.Request) bool {
	edge, backend := m.snap.Armor.ForService(svc.ID)
	if edge == nil && backend == nil {
		return true
	}
	ar := armor.Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Target: r.RequestURI, Scheme: h.scheme(r), Host: r.Host, Header: r.Header}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		ar.Peer = ap.Addr().Unmap()
	}
	if r.TLS != nil {
		ar.SNI = r.TLS.ServerName
	}
	if m.snap.Geo != nil {
		ar.Geo = m.snap.Geo.RegionCode
	}
	if n := inspectSize(r, edge, backend); n > 0 {
		var ok bool
		if ar.Body, ok = h.inspectBody(m, w, r, n); !ok {
			return false
		}
	}
	now := time.Now()
	for i, p := range [2]*armor.Policy{edge, backend} {
		if p == nil {
			continue
		}
		d := p.Evaluate(&ar, now)
		if m.rec != nil {
			m.rec.Security[i] = d
		}
		if o := &d.Enforced; o.Denied() {
			h.refuse(m.rec, w, o)
			if m.rec != nil {
				m.rec.RequestSize += int64(len(ar.Body)) // read, never forwarded
			}
			return false
		}
		for _, hd := range d.Enforced.Headers {
			r.Header.Add(hd.HeaderName, hd.HeaderValue)
		}
	}
	return true
}

// refuse answers a request a policy denied or redirected.
func (h *handler) refuse(rec *Record, w http.ResponseWriter, o *armor.Outcome) {
	if o.Result == "REDIRECT" {
		w.Header().Set("Location", o.Location)
		w.WriteHeader(o.Status)
		if rec != nil {
			rec.Status, rec.Details = o.Status, sdRedirectedByPolicy
		}
		return
	}
	lbAnswer(rec, w, o.Status, sdDeniedByPolicy, "")
}

// inspectSize returns how much of r's body the policies inspect: the
// largest BodyInspectionSize of those that NeedsBody, 0 when none does
// or r has no body (as forward tells: no Content-Length or
// Transfer-Encoding in HTTP/1.1, END_STREAM on HTTP/2's headers).
func inspectSize(r *http.Request, edge, backend *armor.Policy) int {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return 0
	}
	n := 0
	for _, p := range [2]*armor.Policy{edge, backend} {
		if p != nil && p.NeedsBody() {
			n = max(n, p.BodyInspectionSize())
		}
	}
	return n
}

// inspectBody reads up to n bytes of r's body for the policies and
// makes r.Body the whole body again: the bytes read, then the rest,
// forwarded as they came (Content-Length or chunked, as the client sent
// it). The exchange starts here (m.bodyStart): its timeout bounds the
// read, as it bounds the body's upload to a backend, and then the rest
// of the exchange. A read that fails is the client's fault and no
// backend is tried: the answer is the one for a client body error, 400
// (408 when the client did not send the bytes in time)
// malformed_request_body, and the connection is closed.
func (h *handler) inspectBody(m *matched, w http.ResponseWriter, r *http.Request, n int) ([]byte, bool) {
	if r.ContentLength > 0 && r.ContentLength < int64(n) {
		n = int(r.ContentLength)
	}
	buf := make([]byte, n)
	m.bodyStart = time.Now()
	// Every server loop Spillway runs supports read deadlines (h1.Server,
	// net/http's HTTP/1 and HTTP/2 servers).
	rc := http.NewResponseController(w)
	deadline := m.bodyStart.Add(exchangeTimeout(m.a.Timeout, m.svc))
	bounded := rc.SetReadDeadline(deadline) == nil
	k, err := readUpTo(r.Body, buf)
	if err == nil && !time.Now().Before(deadline) {
		err = os.ErrDeadlineExceeded // no time is left for a backend: not its fault
	}
	if bounded && err == nil {
		// The rest goes at the backend's pace, as without policies.
		// After a failure the deadline stays: net/http's server drains
		// an unread body after the answer, and must not wait for a
		// stalled client.
		_ = rc.SetReadDeadline(time.Time{})
	}
	if m.rec != nil && err != nil {
		m.rec.RequestSize += int64(k)
	}
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err) {
			code = http.StatusRequestTimeout
		}
		w.Header().Set("Connection", "close")
		lbAnswer(m.rec, w, code, sdBadRequestBody, "")
		h.log.Debug("reading the request body for security policies failed", "service", m.svc.Name, "status", code, "err", &clientBodyError{err: err})
		return nil, false
	}
	r.Body = &prefixedBody{prefix: buf[:k], rc: r.Body}
	return buf[:k], true
}

// maxEmptyReads bounds the reads in a row that return nothing (as
// bufio's).
const maxEmptyReads = 100

// readUpTo reads from r until buf is full or r ends. It returns the
// bytes read and the error that stopped it, nil at the end of r.
func readUpTo(r io.Reader, buf []byte) (int, error) {
	n, empty := 0, 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		switch {
		case err == io.EOF:
			return n, nil
		case err != nil:
			return n, err
		case k > 0:
			empty = 0
		default:
			if empty++; empty >= maxEmptyReads {
				return n, io.ErrNoProgress
			}
		}
	}
	return n, nil
}

// prefixedBody is a request body whose start the policies read: those
// bytes, then the rest of the client's body.
type prefixedBody struct {
	prefix []byte
	rc     io.ReadCloser
}

func (b *prefixedBody) Read(p []byte) (int, error) {
	if len(b.prefix) > 0 {
		n := copy(p, b.prefix)
		b.prefix = b.prefix[n:]
		return n, nil
	}
	return b.rc.Read(p)
}

func (b *prefixedBody) Close() error { return b.rc.Close() }
