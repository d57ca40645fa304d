package cdn

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/cdnpolicy"
)

// Defaults of Options.
const (
	DefaultMemoryBytes = 256 << 20
	DefaultDiskBytes   = 1 << 30
	// refreshTimeout bounds a background revalidation.
	refreshTimeout = 2 * time.Minute
)

// Options configure a Cache.
type Options struct {
	// MemoryBytes bounds the in-memory tier (default 256 MiB).
	MemoryBytes int64
	// DiskPath, when set, is the directory of the disk tier, bounded by
	// DiskBytes (default 1 GiB).
	DiskPath  string
	DiskBytes int64
	// HoldDisk keeps the disk tier's objects from being served until
	// ReleaseDisk: in fleet mode, until the invalidations made while
	// this instance was down have been applied to them.
	HoldDisk bool
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Cache is Cloud CDN's cache: the store (memory, optionally disk),
// coalesced fills, revalidation and serving. One Cache serves every
// CDN-enabled backend of a process and outlives reloads: keys carry the
// backend's name, and each request brings its backend's current policy.
type Cache struct {
	mem  *Store
	disk *Disk
	held atomic.Bool // the disk tier is not read (Options.HoldDisk)
	now  func() time.Time
	log  *slog.Logger

	mu         sync.Mutex
	fills      map[string]*fill
	refreshing map[string]bool
	invs       []invalidation

	counters sync.Map // backend name → *Counters
}

// fill is an origin fetch that concurrent misses of one key wait for.
type fill struct {
	done chan struct{}
	obj  *Object // nil: nothing stored; waiters go to the origin themselves
	vary string  // the leader's variant key (cdnpolicy.VaryKey of obj.Vary)
}

// Counters are a backend's cache counters.
type Counters struct {
	Hits, Misses, Bypasses atomic.Uint64
	// HitBytes are body bytes served from the cache; FillBytes body
	// bytes stored from the origin.
	HitBytes, FillBytes atomic.Uint64
}

// New returns a Cache; with DiskPath it opens (and indexes) the disk
// tier, which must be closed with Close.
func New(o Options) (*Cache, error) {
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = DefaultMemoryBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Cache{mem: NewStore(o.MemoryBytes), now: o.Now, log: o.Logger,
		fills: map[string]*fill{}, refreshing: map[string]bool{}}
	if o.DiskPath != "" {
		if o.DiskBytes <= 0 {
			o.DiskBytes = DefaultDiskBytes
		}
		d, err := OpenDisk(o.DiskPath, o.DiskBytes, o.Now, o.Logger)
		if err != nil {
			return nil, err
		}
		c.disk = d
		c.held.Store(o.HoldDisk)
	}
	return c, nil
}

// ReleaseDisk lets the disk tier's objects be served (Options.HoldDisk).
func (c *Cache) ReleaseDisk() { c.held.Store(false) }

// Close stops the disk tier's writer after it has written what is
// queued.
func (c *Cache) Close() error {
	if c.disk != nil {
		return c.disk.Close()
	}
	return nil
}

// Memory returns the in-memory tier.
func (c *Cache) Memory() *Store { return c.mem }

// Disk returns the disk tier, nil when there is none.
func (c *Cache) Disk() *Disk { return c.disk }

// Counters returns the counters of a backend.
func (c *Cache) Counters(backend string) *Counters {
	if v, ok := c.counters.Load(backend); ok {
		return v.(*Counters)
	}
	v, _ := c.counters.LoadOrStore(backend, &Counters{})
	return v.(*Counters)
}

// EachCounters calls f with every backend's counters.
func (c *Cache) EachCounters(f func(backend string, k *Counters)) {
	c.counters.Range(func(k, v any) bool {
		f(k.(string), v.(*Counters))
		return true
	})
}

// Request is what the cache needs of one request beyond the
// *http.Request.
type Request struct {
	Policy  *cdnpolicy.Policy
	Backend string
	Scheme  string
	Host    string
	// Path is the path as forwarded (normalised), escaped; RawQuery the
	// query string.
	Path, RawQuery string
	// Signed: the request carried a valid signed URL or cookie.
	Signed bool
	// Refresh, when set, serves a copy of the request in the background
	// (its context marked by WithRefresh), for stale-while-revalidate.
	Refresh func(r *http.Request)
}

// Result is what the cache did with a request, for the access log.
type Result struct {
	// Lookup: the cache was consulted (Google's cacheLookup).
	Lookup bool
	// Hit: the response came from the cache (cacheHit), after a
	// revalidation with the origin when Validated
	// (cacheValidatedWithOriginServer).
	Hit, Validated bool
	// FillBytes is the body stored from the origin (cacheFillBytes).
	FillBytes int64
	// Status and Bytes are the status and body bytes written when the
	// response came from the cache.
	Status int
	Bytes  int64
}

// Origin answers a request from the origin, writing to w.
type Origin func(w http.ResponseWriter, r *http.Request)

type refreshKey struct{}

// WithRefresh marks ctx as a background revalidation's.
func WithRefresh(ctx context.Context) context.Context {
	return context.WithValue(ctx, refreshKey{}, true)
}

// IsRefresh reports whether ctx is a background revalidation's.
func IsRefresh(ctx context.Context) bool { return ctx.Value(refreshKey{}) != nil }

// cacheable reports whether r may be served from the cache at all.
func cacheable(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && len(r.Header["Upgrade"]) == 0
}

// Serve answers r from the cache, or from origin through it.
func (c *Cache) Serve(w http.ResponseWriter, r *http.Request, q *Request, origin Origin, res *Result) {
	k := c.Counters(q.Backend)
	if !cacheable(r) {
		if unsafeMethod(r.Method) {
			c.unsafe(w, r, q, origin)
			return
		}
		origin(w, r)
		return
	}
	if name, ok := q.Policy.Bypass(r.Header); ok {
		k.Bypasses.Add(1)
		w.Header()["Cache-Status"] = []string{"Spillway; fwd=bypass; detail=" + strings.ToLower(name)}
		origin(w, r)
		return
	}
	res.Lookup = true
	key := q.Policy.Key.Key(cdnpolicy.KeyInput{Backend: q.Backend, Scheme: q.Scheme, Host: q.Host, Path: q.Path, RawQuery: q.RawQuery, Header: r.Header})
	obj, full, ok := c.lookup(key, r.Header)
	if !ok {
		k.Misses.Add(1)
		w.Header()["Cache-Status"] = []string{"Spillway; fwd=uri-miss; detail=vary-value-too-long"}
		origin(w, r)
		return
	}
	now := c.now()
	if IsRefresh(r.Context()) {
		c.fetch(w, r, q, key, obj, origin, res)
		return
	}
	if obj != nil {
		age := obj.age(now)
		if age < obj.TTL {
			c.serve(w, r, obj, k, now, hitStatus(obj, now), res)
			return
		}
		if age < obj.TTL+obj.SWR && q.Refresh != nil {
			c.serve(w, r, obj, k, now, "Spillway; hit; detail=stale-while-revalidate", res)
			c.background(r, q, full)
			return
		}
	}
	k.Misses.Add(1)
	if r.Method == http.MethodHead && obj == nil {
		origin(w, r)
		return
	}
	c.coalesce(w, r, q, key, full, obj, origin, res)
}

// coalesce fetches from the origin for a miss (or a stale object), one
// fetch for concurrent misses of the same key when the policy asks.
func (c *Cache) coalesce(w http.ResponseWriter, r *http.Request, q *Request, key, full string, stale *Object, origin Origin, res *Result) {
	if !q.Policy.RequestCoalescing {
		c.fetch(w, r, q, key, stale, origin, res)
		return
	}
	c.mu.Lock()
	if f := c.fills[full]; f != nil {
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		}
		if o := f.obj; o != nil {
			if vk, _ := cdnpolicy.VaryKey(o.Vary, r.Header); vk == f.vary {
				c.serve(w, r, o, c.Counters(q.Backend), c.now(), "Spillway; fwd=miss; collapsed", res)
				return
			}
		}
		c.fetch(w, r, q, key, stale, origin, res)
		return
	}
	f := &fill{done: make(chan struct{})}
	c.fills[full] = f
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.fills, full)
		c.mu.Unlock()
		close(f.done)
	}()
	f.obj = c.fetch(w, r, q, key, stale, origin, res)
	if f.obj != nil {
		f.vary, _ = cdnpolicy.VaryKey(f.obj.Vary, r.Header)
	}
}

