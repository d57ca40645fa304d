package proxy

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
)

// pickEndpoint chooses the endpoint of svc for r: engine.View.PickClient with the
// request's session-affinity key.
func (h *handler) pickEndpoint(w http.ResponseWriter, r *http.Request, snap *Snapshot, svc *plan.Service, c engine.Client) engine.Decision {
	key, ok := h.affinityKey(w, r, svc, c)
	return snap.View.PickClient(svc.ID, c, snap.View.NextDraw(svc.ID, c.Region), key, ok)
}

// affinityKey returns the session-affinity key of r for svc (ok false:
// none). Affinity only has an effect under a consistent-hash
// localityLbPolicy (RING_HASH, MAGLEV); under the others no key is
// computed and no cookie issued.
//
//   - CLIENT_IP: the client's IP address (r.RemoteAddr without port),
//     hashed once per request in c.
//   - HEADER_FIELD: the value of consistentHash.httpHeaderName; no key when
//     the header is absent.
//   - GENERATED_COOKIE, HTTP_COOKIE: the value of the affinity cookie. When
//     the request has none, a random value is generated, used as the key
//     and set on the response (Set-Cookie added to w's header map before
//     the backend's headers are merged in, see keepSetCookie).
func (h *handler) affinityKey(w http.ResponseWriter, r *http.Request, svc *plan.Service, c engine.Client) (uint64, bool) {
	a := &svc.Affinity
	if a.Kind == plan.AffinityNone || !svc.HashPolicy() {
		return 0, false
	}
	switch a.Kind {
	case plan.AffinityClientIP:
		return c.Addr, c.HasAddr // HashKey of the client's IP, as handler.client computes it
	case plan.AffinityHeaderField:
		switch vv := r.Header[a.Header]; len(vv) {
		case 0:
			return 0, false
		case 1:
			return engine.HashKey(vv[0]), true
		default:
			return engine.HashKey(strings.Join(vv, ",")), true
		}
	case plan.AffinityGeneratedCookie, plan.AffinityHTTPCookie:
		if v, ok := cookieValue(r.Header["Cookie"], a.Cookie); ok {
			return engine.HashKey(v), true
		}
		v := strconv.FormatUint(h.rand(), 16)
		hd := w.Header()
		hd["Set-Cookie"] = append(hd["Set-Cookie"], affinityCookie(a, v))
		return engine.HashKey(v), true
	}
	return 0, false
}

// affinityCookie renders the Set-Cookie value of a generated affinity
// cookie: HttpOnly, with the configured path, and Max-Age from the TTL
// (rounded up to a second; none for a zero TTL, a session cookie).
func affinityCookie(a *plan.Affinity, value string) string {
	var b strings.Builder
	b.Grow(len(a.Cookie) + len(value) + len(a.CookiePath) + 40)
	b.WriteString(a.Cookie)
	b.WriteByte('=')
	b.WriteString(value)
	if a.CookiePath != "" {
		b.WriteString("; Path=")
		b.WriteString(a.CookiePath)
	}
	if a.CookieTTL > 0 {
		secs := (a.CookieTTL + 999_999_999) / 1_000_000_000
		b.WriteString("; Max-Age=")
		b.WriteString(strconv.FormatInt(int64(secs), 10))
	}
	b.WriteString("; HttpOnly")
	return b.String()
}

// cookieValue returns the value of the first cookie called name in the
// Cookie header values, without surrounding quotes. It does not allocate.
func cookieValue(headers []string, name string) (string, bool) {
	for _, line := range headers {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			part = strings.TrimSpace(part)
			k, v, ok := strings.Cut(part, "=")
			if !ok || strings.TrimSpace(k) != name {
				continue
			}
			v = strings.TrimSpace(v)
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return "", false
}

// keepSetCookie keeps the affinity cookie that pick put in the response
// header map dst when the backend response also sets cookies: it appends
// dst's Set-Cookie values to the backend's, which copyHeaders then copies
// over dst's.
func keepSetCookie(dst, backend http.Header) {
	ours := dst["Set-Cookie"]
	theirs := backend["Set-Cookie"]
	if len(ours) == 0 || len(theirs) == 0 {
		return
	}
	merged := make([]string, 0, len(theirs)+len(ours))
	backend["Set-Cookie"] = append(append(merged, theirs...), ours...)
}

// countInflight counts an attempt to ep in the in-flight counters that
// LEAST_REQUEST reads (and the dashboard shows, whatever the policy) and
// returns them, for `defer x.countInflight(ep).Done(ep)`: two atomic adds
// on the endpoint's own counter. It returns nil (whose Done does
// nothing) without a snapshot.
func (x *exchange) countInflight(ep *plan.Endpoint) *engine.Inflight {
	snap := x.h.cfg.Snapshot()
	if snap == nil || snap.View == nil {
		return nil
	}
	in := snap.View.Inflight()
	in.Add(ep, 1)
	return in
}

// generatedCookie returns "name=value" of the affinity cookie pick set on
// the response for svc (affinityKey), "" when it set none: an edge
// passes it on to the regional layer, which then hashes the same key.
func generatedCookie(w http.ResponseWriter, svc *plan.Service) string {
	a := &svc.Affinity
	if a.Kind != plan.AffinityGeneratedCookie && a.Kind != plan.AffinityHTTPCookie {
		return ""
	}
	sc := w.Header()["Set-Cookie"]
	if len(sc) == 0 {
		return ""
	}
	v := sc[len(sc)-1]
	if !strings.HasPrefix(v, a.Cookie+"=") {
		return ""
	}
	v, _, _ = strings.Cut(v, ";")
	return v
}
