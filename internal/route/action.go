package route

import (
	"math/bits"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// Action is the compiled result of one rule: what to do with a request
// that matched it. Actions are built by Compile, shared by every request
// that matches the rule, and must not be modified.
type Action struct {
	// Services are the weighted backend services (or backend buckets), names
	// reduced to the last path segment of their self-link. A plain `service`
	// is one entry of weight 1. Empty when Redirect is set; otherwise the
	// weights sum to more than zero.
	Services []WeightedService
	// Redirect is set for urlRedirect / defaultUrlRedirect rules.
	Redirect *Redirect
	// Rewrite is routeAction.urlRewrite, nil when absent.
	Rewrite *Rewrite
	// HeaderActions are the header actions to apply, in application order:
	// route rule, path matcher, URL map. The chosen WeightedService's own
	// HeaderAction comes before all of them.
	HeaderActions []*config.HTTPHeaderAction
	// Timeout is routeAction.timeout; 0 means unset (the backend service's
	// timeoutSec applies).
	Timeout time.Duration
	// Retry is routeAction.retryPolicy, nil when absent.
	Retry *config.RetryPolicy
	// Mirror is routeAction.requestMirrorPolicy, nil when absent.
	Mirror *config.RequestMirrorPolicy
	// Fault is routeAction.faultInjectionPolicy, nil when absent.
	Fault *config.FaultInjectionPolicy
	// Source names the rule, for explain output, e.g.
	// "urlMaps[um].pathMatchers[web].routeRules[priority=1]".
	Source string

	cum   []uint64 // cumulative weights of Services
	total uint64
	draws uint64 // NextDraw calls (atomic)
}

// weyl is 2⁶⁴/φ: its multiples (mod 2⁶⁴) are the golden-ratio Weyl
// sequence, the most evenly spread sequence in [0, 1) (see
// engine.View.NextDraw, which does the same for backend splits).
const weyl = 0x9E3779B97F4A7C15

// NextDraw returns the draw for this action's next PickService: the
// action's next golden-ratio Weyl value, so that a 95/5 split sends 5 of
// every 100 requests to the canary rather than 5 ± 2.2.
func (a *Action) NextDraw() uint64 {
	return atomic.AddUint64(&a.draws, 1) * weyl
}

// WeightedService is one backend service an Action may send a request to.
type WeightedService struct {
	// Name is the backend service name (config.RefName of the reference).
	Name string
	// Weight is 0..1000; 0 is never picked.
	Weight int
	// HeaderAction is applied before the Action's HeaderActions when this
	// service is picked; nil when absent.
	HeaderAction *config.HTTPHeaderAction
}

// Redirect is a compiled HTTPRedirectAction.
type Redirect struct {
	// Code is the response status: 301 (default), 302, 303, 307 or 308.
	Code int
	// HTTPS switches the scheme to https.
	HTTPS bool
	// Host replaces the request host when not empty.
	Host string
	// Path replaces the whole path when not empty.
	Path string
	// Prefix replaces MatchedPrefix when not empty.
	Prefix string
	// MatchedPrefix is the portion of the path the rule matched (see the
	// package doc); "" with Prefix set means the whole path.
	MatchedPrefix string
	// StripQuery drops the query string.
	StripQuery bool

	prefixLen int // bytes of the path Prefix replaces; -1 = whole path
}

// Rewrite is a compiled URLRewrite.
type Rewrite struct {
	// Host replaces the Host header when not empty.
	Host string
	// PathPrefix replaces MatchedPrefix when not empty.
	PathPrefix string
	// PathTemplate is the pathTemplateRewrite source when not empty.
	PathTemplate string
	// MatchedPrefix is the portion of the path the rule matched (see the
	// package doc); "" with PathPrefix set means the whole path.
	MatchedPrefix string

	prefixLen int            // bytes of the path PathPrefix replaces; -1 = whole path
	match     *pathTemplate  // the pathTemplateMatch whose captures PathTemplate uses
	pieces    []rewritePiece // compiled PathTemplate
}

// PickService picks a service by weight from a uniformly distributed
// random number: service i is chosen with probability weight_i / Σweight,
// and a zero weight is never chosen. It returns the name and the index in
// Services, or ("", -1) for a redirect. It does not allocate.
func (a *Action) PickService(u uint64) (name string, i int) {
	if a.total == 0 {
		return "", -1
	}
	// x is uniform in [0, total): the high word of u·total.
	x, _ := bits.Mul64(u, a.total)
	for i, c := range a.cum {
		if x < c {
			return a.Services[i].Name, i
		}
	}
	return "", -1 // unreachable: x < total = cum[len-1]
}

// primary returns the service with the highest weight (the first on ties).
func (a *Action) primary() string {
	best := -1
	for i, s := range a.Services {
		if best < 0 || s.Weight > a.Services[best].Weight {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return a.Services[best].Name
}

// cut bounds a prefix length by the path: -1 means the whole path.
func cut(n int, path string) int {
	if n < 0 || n > len(path) {
		return len(path)
	}
	return n
}

// RewriteURL returns the host and path to forward after applying the
// action's urlRewrite (the request's own host and path when there is none).
// The query string is unchanged and not part of the result.
func (a *Action) RewriteURL(r *Request) (host, path string) {
	host, path = r.Host, r.path()
	rw := a.Rewrite
	if rw == nil {
		return host, path
	}
	if rw.Host != "" {
		host = rw.Host
	}
	switch {
	case rw.PathPrefix != "":
		path = rw.PathPrefix + path[cut(rw.prefixLen, path):]
	case rw.pieces != nil:
		var caps captures
		if rw.match.match(path, &caps) {
			path = render(rw.pieces, path, &caps)
		}
	}
	return host, path
}

// RedirectURL returns the Location of a redirect action for a request
// received with the given scheme ("http" or "https"), or "" when the action
// is not a redirect. An httpsRedirect drops an explicit ":80" port. The
// path comes from the request's escaped path, so percent-encoded bytes
// (%00, %0D%0A, %3F) stay encoded.
func (a *Action) RedirectURL(r *Request, scheme string) string {
	rd := a.Redirect
	if rd == nil {
		return ""
	}
	host := r.Host
	if rd.HTTPS {
		scheme = "https"
		host = strings.TrimSuffix(host, ":80")
	}
	if rd.Host != "" {
		host = rd.Host
	}
	var path string
	query := r.RawQuery
	switch {
	case rd.Path != "":
		path = rd.Path
		if p, q, ok := strings.Cut(path, "?"); ok {
			path, query = p, q
		}
	case rd.Prefix != "":
		// prefixLen counts bytes of the decoded path. The escaped path
		// starts with the same bytes when the matched prefix needed no
		// escaping; otherwise the rest is escaped from the decoded path.
		dec, esc := r.path(), r.escapedPath()
		n := cut(rd.prefixLen, dec)
		if strings.HasPrefix(esc, dec[:n]) {
			path = rd.Prefix + esc[n:]
		} else {
			path = rd.Prefix + escapePath(dec[n:])
		}
	default:
		path = r.escapedPath()
	}
	if rd.StripQuery {
		query = ""
	}
	var b strings.Builder
	b.Grow(len(scheme) + 3 + len(host) + len(path) + 1 + len(query))
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(host)
	b.WriteString(path)
	if query != "" {
		b.WriteByte('?')
		b.WriteString(query)
	}
	return b.String()
}

// Percent reports whether an event of the given percentage (nil: 100)
// happens for the uniform random number u: the draw fault injection and
// request mirroring use, shared by the proxy and the simulator.
func Percent(u uint64, pct *float64) bool {
	p := 100.0
	if pct != nil {
		p = *pct
	}
	switch {
	case p >= 100:
		return true
	case p <= 0:
		return false
	}
	return float64(u>>11)*(1.0/(1<<53))*100 < p
}
