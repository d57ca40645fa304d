package cdn

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/cdnpolicy"
	"github.com/spillwaylb/spillway/internal/config"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// origin is a recording backend on loopback.
type origin struct {
	srv   *httptest.Server
	count atomic.Int64
	mu    sync.Mutex
	reqs  []http.Header
	h     http.HandlerFunc
}

func newOrigin(t *testing.T, h http.HandlerFunc) *origin {
	o := &origin{h: h}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.count.Add(1)
		o.mu.Lock()
		o.reqs = append(o.reqs, r.Header.Clone())
		o.mu.Unlock()
		o.h(w, r)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) last() http.Header {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reqs[len(o.reqs)-1]
}

// forward is a minimal reverse proxy to the origin: the Origin the
// cache is given.
func (o *origin) forward(w http.ResponseWriter, r *http.Request) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, o.srv.URL+r.URL.RequestURI(), nil)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// front serves through a cache for one backend policy.
type front struct {
	srv   *httptest.Server
	cache *Cache
	last  atomic.Pointer[Result]
	// noRefresh: revalidate in the foreground (no Request.Refresh).
	noRefresh atomic.Bool
}

func newFront(t *testing.T, c *Cache, p *cdnpolicy.Policy, o *origin) *front {
	f := &front{cache: c}
	var h http.HandlerFunc
	h = func(w http.ResponseWriter, r *http.Request) {
		q := &Request{Policy: p, Backend: "bs", Scheme: "http", Host: r.Host, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			Refresh: func(r2 *http.Request) { h(discard{http.Header{}}, r2) }}
		if f.noRefresh.Load() {
			q.Refresh = nil
		}
		res := &Result{}
		c.Serve(w, r, q, o.forward, res)
		f.last.Store(res)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) WriteHeader(int)             {}

func newCache(t *testing.T, o Options) (*Cache, *clock) {
	clk := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	if o.Now == nil {
		o.Now = clk.now
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, clk
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func pol(c *config.CdnPolicy) *cdnpolicy.Policy { return cdnpolicy.Compile(c, nil, 0) }

func serveWith(hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		_, _ = io.WriteString(w, "body of "+r.URL.Path)
	}
}

// TestModes sends each request twice: the backend count says whether
// the first response was stored.
func TestModes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   string
		hdr    []string
		stored bool
	}{
		{"static image", "", []string{"Content-Type", "image/png"}, true},
		{"static html", "", []string{"Content-Type", "text/html"}, false},
		{"static html max-age", "", []string{"Content-Type", "text/html", "Cache-Control", "max-age=60"}, true},
		{"static private", "", []string{"Content-Type", "image/png", "Cache-Control", "private"}, false},
		{"origin without headers", "USE_ORIGIN_HEADERS", []string{"Content-Type", "image/png"}, false},
		{"origin with max-age", "USE_ORIGIN_HEADERS", []string{"Cache-Control", "public, max-age=60"}, true},
		{"force private", "FORCE_CACHE_ALL", []string{"Cache-Control", "private, no-store"}, true},
		{"force set-cookie", "FORCE_CACHE_ALL", []string{"Set-Cookie", "a=b"}, false},
		{"vary cookie", "FORCE_CACHE_ALL", []string{"Vary", "Cookie"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOrigin(t, serveWith(tc.hdr...))
			c, _ := newCache(t, Options{})
			f := newFront(t, c, pol(&config.CdnPolicy{CacheMode: tc.mode}), o)
			_, b1 := get(t, f.srv.URL+"/a")
			resp, b2 := get(t, f.srv.URL+"/a")
			want := int64(2)
			if tc.stored {
				want = 1
			}
			if o.count.Load() != want || b1 != b2 || b1 != "body of /a" {
				t.Fatalf("backend requests %d, want %d (bodies %q %q)", o.count.Load(), want, b1, b2)
			}
			if tc.stored && (resp.Header.Get("Age") == "" || !strings.Contains(resp.Header.Get("Cache-Status"), "hit")) {
				t.Errorf("hit without Age or Cache-Status hit: %v", resp.Header)
			}
		})
	}
}

