package cdnpolicy

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func ip(i int) *int   { return &i }
func bp(b bool) *bool { return &b }
func hdr(kv ...string) map[string][]string {
	h := map[string][]string{}
	for i := 0; i < len(kv); i += 2 {
		h[kv[i]] = append(h[kv[i]], kv[i+1])
	}
	return h
}

func TestParseCacheControl(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Directives
	}{
		{"", Directives{MaxAge: -1, SMaxAge: -1, StaleWhileRevalidate: -1, StaleIfError: -1}},
		{"public, max-age=60", Directives{Public: true, MaxAge: 60, SMaxAge: -1, StaleWhileRevalidate: -1, StaleIfError: -1}},
		{"Max-Age=60, s-maxage=\"30\"", Directives{MaxAge: 60, SMaxAge: 30, StaleWhileRevalidate: -1, StaleIfError: -1}},
		{"max-age=abc", Directives{MaxAge: 0, SMaxAge: -1, StaleWhileRevalidate: -1, StaleIfError: -1}},
		{"max-age=90, max-age=10", Directives{MaxAge: 10, SMaxAge: -1, StaleWhileRevalidate: -1, StaleIfError: -1}},
		{"private=\"Set-Cookie, X\", no-store", Directives{Private: true, NoStore: true, MaxAge: -1, SMaxAge: -1, StaleWhileRevalidate: -1, StaleIfError: -1}},
		{"max-age=99999999999999999999", Directives{MaxAge: maxDelta, SMaxAge: -1, StaleWhileRevalidate: -1, StaleIfError: -1}},
		{"no-cache, must-revalidate, stale-while-revalidate=5, stale-if-error=7", Directives{NoCache: true, MustRevalidate: true, MaxAge: -1, SMaxAge: -1, StaleWhileRevalidate: 5, StaleIfError: 7}},
	} {
		if got := ParseCacheControl([]string{tc.in}); got != tc.want {
			t.Errorf("%q: got %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestDecide(t *testing.T) {
	static := Compile(nil, nil, 0)
	origin := Compile(&config.CdnPolicy{CacheMode: "USE_ORIGIN_HEADERS"}, nil, 0)
	force := Compile(&config.CdnPolicy{CacheMode: "FORCE_CACHE_ALL", DefaultTTL: ip(100), ClientTTL: ip(50)}, nil, 0)
	neg := Compile(&config.CdnPolicy{NegativeCaching: bp(true)}, nil, 0)
	negPol := Compile(&config.CdnPolicy{NegativeCaching: bp(true), NegativeCachingPolicy: []config.NegativeCachingPolicy{{Code: 404, TTL: ip(7)}}}, nil, 0)
	keyed := Compile(&config.CdnPolicy{CacheKeyPolicy: &config.CacheKeyPolicy{IncludeHTTPHeaders: []string{"x-device"}}}, nil, 0)
	small := Compile(nil, nil, 1000)
	noStale := Compile(&config.CdnPolicy{ServeWhileStale: ip(0)}, nil, 0)
	get := Request{Method: "GET"}
	for _, tc := range []struct {
		name   string
		p      *Policy
		req    Request
		status int
		h      map[string][]string
		size   int64
		store  bool
		reason string
		ttl    time.Duration
		client string
		swr    time.Duration
	}{
		{"static image, no headers", static, get, 200, hdr("Content-Type", "image/png"), 10, true, "", time.Hour, "public, max-age=3600", 24 * time.Hour},
		{"static html, no headers", static, get, 200, hdr("Content-Type", "text/html"), 10, false, "no-explicit-ttl", 0, "", 0},
		{"static html, max-age", static, get, 200, hdr("Content-Type", "text/html", "Cache-Control", "max-age=60"), 10, true, "", time.Minute, "", 24 * time.Hour},
		{"static maxTtl clamps", static, get, 200, hdr("Cache-Control", "public, max-age=999999"), 10, true, "", 24 * time.Hour, "public, max-age=3600", 24 * time.Hour},
		{"static css private", static, get, 200, hdr("Content-Type", "text/css", "Cache-Control", "private"), 10, false, "no-store-or-private", 0, "", 0},
		{"static no-store", static, get, 200, hdr("Content-Type", "image/png", "Cache-Control", "no-store"), 10, false, "no-store-or-private", 0, "", 0},
		{"set-cookie", static, get, 200, hdr("Content-Type", "image/png", "Set-Cookie", "a=b"), 10, false, "set-cookie", 0, "", 0},
		{"set-cookie force", force, get, 200, hdr("Set-Cookie", "a=b"), 10, false, "set-cookie", 0, "", 0},
		{"vary accept-encoding", static, get, 200, hdr("Content-Type", "image/png", "Vary", "accept-encoding, Origin"), 10, true, "", time.Hour, "public, max-age=3600", 24 * time.Hour},
		{"vary cookie", static, get, 200, hdr("Content-Type", "image/png", "Vary", "Cookie"), 10, false, "vary", 0, "", 0},
		{"vary star", force, get, 200, hdr("Vary", "*"), 10, false, "vary", 0, "", 0},
		{"vary keyed header", keyed, get, 200, hdr("Content-Type", "image/png", "Vary", "X-Device"), 10, true, "", time.Hour, "public, max-age=3600", 24 * time.Hour},
		{"too large", small, get, 200, hdr("Content-Type", "image/png"), 1001, false, "too-large", 0, "", 0},
		{"HEAD not stored", static, Request{Method: "HEAD"}, 200, hdr("Content-Type", "image/png"), 10, false, "method", 0, "", 0},
		{"206 not stored", force, get, 206, hdr(), 10, false, "partial", 0, "", 0},
		{"500 never", force, get, 500, hdr("Cache-Control", "max-age=60"), 10, false, "status", 0, "", 0},
		{"authorization private", static, Request{Method: "GET", Authorization: true}, 200, hdr("Content-Type", "image/png"), 10, false, "authorization", 0, "", 0},
		{"authorization public", static, Request{Method: "GET", Authorization: true}, 200, hdr("Cache-Control", "public, max-age=5"), 10, true, "", 5 * time.Second, "", 24 * time.Hour},
		{"authorization s-maxage", origin, Request{Method: "GET", Authorization: true}, 200, hdr("Cache-Control", "s-maxage=5"), 10, true, "", 5 * time.Second, "", 24 * time.Hour},
		{"authorization force", force, Request{Method: "GET", Authorization: true}, 200, hdr("Cache-Control", "public, max-age=5"), 10, false, "authorization", 0, "", 0},
		{"origin needs headers", origin, get, 200, hdr("Content-Type", "image/png"), 10, false, "no-explicit-ttl", 0, "", 0},
		{"origin s-maxage wins", origin, get, 200, hdr("Cache-Control", "max-age=10, s-maxage=20"), 10, true, "", 20 * time.Second, "", 24 * time.Hour},
		{"origin no maxTtl clamp", origin, get, 200, hdr("Cache-Control", "max-age=999999"), 10, true, "", 999999 * time.Second, "", 24 * time.Hour},
		{"origin expires", origin, get, 200, hdr("Date", "Wed, 02 Dec 2026 10:00:00 GMT", "Expires", "Wed, 02 Dec 2026 10:01:00 GMT"), 10, true, "", time.Minute, "", 24 * time.Hour},
		{"origin bad expires is stale", origin, get, 200, hdr("Expires", "0"), 10, true, "", 0, "", 24 * time.Hour},
		{"origin no-cache revalidates", origin, get, 200, hdr("Cache-Control", "no-cache"), 10, true, "", 0, "", 0},
		{"origin must-revalidate no stale", origin, get, 200, hdr("Cache-Control", "max-age=9, must-revalidate"), 10, true, "", 9 * time.Second, "", 0},
		{"origin swr capped", origin, get, 200, hdr("Cache-Control", "max-age=9, stale-while-revalidate=30"), 10, true, "", 9 * time.Second, "", 30 * time.Second},
		{"serveWhileStale 0", noStale, get, 200, hdr("Cache-Control", "max-age=9, stale-while-revalidate=30"), 10, true, "", 9 * time.Second, "", 0},
		{"force ignores private", force, get, 200, hdr("Cache-Control", "private, no-store, max-age=5"), 10, true, "", 100 * time.Second, "public, max-age=50", 24 * time.Hour},
		{"force 404 without negative caching", force, get, 404, hdr(), 10, false, "status", 0, "", 0},
		{"404 explicit", static, get, 404, hdr("Cache-Control", "max-age=30"), 10, true, "", 30 * time.Second, "", 24 * time.Hour},
		{"404 negative default", neg, get, 404, hdr(), 10, true, "", 120 * time.Second, "", 24 * time.Hour},
		{"301 negative default", neg, get, 301, hdr(), 10, true, "", 10 * time.Minute, "", 24 * time.Hour},
		{"302 not negative by default", neg, get, 302, hdr(), 10, false, "status", 0, "", 0},
		{"negative policy replaces defaults", negPol, get, 410, hdr(), 10, false, "status", 0, "", 0},
		{"negative policy ttl", negPol, get, 404, hdr("Cache-Control", "max-age=999"), 10, true, "", 7 * time.Second, "", 24 * time.Hour},
		{"signed overrides private", static, Request{Method: "GET", Signed: true}, 200, hdr("Cache-Control", "private"), 10, true, "", time.Hour, "", 24 * time.Hour},
		{"cdn-cache-control wins", static, get, 200, hdr("Cache-Control", "no-store", "Cdn-Cache-Control", "max-age=40"), 10, true, "", 40 * time.Second, "", 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.p.Decide(tc.req, Response{Status: tc.status, Header: tc.h, Size: tc.size}, now)
			if d.Store != tc.store || d.Reason != tc.reason || d.TTL != tc.ttl || d.ClientCacheControl != tc.client || d.StaleWhileRevalidate != tc.swr {
				t.Errorf("got store=%v reason=%q ttl=%v client=%q swr=%v; want %v %q %v %q %v",
					d.Store, d.Reason, d.TTL, d.ClientCacheControl, d.StaleWhileRevalidate, tc.store, tc.reason, tc.ttl, tc.client, tc.swr)
			}
		})
	}
}

func TestKey(t *testing.T) {
	h := hdr("X-Device", "phone", "Cookie", "a=1; lang=fr", "Accept", "x")
	in := KeyInput{Backend: "bs", Scheme: "https", Host: "Example.COM", Path: "/a", RawQuery: "b=2&a=1&Signature=x&Expires=1&KeyName=k", Header: h}
	for _, tc := range []struct {
		name string
		k    *config.CacheKeyPolicy
		want string
	}{
		{"default", nil, "bs\x00https://example.com/a?b=2&a=1"},
		{"no host no protocol", &config.CacheKeyPolicy{IncludeHost: bp(false), IncludeProtocol: bp(false)}, "bs\x00/a?b=2&a=1"},
		{"no query", &config.CacheKeyPolicy{IncludeQueryString: bp(false)}, "bs\x00https://example.com/a"},
		{"whitelist", &config.CacheKeyPolicy{QueryStringWhitelist: []string{"a"}}, "bs\x00https://example.com/a?a=1"},
		{"blacklist", &config.CacheKeyPolicy{QueryStringBlacklist: []string{"a"}}, "bs\x00https://example.com/a?b=2"},
		{"header and cookie", &config.CacheKeyPolicy{IncludeHTTPHeaders: []string{"x-device"}, IncludeNamedCookies: []string{"lang"}},
			"bs\x00https://example.com/a?b=2&a=1\x00X-Device:phone\x00cookie:lang=fr"},
	} {
		kp := compileKey(tc.k)
		if got := kp.Key(in); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	// An unkeyed header (X-Forwarded-Host) never changes the key.
	kp := compileKey(nil)
	in2 := in
	in2.Header = hdr("X-Forwarded-Host", "evil.example")
	if kp.Key(in) != kp.Key(in2) {
		t.Error("an unkeyed header changed the key")
	}
}

func TestVaryKey(t *testing.T) {
	a, _ := VaryKey([]string{"Accept-Encoding"}, hdr("Accept-Encoding", "gzip, deflate, br"))
	b, _ := VaryKey([]string{"Accept-Encoding"}, hdr("Accept-Encoding", "br;q=1.0, gzip;q=0.8"))
	c, _ := VaryKey([]string{"Accept-Encoding"}, hdr("Accept-Encoding", "gzip;q=0, identity"))
	if a != b || a == c {
		t.Errorf("codings: %q %q %q", a, b, c)
	}
	long := make([]byte, 300)
	if _, ok := VaryKey([]string{"Origin"}, hdr("Origin", string(long))); ok {
		t.Error("a 300-byte Origin made a variant")
	}
}

func TestBypass(t *testing.T) {
	p := Compile(&config.CdnPolicy{BypassCacheOnRequestHeaders: []config.BypassCacheOnRequestHeader{{HeaderName: "x-debug"}}}, nil, 0)
	if _, ok := p.Bypass(hdr("X-Debug", "1")); !ok {
		t.Error("X-Debug did not bypass")
	}
	if _, ok := p.Bypass(hdr("Pragma", "no-cache")); ok {
		t.Error("Pragma bypassed")
	}
}

// sign computes Google's signature independently of Sign.
func sign(key []byte, s string) string {
	m := hmac.New(sha1.New, key)
	m.Write([]byte(s))
	return base64.URLEncoding.EncodeToString(m.Sum(nil))
}

func TestSignedURLs(t *testing.T) {
	key := []byte("0123456789abcdef")
	keyB64 := base64.URLEncoding.EncodeToString(key)
	k, err := DecodeKey(keyB64)
	if err != nil || string(k) != string(key) {
		t.Fatalf("DecodeKey: %v", err)
	}
	p := Compile(nil, map[string][]byte{"k1": key}, 0)
	exp := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	past := strconv.FormatInt(now.Add(-time.Second).Unix(), 10)
	base := "https://cdn.example/videos/a.mp4"
	good := base + "?Expires=" + exp + "&KeyName=k1"
	good += "&Signature=" + sign(key, good)
	withQ := base + "?x=1&Expires=" + exp + "&KeyName=k1"
	withQ += "&Signature=" + sign(key, withQ)
	prefix := base64.URLEncoding.EncodeToString([]byte("https://cdn.example/videos/"))
	pfxSigned := "URLPrefix=" + prefix + "&Expires=" + exp + "&KeyName=k1"
	pfx := "https://cdn.example/videos/b.mp4?" + pfxSigned + "&Signature=" + sign(key, pfxSigned)
	pfxOut := "https://cdn.example/other/b.mp4?" + pfxSigned + "&Signature=" + sign(key, pfxSigned)
	expired := base + "?Expires=" + past + "&KeyName=k1"
	expired += "&Signature=" + sign(key, expired)
	badKey := base + "?Expires=" + exp + "&KeyName=k2"
	badKey += "&Signature=" + sign(key, badKey)
	tampered := base + "?Expires=" + exp + "&KeyName=k1&Signature=" + sign(key, base+"?Expires=1&KeyName=k1")
	cookieVal := "URLPrefix=" + prefix + ":Expires=" + exp + ":KeyName=k1"
	cookie := cookieVal + ":Signature=" + sign(key, cookieVal)
	for _, tc := range []struct {
		name, method, url string
		h                 map[string][]string
		signed            bool
		err               error
	}{
		{"unsigned", "GET", base, hdr(), false, nil},
		{"good", "GET", good, hdr(), true, nil},
		{"good with query", "HEAD", withQ, hdr(), true, nil},
		{"prefix", "GET", pfx, hdr(), true, nil},
		{"prefix outside", "GET", pfxOut, hdr(), true, ErrSignedPrefix},
		{"expired", "GET", expired, hdr(), true, ErrSignedExpired},
		{"unknown key", "GET", badKey, hdr(), true, ErrSignedKey},
		{"tampered", "GET", tampered, hdr(), true, ErrSignedSignature},
		{"POST", "POST", good, hdr(), true, ErrSignedMethod},
		{"signature not last", "GET", good + "&x=1", hdr(), true, ErrSignedMalformed},
		{"cookie", "GET", "https://cdn.example/videos/c.ts", hdr("Cookie", "a=b; Cloud-CDN-Cookie="+cookie), true, nil},
		{"cookie outside prefix", "GET", "https://cdn.example/c.ts", hdr("Cookie", "Cloud-CDN-Cookie="+cookie), true, ErrSignedPrefix},
		{"cookie tampered", "GET", "https://cdn.example/videos/c.ts", hdr("Cookie", "Cloud-CDN-Cookie="+strings.Replace(cookieVal, exp, exp+"0", 1)+":Signature="+sign(key, cookieVal)), true, ErrSignedSignature},
	} {
		signed, err := p.Verify(tc.method, tc.url, tc.h, now)
		if signed != tc.signed || !errors.Is(err, tc.err) {
			t.Errorf("%s: got %v %v, want %v %v", tc.name, signed, err, tc.signed, tc.err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("public, max-age=60, s-maxage=\"3\"", "a=1&b=2&Signature=x", "gzip;q=0, br")
	f.Add("private=\"a,\\\"b\", no-cache", "&&=&", "")
	f.Fuzz(func(t *testing.T, cc, query, ae string) {
		d := ParseCacheControl([]string{cc})
		if d.MaxAge < -1 || d.MaxAge > maxDelta || d.SMaxAge < -1 || d.SMaxAge > maxDelta {
			t.Fatalf("delta out of range: %+v", d)
		}
		p := Compile(nil, map[string][]byte{"k": []byte("0123456789abcdef")}, 0)
		k := p.Key.Key(KeyInput{Backend: "b", Scheme: "https", Host: "h", Path: "/", RawQuery: query})
		if len(k) > len(query)+32 {
			t.Fatalf("key longer than its input: %q", k)
		}
		_, _ = VaryKey([]string{"Accept-Encoding"}, map[string][]string{"Accept-Encoding": {ae}})
		_, _ = p.Verify("GET", "https://h/?"+query, map[string][]string{"Cookie": {"Cloud-CDN-Cookie=" + cc}}, now)
		_ = p.Decide(Request{Method: "GET"}, Response{Status: 200, Header: map[string][]string{"Cache-Control": {cc}, "Expires": {query}}}, now)
	})
}