// hitStatus is the Cache-Status of a fresh hit.
func hitStatus(o *Object, now time.Time) string {
	var b [40]byte
	return string(strconv.AppendInt(append(b[:0], "Spillway; hit; ttl="...), max(int64((o.TTL-o.age(now))/time.Second), 0), 10))
}

// lookup finds the object for a request: the primary key's, or through
// a Vary marker its variant's. full is the key the object lives (or
// would live) under; ok is false when a Vary value is too long to key.
func (c *Cache) lookup(key string, h http.Header) (obj *Object, full string, ok bool) {
	o := c.get(key)
	if o == nil || !o.Marker {
		return o, key, true
	}
	vk, ok := cdnpolicy.VaryKey(o.Vary, h)
	if !ok {
		return nil, "", false
	}
	full = key + vk
	return c.get(full), full, true
}

// get reads the memory tier, then the disk tier (promoting what it
// finds).
func (c *Cache) get(key string) *Object {
	if o := c.mem.Get(key); o != nil {
		return o
	}
	if c.disk == nil || c.held.Load() {
		return nil
	}
	o := c.disk.Get(key)
	if o != nil {
		c.mem.Put(key, o)
	}
	return o
}

// MaxVariants bounds the Vary variants of one cache key: a response
// with Vary: Accept (or Origin, or a header the key includes) is stored
// once per distinct value, so a client sending a new value each time
// would otherwise fill the store with one URL. The variant past the
// bound replaces the oldest.
const MaxVariants = 32

