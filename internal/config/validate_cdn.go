package config

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
)

// maxCdnTTL is Google's bound on cdnPolicy TTLs: one year.
const maxCdnTTL = 31_622_400

// negativeCachingCodes are the statuses negativeCachingPolicy takes.
var negativeCachingCodes = []int{300, 301, 302, 307, 308, 404, 405, 410, 421, 451, 501}

// cdnPolicy checks a cdnPolicy at p; bucket restricts cacheKeyPolicy to
// what backend buckets take.
func (v *validator) cdnPolicy(p string, c *CdnPolicy, bucket bool) {
	if c == nil {
		return
	}
	v.enum(p+".cacheMode", c.CacheMode, "CACHE_ALL_STATIC", "USE_ORIGIN_HEADERS", "FORCE_CACHE_ALL")
	v.intRange(p+".defaultTtl", c.DefaultTTL, 0, maxCdnTTL)
	v.intRange(p+".maxTtl", c.MaxTTL, 0, maxCdnTTL)
	v.intRange(p+".clientTtl", c.ClientTTL, 0, maxCdnTTL)
	v.intRange(p+".serveWhileStale", c.ServeWhileStale, 0, 604_800)
	v.intRange(p+".signedUrlCacheMaxAgeSec", c.SignedURLCacheMaxAgeSec, 0, maxCdnTTL)
	switch c.CacheMode {
	case "USE_ORIGIN_HEADERS":
		for name, set := range map[string]bool{"defaultTtl": c.DefaultTTL != nil, "maxTtl": c.MaxTTL != nil, "clientTtl": c.ClientTTL != nil} {
			if set {
				v.add(p+"."+name, "remove it: under USE_ORIGIN_HEADERS the origin's headers set the TTLs",
					"%s cannot be set with cacheMode USE_ORIGIN_HEADERS", name)
			}
		}
	case "FORCE_CACHE_ALL":
		if c.MaxTTL != nil {
			v.add(p+".maxTtl", "remove it: FORCE_CACHE_ALL caches for defaultTtl", "maxTtl cannot be set with cacheMode FORCE_CACHE_ALL")
		}
	}
	if c.DefaultTTL != nil && c.MaxTTL != nil && *c.DefaultTTL > *c.MaxTTL {
		v.add(p+".defaultTtl", fmt.Sprintf("lower it to at most maxTtl (%d), or raise maxTtl", *c.MaxTTL),
			"defaultTtl %d is greater than maxTtl %d", *c.DefaultTTL, *c.MaxTTL)
	}
	v.negativeCaching(p, c)
	if n := len(c.BypassCacheOnRequestHeaders); n > 5 {
		v.add(p+".bypassCacheOnRequestHeaders", "list at most 5 headers", "%d headers are listed", n)
	}
	for j, b := range c.BypassCacheOnRequestHeaders {
		if !isToken(b.HeaderName) {
			v.add(at("%s.bypassCacheOnRequestHeaders[%d].headerName", p, j), "write a header name, e.g. headerName: Pragma", "%q is not a header name", b.HeaderName)
		}
	}
	v.cacheKeyPolicy(p+".cacheKeyPolicy", c.CacheKeyPolicy, bucket)
}

func (v *validator) negativeCaching(p string, c *CdnPolicy) {
	if len(c.NegativeCachingPolicy) > 0 && (c.NegativeCaching == nil || !*c.NegativeCaching) {
		v.add(p+".negativeCachingPolicy", "set negativeCaching: true, or remove negativeCachingPolicy",
			"negativeCachingPolicy needs negativeCaching: true")
	}
	seen := map[int]int{}
	for j, n := range c.NegativeCachingPolicy {
		np := at("%s.negativeCachingPolicy[%d]", p, j)
		if !slices.Contains(negativeCachingCodes, n.Code) {
			v.add(np+".code", "use one of 300, 301, 302, 307, 308, 404, 405, 410, 421, 451, 501", "%d cannot be negatively cached", n.Code)
		}
		if first, dup := seen[n.Code]; dup {
			v.add(np+".code", "list each code once", "%d is already in negativeCachingPolicy[%d]", n.Code, first)
		}
		seen[n.Code] = j
		v.intRange(np+".ttl", n.TTL, 0, 1800)
	}
}

func (v *validator) cacheKeyPolicy(p string, k *CacheKeyPolicy, bucket bool) {
	if k == nil {
		return
	}
	if bucket && (k.IncludeHost != nil || k.IncludeProtocol != nil || k.IncludeQueryString != nil || len(k.QueryStringBlacklist) > 0 || len(k.IncludeNamedCookies) > 0) {
		v.add(p, "keep only queryStringWhitelist and includeHttpHeaders", "a backend bucket's cacheKeyPolicy takes only queryStringWhitelist and includeHttpHeaders")
	}
	if len(k.QueryStringWhitelist) > 0 && len(k.QueryStringBlacklist) > 0 {
		v.add(p+".queryStringBlacklist", "keep queryStringWhitelist or queryStringBlacklist, not both", "both a whitelist and a blacklist are set")
	}
	if k.IncludeQueryString != nil && !*k.IncludeQueryString && len(k.QueryStringWhitelist)+len(k.QueryStringBlacklist) > 0 {
		v.add(p+".includeQueryString", "set it to true, or remove the query string lists", "query string lists need includeQueryString: true")
	}
	for j, h := range k.IncludeHTTPHeaders {
		if !isToken(h) {
			v.add(at("%s.includeHttpHeaders[%d]", p, j), "write a header name, e.g. X-Device-Type", "%q is not a header name", h)
		}
	}
	for j, c := range k.IncludeNamedCookies {
		if !isToken(c) {
			v.add(at("%s.includeNamedCookies[%d]", p, j), "write a cookie name", "%q is not a cookie name", c)
		}
	}
}

