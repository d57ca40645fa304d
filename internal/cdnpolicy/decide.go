package cdnpolicy

import (
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// Request is what Decide reads of the client's request.
type Request struct {
	Method string
	// Authorization: the request carried an Authorization header.
	Authorization bool
	// Signed: the request carried a valid signed URL or cookie.
	Signed bool
}

// Response is what Decide reads of the origin's response.
type Response struct {
	Status int
	// Header has canonical keys (http.Header).
	Header map[string][]string
	// Size is the body size when known (Content-Length), else -1.
	Size int64
}

// Decision says whether and how a response is stored.
type Decision struct {
	// Store: the response may be stored. When false, Reason says why
	// (a short token, for logs and Cache-Status detail).
	Store  bool
	Reason string
	// TTL is the freshness lifetime, counted from when the origin made
	// the response (Age at receipt included); 0 means revalidate on
	// every use.
	TTL time.Duration
	// StaleWhileRevalidate and StaleIfError are how long past TTL the
	// object may be served while it is revalidated in the background,
	// or while the origin fails (both within serveWhileStale).
	StaleWhileRevalidate, StaleIfError time.Duration
	// Vary are the canonical request header names the response varies
	// on.
	Vary []string
	// ClientCacheControl, when not "", replaces the Cache-Control sent
	// to clients (clientTtl).
	ClientCacheControl string
}

// cacheableStatus are the statuses Google caches (given explicit
// freshness or negative caching); 206 is left out because Spillway
// stores only whole objects.
func cacheableStatus(s int) bool {
	switch s {
	case 200, 203, 204, 300, 301, 302, 307, 308, 404, 405, 410, 421, 451, 501:
		return true
	}
	return false
}

func successful(s int) bool { return s == 200 || s == 203 || s == 204 }

// Decide decides whether resp, the origin's answer to req, may be stored
// under p, and for how long. now is when the response arrived.
func (p *Policy) Decide(req Request, resp Response, now time.Time) Decision {
	if why := p.refuse(req, resp); why != "" {
		return Decision{Reason: why}
	}
	h := resp.Header
	cc := p.directives(h)
	vary, ok := p.vary(h)
	if !ok {
		return Decision{Reason: "vary"}
	}
	force := p.Mode == ForceCacheAll
	if !force && !req.Signed && (cc.NoStore || cc.Private) {
		return Decision{Reason: "no-store-or-private"}
	}
	if req.Authorization && (force || !(cc.Public || cc.SMaxAge >= 0 || cc.MustRevalidate)) {
		return Decision{Reason: "authorization"}
	}
	ttl, explicit := explicitTTL(cc, h, now)
	d := Decision{Store: true, Vary: vary}
	switch neg, isNeg := p.NegativeTTL(resp.Status); {
	case isNeg:
		d.TTL = neg
	case req.Signed && !force:
		d.TTL = p.SignedURLMaxAge
	case !successful(resp.Status):
		if force || !explicit {
			return Decision{Reason: "status"}
		}
		d.TTL = p.clamp(ttl)
	case force:
		d.TTL = p.DefaultTTL
		d.ClientCacheControl = "public, max-age=" + seconds(min(p.ClientTTL, p.DefaultTTL))
	case explicit:
		d.TTL = p.clamp(ttl)
		if p.Mode == CacheAllStatic && cc.MaxAge >= 0 && time.Duration(cc.MaxAge)*time.Second > p.ClientTTL {
			d.ClientCacheControl = "public, max-age=" + seconds(p.ClientTTL)
		}
	case p.Mode == CacheAllStatic && staticType(first(h, "Content-Type")):
		d.TTL = p.DefaultTTL
		d.ClientCacheControl = "public, max-age=" + seconds(min(p.ClientTTL, p.DefaultTTL))
	default:
		return Decision{Reason: "no-explicit-ttl"}
	}
	d.StaleWhileRevalidate, d.StaleIfError = p.staleWindows(cc, force)
	return d
}

// refuse returns why resp cannot be stored whatever its freshness, ""
// when it may be.
func (p *Policy) refuse(req Request, resp Response) string {
	switch {
	case req.Method != "GET":
		return "method"
	case resp.Status == 206:
		return "partial"
	case !cacheableStatus(resp.Status):
		return "status"
	case resp.Size > p.MaxObjectBytes:
		return "too-large"
	}
	if _, ok := resp.Header["Set-Cookie"]; ok {
		return "set-cookie"
	}
	return ""
}

// directives returns the response's caching directives:
// CDN-Cache-Control (RFC 9213) when present, else Cache-Control.
func (p *Policy) directives(h map[string][]string) Directives {
	if v, ok := h["Cdn-Cache-Control"]; ok {
		return ParseCacheControl(v)
	}
	return ParseCacheControl(h["Cache-Control"])
}

// vary returns the canonical names of the response's Vary, and false
// when one is not allowed (or is "*").
func (p *Policy) vary(h map[string][]string) ([]string, bool) {
	var names []string
	for _, v := range h["Vary"] {
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if f == "*" {
				return nil, false
			}
			name := textproto.CanonicalMIMEHeaderKey(f)
			if !p.varyAllowed(name) {
				return nil, false
			}
			names = append(names, name)
		}
	}
	return names, true
}