func TestCoalescing(t *testing.T) {
	for _, coalesce := range []bool{true, false} {
		release := make(chan struct{})
		o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
			<-release
			w.Header().Set("Cache-Control", "max-age=60")
			_, _ = io.WriteString(w, "x")
		})
		c, _ := newCache(t, Options{})
		f := newFront(t, c, pol(&config.CdnPolicy{RequestCoalescing: &coalesce}), o)
		const n = 100
		var wg sync.WaitGroup
		var bad atomic.Int64
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Get(f.srv.URL + "/storm")
				if err != nil {
					bad.Add(1)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "x" {
					bad.Add(1)
				}
			}()
		}
		deadline := time.Now().Add(10 * time.Second)
		for c.pendingFills() == 0 && o.count.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // let the others arrive
		close(release)
		wg.Wait()
		got := o.count.Load()
		t.Logf("requestCoalescing=%v: %d clients, %d backend requests", coalesce, n, got)
		if bad.Load() != 0 || (coalesce && got != 1) || (!coalesce && got < 2) {
			t.Errorf("requestCoalescing=%v: %d backend requests, %d bad answers", coalesce, got, bad.Load())
		}
	}
}

func TestRevalidation(t *testing.T) {
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Etag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = io.WriteString(w, "full")
	})
	c, _ := newCache(t, Options{})
	f := newFront(t, c, pol(&config.CdnPolicy{CacheMode: "USE_ORIGIN_HEADERS"}), o)
	get(t, f.srv.URL+"/r")
	resp, body := get(t, f.srv.URL+"/r")
	if body != "full" || resp.StatusCode != 200 || o.last().Get("If-None-Match") != `"v1"` {
		t.Fatalf("revalidation: %d %q, backend saw If-None-Match %q", resp.StatusCode, body, o.last().Get("If-None-Match"))
	}
	if r := f.last.Load(); !r.Validated || !r.Hit {
		t.Errorf("result %+v, want validated hit", r)
	}
	// The client's own conditional request is answered by the cache.
	resp, _ = get(t, f.srv.URL+"/r", "If-None-Match", `"v1"`)
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("client If-None-Match: %d, want 304", resp.StatusCode)
	}
}