// backendBuckets validates backendBuckets[].
func (v *validator) backendBuckets() {
	for i := range v.c.BackendBuckets {
		b := &v.c.BackendBuckets[i]
		p := at("backendBuckets[%d]", i)
		if b.Name != "" {
			if j, clash := v.services[b.Name]; clash {
				v.add(p+".name", "give the bucket a name no backend service has: URL maps name both kinds alike",
					"%q is also the name of backendServices[%d]", b.Name, j)
			}
		}
		if b.BucketName == "" {
			v.add(p+".bucketName", "name the directory to serve, e.g. bucketName: /srv/static", "a bucket name is required")
		} else if strings.Contains(b.BucketName, "://") {
			v.add(p+".bucketName", "name a local directory, e.g. bucketName: /srv/static, or keep the bucket's name (my-assets) and map it to an S3-compatible bucket in spillway.buckets (docs/cdn.md)",
				"%q is a URL: bucketName is a directory or a name that spillway.buckets maps", b.BucketName)
		}
		if b.EnableCdn {
			v.cdnPolicy(p+".cdnPolicy", b.CdnPolicy, true)
		}
		v.enum(p+".compressionMode", b.CompressionMode, "DISABLED")
		for j, h := range b.CustomResponseHeaders {
			v.customHeader(at("%s.customResponseHeaders[%d]", p, j), h)
		}
		if b.EdgeSecurityPolicy != "" {
			v.add(p+".edgeSecurityPolicy", "remove it, or put the policy on a backend service in front",
				"security policies on backend buckets are not supported yet")
		}
	}
}

// cdnTuning validates spillway.cdn and spillway.signedUrlKeys.
func (v *validator) cdnTuning(t *Tuning) {
	if t == nil {
		return
	}
	if c := t.CDN; c != nil {
		for name, n := range map[string]*int64{"memoryBytes": c.MemoryBytes, "maxObjectBytes": c.MaxObjectBytes, "diskBytes": c.DiskBytes} {
			if n != nil && *n <= 0 {
				v.add("spillway.cdn."+name, "use a positive number of bytes, e.g. 268435456", "%d is not positive", *n)
			}
		}
		if c.DiskBytes != nil && c.DiskPath == "" {
			v.add("spillway.cdn.diskBytes", "set diskPath too, or remove diskBytes", "diskBytes without diskPath")
		}
	}
	v.signedURLKeys(t.SignedURLKeys)
}

// signedURLKeys validates spillway.signedUrlKeys.
func (v *validator) signedURLKeys(keys []SignedURLKey) {
	cdnBackends := map[string]bool{}
	for _, bs := range v.c.BackendServices {
		cdnBackends[bs.Name] = bs.EnableCDN
	}
	for _, b := range v.c.BackendBuckets {
		cdnBackends[b.Name] = b.EnableCdn
	}
	for i, k := range keys {
		p := at("spillway.signedUrlKeys[%d]", i)
		if on, ok := cdnBackends[RefName(k.Backend)]; !ok || !on {
			v.add(p+".backend", "name a backend service with enableCDN: true or a backend bucket with enableCdn: true",
				"%q is not a CDN-enabled backend", k.Backend)
		}
		if k.KeyName == "" || !isToken(k.KeyName) {
			v.add(p+".keyName", "name the key as signed URLs carry it (KeyName=…), e.g. keyName: key1", "a key name is required")
		}
		switch {
		case k.KeyValue == "" && k.KeyFile == "":
			v.add(p, "set keyValue (16 random bytes in base64url) or keyFile (a file holding them)", "the key is missing")
		case k.KeyValue != "" && k.KeyFile != "":
			v.add(p, "keep one of them", "keyValue and keyFile are both set")
		case k.KeyValue != "" && !validKey(k.KeyValue):
			v.add(p+".keyValue", "use 16 random bytes in base64url, e.g. head -c 16 /dev/urandom | base64 | tr +/ -_", "not a 16-byte base64url key")
		}
	}
}

func validKey(s string) bool {
	k, err := base64.URLEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		k, err = base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	}
	return err == nil && len(k) == 16
}

// backendRef resolves a reference to a backend service or bucket (URL
// maps' defaultService and service).
func (v *validator) backendRef(path, ref string) {
	if len(v.buckets) == 0 && !strings.Contains(ref, "/backendBuckets/") {
		v.serviceRef(path, ref)
		return
	}
	v.ref(path, ref, "backend service or bucket", map[string]map[string]int{"backendServices": v.services, "backendBuckets": v.buckets})
}