// put stores o (under its primary key, or as a variant behind a marker)
// unless an invalidation matching it came after start.
func (c *Cache) put(key string, h http.Header, o *Object, start time.Time) bool {
	if c.invalidatedSince(o, start) {
		return false
	}
	full := key
	if len(o.Vary) > 0 {
		vk, ok := cdnpolicy.VaryKey(o.Vary, h)
		if !ok {
			return false
		}
		full = key + vk
		c.mark(key, full, o)
	}
	o.Key = full
	return c.store(full, o)
}

// mark stores the Vary marker of key with full among its variants,
// dropping the oldest variant past MaxVariants (and those of a marker
// with other Vary headers).
func (c *Cache) mark(key, full string, o *Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var variants []string
	if old := c.mem.Get(key); old != nil && old.Marker && slices.Equal(old.Vary, o.Vary) {
		variants = slices.DeleteFunc(slices.Clone(old.Variants), func(v string) bool { return v == full })
	} else if old != nil && old.Marker {
		for _, v := range old.Variants {
			c.drop(v)
		}
	}
	for len(variants) >= MaxVariants {
		c.drop(variants[0])
		variants = variants[1:]
	}
	variants = append(variants, full)
	c.store(key, &Object{Key: key, Host: o.Host, Path: o.Path, Marker: true, Vary: o.Vary, Date: o.Date, Variants: variants})
}

// drop removes key from both tiers.
func (c *Cache) drop(key string) {
	c.mem.Delete(key)
	if c.disk != nil {
		c.disk.remove(key)
	}
}

func (c *Cache) store(key string, o *Object) bool {
	ok := c.mem.Put(key, o)
	if c.disk != nil {
		c.disk.Put(o)
	}
	return ok
}

// background revalidates a stale object (stale-while-revalidate) with
// a copy of r, at most one at a time per key.
func (c *Cache) background(r *http.Request, q *Request, full string) {
	c.mu.Lock()
	if c.refreshing[full] || c.fills[full] != nil {
		c.mu.Unlock()
		return
	}
	c.refreshing[full] = true
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(WithRefresh(context.WithoutCancel(r.Context())), refreshTimeout)
	r2 := r.Clone(ctx)
	r2.Method = http.MethodGet
	refresh := q.Refresh
	go func() {
		defer func() {
			_ = recover() // the proxy aborts with http.ErrAbortHandler
			cancel()
			c.mu.Lock()
			delete(c.refreshing, full)
			c.mu.Unlock()
		}()
		refresh(r2)
	}()
}

func itoa(n int64) string {
	if n < 0 {
		n = 0
	}
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