func TestServeWhileStale(t *testing.T) {
	var fail atomic.Bool
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Cache-Control", "max-age=10")
		_, _ = io.WriteString(w, "v"+fmt.Sprint(r.Header.Get("X-N")))
	})
	c, clk := newCache(t, Options{})
	f := newFront(t, c, pol(&config.CdnPolicy{CacheMode: "USE_ORIGIN_HEADERS", ServeWhileStale: ptr(100)}), o)
	get(t, f.srv.URL+"/s")
	clk.add(20 * time.Second)
	// stale-while-revalidate: the stale object at once, a refresh behind.
	resp, body := get(t, f.srv.URL+"/s")
	if body != "v" || !strings.Contains(resp.Header.Get("Cache-Status"), "stale-while-revalidate") {
		t.Fatalf("stale-while-revalidate: %q %v", body, resp.Header)
	}
	waitFor(t, func() bool { return o.count.Load() == 2 && c.pendingRefreshes() == 0 })
	// stale-if-error: past the TTL, the origin failing.
	fail.Store(true)
	clk.add(20 * time.Second)
	f.noRefresh.Store(true)
	resp, body = get(t, f.srv.URL+"/s")
	if resp.StatusCode != 200 || body != "v" || !strings.Contains(resp.Header.Get("Cache-Status"), "stale-if-error") {
		t.Fatalf("stale-if-error: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	// Past serveWhileStale, the error goes through.
	clk.add(200 * time.Second)
	resp, _ = get(t, f.srv.URL+"/s")
	if resp.StatusCode != 500 {
		t.Errorf("past serveWhileStale: %d, want 500", resp.StatusCode)
	}
}

func ptr[T any](v T) *T { return &v }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRanges(t *testing.T) {
	o := newOrigin(t, serveWith("Content-Type", "video/mp4", "Etag", `"e"`))
	c, _ := newCache(t, Options{})
	f := newFront(t, c, pol(nil), o)
	// A range on a miss fills the whole object, then answers the range.
	resp, body := get(t, f.srv.URL+"/v", "Range", "bytes=0-3")
	if resp.StatusCode != 206 || body != "body" {
		t.Fatalf("range on miss: %d %q", resp.StatusCode, body)
	}
	if o.last().Get("Range") != "" {
		t.Error("the fill sent the client's Range to the origin")
	}
	resp, body = get(t, f.srv.URL+"/v", "Range", "bytes=-2")
	if resp.StatusCode != 206 || body != "/v" || o.count.Load() != 1 {
		t.Fatalf("range on hit: %d %q, %d backend requests", resp.StatusCode, body, o.count.Load())
	}
	// Range abuse: many or overlapping ranges get the whole object.
	many := "bytes=" + strings.Repeat("0-0,", 40) + "1-1"
	resp, body = get(t, f.srv.URL+"/v", "Range", many)
	if resp.StatusCode != 200 || body != "body of /v" {
		t.Errorf("41 ranges: %d, %d bytes", resp.StatusCode, len(body))
	}
	resp, body = get(t, f.srv.URL+"/v", "Range", "bytes=0-,0-,0-,0-")
	if resp.StatusCode != 200 || len(body) != len("body of /v") {
		t.Errorf("overlapping ranges: %d, %d bytes", resp.StatusCode, len(body))
	}
}

func TestInvalidate(t *testing.T) {
	o := newOrigin(t, serveWith("Content-Type", "image/png"))
	c, _ := newCache(t, Options{})
	f := newFront(t, c, pol(nil), o)
	for _, p := range []string{"/images/a", "/images/b", "/css/c"} {
		get(t, f.srv.URL+p)
	}
	if _, err := c.Invalidate("", "/images*"); err == nil {
		t.Error("a '*' not after '/' was taken")
	}
	n, err := c.Invalidate("", "/images/*")
	if err != nil || n != 2 {
		t.Fatalf("Invalidate: %d, %v", n, err)
	}
	for _, p := range []string{"/images/a", "/images/b", "/css/c"} {
		get(t, f.srv.URL+p)
	}
	if o.count.Load() != 5 {
		t.Errorf("backend requests %d, want 5 (two invalidated objects fetched again)", o.count.Load())
	}
	if n, _ := c.Invalidate("other.example", "/css/c"); n != 0 {
		t.Errorf("another host's invalidation removed %d", n)
	}
}

func TestDiskSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	o := newOrigin(t, serveWith("Content-Type", "image/png"))
	c1, err := New(Options{DiskPath: dir, DiskBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	f1 := newFront(t, c1, pol(nil), o)
	get(t, f1.srv.URL+"/d", "Host", "cdn.example")
	c1.Disk().Flush()
	_ = c1.Close()
	c2, err := New(Options{DiskPath: dir, DiskBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	f2 := newFront(t, c2, pol(nil), o)
	resp, body := get(t, f2.srv.URL+"/d", "Host", "cdn.example")
	if o.count.Load() != 1 || body != "body of /d" || !strings.Contains(resp.Header.Get("Cache-Status"), "hit") {
		t.Fatalf("after restart: %d backend requests, %q, %v", o.count.Load(), body, resp.Header)
	}
	if n, b, capa := c2.Disk().Stats(); n != 1 || b > capa {
		t.Errorf("disk tier: %d objects, %d of %d bytes", n, b, capa)
	}
}

func TestBucketNoEscape(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	mustWrite(t, outside+"/secret.txt", "secret")
	mustWrite(t, root+"/a.css", "body{}")
	mustWrite(t, root+"/.hidden", "hidden")
	mustWrite(t, root+"/d/index.html", "<p>")
	if err := symlink(outside+"/secret.txt", root+"/link.txt"); err != nil {
		t.Skip(err)
	}
	srv := httptest.NewServer(NewBucket(root))
	defer srv.Close()
	resp, body := get(t, srv.URL+"/a.css")
	if resp.StatusCode != 200 || body != "body{}" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") ||
		resp.Header.Get("Etag") == "" || resp.Header.Get("Last-Modified") == "" {
		t.Fatalf("a.css: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, _ = get(t, srv.URL+"/a.css", "If-None-Match", resp.Header.Get("Etag"))
	if resp.StatusCode != 304 {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	resp, body = get(t, srv.URL+"/a.css", "Range", "bytes=1-2")
	if resp.StatusCode != 206 || body != "od" {
		t.Errorf("range: %d %q", resp.StatusCode, body)
	}
	if _, body = get(t, srv.URL+"/d/"); body != "<p>" {
		t.Errorf("index.html: %q", body)
	}
	for _, p := range []string{"/link.txt", "/../" + "secret.txt", "/%2e%2e/secret.txt", "/.hidden", "/d", "/nope"} {
		req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
		req.URL.Opaque = p
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || strings.Contains(string(b), "secret") {
			t.Errorf("%s: %d %q", p, resp.StatusCode, b)
		}
	}
}

// hitWriter is a ResponseWriter that keeps nothing.
type hitWriter struct{ h http.Header }

func (w *hitWriter) Header() http.Header         { return w.h }
func (w *hitWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *hitWriter) WriteHeader(int)             {}

// BenchmarkHit measures Serve answering a fresh hit of a 1 KiB object
// (no sockets: the cache's own cost per hit).
func BenchmarkHit(b *testing.B) {
	c, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := pol(nil)
	body := strings.Repeat("x", 1024)
	origin := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = io.WriteString(w, body)
	}
	r := httptest.NewRequest("GET", "http://cdn.example/img/a.png", nil)
	q := &Request{Policy: p, Backend: "bs", Scheme: "http", Host: "cdn.example", Path: "/img/a.png"}
	c.Serve(&hitWriter{h: http.Header{}}, r, q, origin, &Result{})
	w := &hitWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clear(w.h)
		var res Result
		c.Serve(w, r, q, origin, &res)
		if !res.Hit {
			b.Fatal("not a hit")
		}
	}
}

// An object over maxObjectBytes streams through whole and is not kept,
// also for a range request on a miss (which the fill buffers first).
func TestHugeObjectNotStored(t *testing.T) {
	big := strings.Repeat("y", 50_000)
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "video/mp4")
		for i := 0; i < len(big); i += 1000 {
			_, _ = io.WriteString(w, big[i:i+1000])
			w.(http.Flusher).Flush() // chunked: no Content-Length to refuse it early
		}
	})
	c, _ := newCache(t, Options{MemoryBytes: 1 << 20})
	f := newFront(t, c, cdnpolicy.Compile(nil, nil, 10_000), o)
	for _, rg := range []string{"", "bytes=0-9"} {
		var hdr []string
		if rg != "" {
			hdr = []string{"Range", rg}
		}
		resp, body := get(t, f.srv.URL+"/huge", hdr...)
		if resp.StatusCode != 200 || body != big {
			t.Errorf("range %q: %d, %d bytes", rg, resp.StatusCode, len(body))
		}
	}
	if o.count.Load() != 2 || c.Memory().Stats().Objects != 0 {
		t.Errorf("%d backend requests, %d objects stored", o.count.Load(), c.Memory().Stats().Objects)
	}
}

// A Vary flood: one URL whose response varies on Accept, asked with a
// new Accept value each time. The URL keeps at most MaxVariants
// variants (the newest), the store stays within its bytes, and the
// objects cached before the flood are all still served from the cache.
func TestVaryFlood(t *testing.T) {
	body := strings.Repeat("v", 2048)
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		if strings.HasPrefix(r.URL.Path, "/flood") {
			w.Header().Set("Vary", "Accept")
		}
		_, _ = io.WriteString(w, body)
	})
	const memory = 2 << 20
	c, _ := newCache(t, Options{MemoryBytes: memory})
	f := newFront(t, c, pol(nil), o)
	const hot = 200 // about 460 KiB: a quarter of the store
	for range 2 {
		for i := range hot {
			get(t, fmt.Sprintf("%s/hot/%d", f.srv.URL, i))
		}
	}
	if n := o.count.Load(); n != hot {
		t.Fatalf("%d origin requests for %d objects read twice, want %d", n, hot, hot)
	}
	const flood = 3000
	for i := range flood {
		get(t, f.srv.URL+"/flood", "Accept", fmt.Sprintf("image/x-%d", i))
	}
	if s := c.Memory().Stats(); s.Bytes > s.Capacity {
		t.Errorf("store holds %d bytes, over its %d", s.Bytes, s.Capacity)
	}
	variants := 0
	c.mem.mu.RLock()
	for k, e := range c.mem.m {
		if strings.Contains(k, "/flood") && !e.obj.Marker {
			variants++
		}
	}
	c.mem.mu.RUnlock()
	if variants > MaxVariants {
		t.Errorf("%d variants of /flood stored, want at most %d", variants, MaxVariants)
	}
	// The newest variant is served from the cache, the first was
	// replaced (one origin request).
	if resp, _ := get(t, f.srv.URL+"/flood", "Accept", fmt.Sprintf("image/x-%d", flood-1)); !strings.Contains(resp.Header.Get("Cache-Status"), "hit") {
		t.Errorf("newest variant: %q, want a hit", resp.Header.Get("Cache-Status"))
	}
	if resp, _ := get(t, f.srv.URL+"/flood", "Accept", "image/x-0"); strings.Contains(resp.Header.Get("Cache-Status"), "hit") {
		t.Errorf("first variant, %d variants ago: still a hit", flood)
	}
	for i := range hot {
		get(t, fmt.Sprintf("%s/hot/%d", f.srv.URL, i))
	}
	if n := o.count.Load() - hot - flood - 1; n != 0 {
		t.Errorf("%d of the %d objects cached before the flood went to the origin again after it", n, hot)
	}
}

