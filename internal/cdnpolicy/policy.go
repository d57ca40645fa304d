package cdnpolicy

import (
	"net/textproto"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// Mode is a cdnPolicy.cacheMode.
type Mode uint8

// The cache modes.
const (
	CacheAllStatic   Mode = iota // CACHE_ALL_STATIC (default)
	UseOriginHeaders             // USE_ORIGIN_HEADERS
	ForceCacheAll                // FORCE_CACHE_ALL
)

// String returns Google's name of the mode.
func (m Mode) String() string {
	switch m {
	case UseOriginHeaders:
		return "USE_ORIGIN_HEADERS"
	case ForceCacheAll:
		return "FORCE_CACHE_ALL"
	}
	return "CACHE_ALL_STATIC"
}

// Google's defaults (docs/cdn.md).
const (
	DefaultTTL             = time.Hour
	DefaultMaxTTL          = 24 * time.Hour
	DefaultClientTTL       = time.Hour
	DefaultServeWhileStale = 24 * time.Hour
	DefaultSignedURLMaxAge = time.Hour
	// DefaultMaxObjectBytes is the largest object stored unless
	// spillway.cdn.maxObjectBytes says otherwise: Google's limit for
	// origins that do not serve byte ranges.
	DefaultMaxObjectBytes = 10 << 20
)

// DefaultNegativeTTLs are Google's negative caching TTLs, used when
// negativeCaching is on and negativeCachingPolicy is empty.
var defaultNegativeTTLs = map[int]time.Duration{
	300: 10 * time.Minute, 301: 10 * time.Minute, 308: 10 * time.Minute,
	404: 120 * time.Second, 410: 120 * time.Second, 451: 120 * time.Second,
	405: 60 * time.Second, 501: 60 * time.Second,
}

// Policy is a compiled cdnPolicy. It is immutable.
type Policy struct {
	Mode               Mode
	DefaultTTL, MaxTTL time.Duration
	ClientTTL          time.Duration
	ServeWhileStale    time.Duration
	SignedURLMaxAge    time.Duration
	RequestCoalescing  bool
	NegativeCaching    bool
	negativeTTL        map[int]time.Duration
	Key                KeyPolicy
	bypass             []string // canonical header names
	MaxObjectBytes     int64
	signedKeys         map[string][]byte // by key name
}

// KeyPolicy is a compiled cacheKeyPolicy.
type KeyPolicy struct {
	IncludeHost, IncludeProtocol, IncludeQuery bool
	// Whitelist, when non-nil, keeps only these query parameters;
	// Blacklist drops these.
	Whitelist, Blacklist map[string]bool
	// Headers are canonical header names whose values join the key.
	Headers []string
	// Cookies are cookie names whose values join the key.
	Cookies []string
}

// Compile compiles a cdnPolicy (nil: every default). keys are the
// backend's signed URL keys (name → 16-byte key); maxObject is the size
// bound of one object (0: DefaultMaxObjectBytes). The policy must have
// passed config.Validate.
func Compile(c *config.CdnPolicy, keys map[string][]byte, maxObject int64) *Policy {
	if c == nil {
		c = &config.CdnPolicy{}
	}
	p := &Policy{
		DefaultTTL:        secs(c.DefaultTTL, DefaultTTL),
		MaxTTL:            secs(c.MaxTTL, DefaultMaxTTL),
		ClientTTL:         secs(c.ClientTTL, DefaultClientTTL),
		ServeWhileStale:   secs(c.ServeWhileStale, DefaultServeWhileStale),
		SignedURLMaxAge:   secs(c.SignedURLCacheMaxAgeSec, DefaultSignedURLMaxAge),
		RequestCoalescing: c.RequestCoalescing == nil || *c.RequestCoalescing,
		NegativeCaching:   c.NegativeCaching != nil && *c.NegativeCaching,
		MaxObjectBytes:    maxObject,
		signedKeys:        keys,
	}
	if p.MaxObjectBytes <= 0 {
		p.MaxObjectBytes = DefaultMaxObjectBytes
	}
	switch c.CacheMode {
	case "USE_ORIGIN_HEADERS":
		p.Mode = UseOriginHeaders
	case "FORCE_CACHE_ALL":
		p.Mode = ForceCacheAll
	}
	if p.NegativeCaching {
		p.negativeTTL = defaultNegativeTTLs
		if len(c.NegativeCachingPolicy) > 0 {
			p.negativeTTL = map[int]time.Duration{}
			for _, n := range c.NegativeCachingPolicy {
				p.negativeTTL[n.Code] = secs(n.TTL, 0)
			}
		}
	}
	for _, b := range c.BypassCacheOnRequestHeaders {
		p.bypass = append(p.bypass, textproto.CanonicalMIMEHeaderKey(b.HeaderName))
	}
	p.Key = compileKey(c.CacheKeyPolicy)
	return p
}

func compileKey(k *config.CacheKeyPolicy) KeyPolicy {
	kp := KeyPolicy{IncludeHost: true, IncludeProtocol: true, IncludeQuery: true}
	if k == nil {
		return kp
	}
	kp.IncludeHost = k.IncludeHost == nil || *k.IncludeHost
	kp.IncludeProtocol = k.IncludeProtocol == nil || *k.IncludeProtocol
	kp.IncludeQuery = k.IncludeQueryString == nil || *k.IncludeQueryString
	if len(k.QueryStringWhitelist) > 0 {
		kp.Whitelist = set(k.QueryStringWhitelist)
	}
	if len(k.QueryStringBlacklist) > 0 {
		kp.Blacklist = set(k.QueryStringBlacklist)
	}
	for _, h := range k.IncludeHTTPHeaders {
		kp.Headers = append(kp.Headers, textproto.CanonicalMIMEHeaderKey(h))
	}
	kp.Cookies = append(kp.Cookies, k.IncludeNamedCookies...)
	return kp
}

func set(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, s := range l {
		m[s] = true
	}
	return m
}

func secs(p *int, def time.Duration) time.Duration {
	if p == nil {
		return def
	}
	return time.Duration(*p) * time.Second
}

// NegativeTTL returns the negative caching TTL of status, and whether
// negative caching applies to it.
func (p *Policy) NegativeTTL(status int) (time.Duration, bool) {
	if !p.NegativeCaching {
		return 0, false
	}
	ttl, ok := p.negativeTTL[status]
	return ttl, ok
}

// Bypass reports whether a request with header h skips the cache
// (bypassCacheOnRequestHeaders), and the header that made it.
func (p *Policy) Bypass(h map[string][]string) (string, bool) {
	for _, name := range p.bypass {
		if _, ok := h[name]; ok {
			return name, true
		}
	}
	return "", false
}

// HasSignedKeys reports whether the backend has signed URL keys.
func (p *Policy) HasSignedKeys() bool { return len(p.signedKeys) > 0 }

// varyAllowed reports whether a stored response may vary on the
// (canonical) request header name: Accept, Accept-Encoding and Origin,
// as Google documents, and the headers the cache key includes.
func (p *Policy) varyAllowed(name string) bool {
	switch name {
	case "Accept", "Accept-Encoding", "Origin":
		return true
	}
	for _, h := range p.Key.Headers {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}