// explicitTTL returns the origin's freshness lifetime (s-maxage, then
// max-age, then Expires minus Date) and whether it set one; no-cache
// sets 0. The lifetime is counted from when the response was made.
func explicitTTL(cc Directives, h map[string][]string, now time.Time) (time.Duration, bool) {
	switch {
	case cc.NoCache:
		return 0, true
	case cc.SMaxAge >= 0:
		return time.Duration(cc.SMaxAge) * time.Second, true
	case cc.MaxAge >= 0:
		return time.Duration(cc.MaxAge) * time.Second, true
	}
	exp, ok := h["Expires"]
	if !ok || len(exp) == 0 {
		return 0, false
	}
	e, ok := ParseHTTPDate(exp[0])
	if !ok {
		return 0, true // an invalid Expires means already expired
	}
	date := now
	if d, ok := ParseHTTPDate(first(h, "Date")); ok {
		date = d
	}
	if e.Before(date) {
		return 0, true
	}
	return e.Sub(date), true
}

// clamp caps an origin TTL at maxTtl under CACHE_ALL_STATIC.
func (p *Policy) clamp(ttl time.Duration) time.Duration {
	if p.Mode == CacheAllStatic && ttl > p.MaxTTL {
		return p.MaxTTL
	}
	return ttl
}

// staleWindows returns the stale-while-revalidate and stale-if-error
// windows: the origin's directives, else serveWhileStale, never more
// than serveWhileStale; none after must-revalidate.
func (p *Policy) staleWindows(cc Directives, force bool) (swr, sie time.Duration) {
	if p.ServeWhileStale <= 0 || (!force && cc.MustRevalidate) {
		return 0, 0
	}
	pick := func(d int64) time.Duration {
		if force || d < 0 {
			return p.ServeWhileStale
		}
		return min(time.Duration(d)*time.Second, p.ServeWhileStale)
	}
	swr, sie = pick(cc.StaleWhileRevalidate), pick(cc.StaleIfError)
	if cc.NoCache && !force {
		swr = 0 // no-cache: never used without revalidating first
	}
	return swr, sie
}

// staticType reports whether a Content-Type is static content as Google
// lists it for CACHE_ALL_STATIC: web assets (CSS, JavaScript), fonts,
// images, video, audio, PDF and PostScript.
func staticType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	typ, _, _ := strings.Cut(mt, "/")
	switch typ {
	case "image", "video", "audio", "font":
		return true
	}
	switch mt {
	case "text/css", "text/ecmascript", "text/javascript", "application/javascript",
		"application/x-javascript", "application/ecmascript", "application/pdf", "application/postscript":
		return true
	}
	return false
}

// AgeAtReceipt returns the origin's Age header as a duration (0 when
// absent or malformed).
func AgeAtReceipt(h map[string][]string) time.Duration {
	a := first(h, "Age")
	if a == "" {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(min(n, maxDelta)) * time.Second
}

func first(h map[string][]string, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }
