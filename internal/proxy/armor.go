package proxy

import (
	"net/http"
	"net/netip"
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