// An unsafe method answered with a non-error status removes what is
// stored for its URI (RFC 9111 §4.4), Vary variants included; an error
// answer, or a safe method, leaves it.
func TestUnsafeMethodInvalidates(t *testing.T) {
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		if strings.HasPrefix(r.URL.Path, "/vary") {
			w.Header().Set("Vary", "Accept")
		}
		switch {
		case r.Method == http.MethodPost && r.URL.Query().Get("fail") != "":
			w.WriteHeader(http.StatusInternalServerError)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
			return
		case r.Method == http.MethodPut:
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusSeeOther)
		}
		_, _ = io.WriteString(w, "body of "+r.URL.Path)
	})
	c, _ := newCache(t, Options{})
	f := newFront(t, c, pol(nil), o)
	hit := func(path string, hdr ...string) bool {
		t.Helper()
		resp, _ := get(t, f.srv.URL+path, hdr...)
		return strings.Contains(resp.Header.Get("Cache-Status"), "hit")
	}
	send := func(method, path string) {
		t.Helper()
		req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader("new"))
		cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, tc := range []struct {
		name, method, target, path string
		hdr                        []string
		gone                       bool
	}{
		{"POST 200", "POST", "/a", "/a", nil, true},
		{"POST 500 keeps it", "POST", "/b?fail=1", "/b?fail=1", nil, false},
		{"DELETE 204", "DELETE", "/c", "/c", nil, true},
		{"PUT 303", "PUT", "/d", "/d", nil, true},
		{"PATCH elsewhere keeps it", "PATCH", "/other", "/e", nil, false},
		{"OPTIONS is safe", "OPTIONS", "/f", "/f", nil, false},
		{"POST drops every Vary variant", "POST", "/vary", "/vary", []string{"Accept", "image/webp"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hit(tc.path, tc.hdr...)
			if strings.HasPrefix(tc.path, "/vary") {
				hit(tc.path, "Accept", "image/avif") // a second variant
			}
			if !hit(tc.path, tc.hdr...) {
				t.Fatalf("%s not cached before the %s", tc.path, tc.method)
			}
			send(tc.method, tc.target)
			if got := !hit(tc.path, tc.hdr...); got != tc.gone {
				t.Errorf("after %s %s: removed %v, want %v", tc.method, tc.target, got, tc.gone)
			}
			if strings.HasPrefix(tc.path, "/vary") && hit(tc.path, "Accept", "image/avif") {
				t.Errorf("the other variant survived the POST")
			}
		})
	}
}
