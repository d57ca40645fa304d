package cdn

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/spillwaylb/spillway/internal/config"
)

// fakeS3 is an S3-compatible server on loopback (gofakes3 with its
// memory backend). With akid set it answers 403 AccessDenied, as S3
// does, to requests not signed with that access key (gofakes3 checks
// no signatures itself).
type fakeS3 struct {
	srv   *httptest.Server
	be    *s3mem.Backend
	count atomic.Int64 // object requests (GET and HEAD)
	mu    sync.Mutex
	paths []string // escaped paths of the object requests
	auth  []string // their Authorization headers
}

const testAKID = "AKIDSPILLWAYTEST"

func newFakeS3(t *testing.T, akid string) *fakeS3 {
	t.Helper()
	f := &fakeS3{be: s3mem.New()}
	if err := f.be.CreateBucket("assets"); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(f.be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			f.count.Add(1)
			f.mu.Lock()
			f.paths = append(f.paths, r.URL.EscapedPath())
			f.auth = append(f.auth, r.Header.Get("Authorization"))
			f.mu.Unlock()
			if akid != "" && !strings.Contains(r.Header.Get("Authorization"), "Credential="+akid+"/") {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// put stores an object in bucket assets with headers (Content-Type,
// Cache-Control, …), through the memory backend: gofakes3's PUT keeps
// only Content-Type, Content-Disposition and Content-Encoding, where S3
// keeps Cache-Control too.
func (f *fakeS3) put(t *testing.T, key, body string, hdr map[string]string) {
	t.Helper()
	meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	for k, v := range hdr {
		meta[k] = v
	}
	if _, err := f.be.PutObject("assets", key, meta, strings.NewReader(body), int64(len(body)), nil); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeS3) lastPath() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paths[len(f.paths)-1]
}

func (f *fakeS3) bucket(t *testing.T, o S3Options) *S3Bucket {
	t.Helper()
	u, err := url.Parse(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	o.Endpoint, o.PathStyle = u, true
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Bucket == "" {
		o.Bucket = "assets"
	}
	return NewS3Bucket(o, nil)
}

// serveS3 serves b on loopback: the request path, decoded once by the
// server, is the object's path.
func serveS3(t *testing.T, b *S3Bucket) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.Serve(w, r, r.URL.Path) }))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, u string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	for i := 0; i < len(hdr); i += 2 {
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

func TestS3Bucket(t *testing.T) {
	f := newFakeS3(t, "")
	f.put(t, "static/app.css", "body{color:red}", map[string]string{"Content-Type": "text/css", "Cache-Control": "max-age=60"})
	f.put(t, "static/logo.png", "PNG", map[string]string{"Content-Type": "binary/octet-stream"}) // S3's default
	f.put(t, "static/d/index.html", "<p>index", map[string]string{"Content-Type": "text/html"})
	f.put(t, "static/%2e%2e/lit.txt", "literal", map[string]string{"Content-Type": "text/plain"})
	f.put(t, "secret.txt", "secret", map[string]string{"Content-Type": "text/plain"})
	srv := serveS3(t, f.bucket(t, S3Options{Name: "bb"}))

	resp, body := do(t, "GET", srv.URL+"/static/app.css")
	etag, lm := resp.Header.Get("Etag"), resp.Header.Get("Last-Modified")
	if resp.StatusCode != 200 || body != "body{color:red}" || resp.Header.Get("Content-Type") != "text/css" ||
		resp.Header.Get("Cache-Control") != "max-age=60" || resp.ContentLength != 15 || !strings.HasPrefix(etag, `"`) {
		t.Fatalf("app.css: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if _, err := http.ParseTime(lm); err != nil {
		t.Errorf("Last-Modified %q: %v", lm, err)
	}
	if f.lastPath() != "/assets/static/app.css" {
		t.Errorf("requested %s", f.lastPath())
	}
	// HEAD: the headers, no body.
	resp, body = do(t, "HEAD", srv.URL+"/static/app.css")
	if resp.StatusCode != 200 || body != "" || resp.ContentLength != 15 || resp.Header.Get("Etag") != etag {
		t.Errorf("HEAD: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = do(t, "GET", srv.URL+"/static/app.css", "Range", "bytes=5-9")
	if resp.StatusCode != 206 || body != "color" || resp.Header.Get("Content-Range") != "bytes 5-9/15" {
		t.Errorf("range: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = do(t, "GET", srv.URL+"/static/app.css", "If-None-Match", etag)
	if resp.StatusCode != 304 || body != "" || resp.Header.Get("Etag") != etag {
		t.Errorf("If-None-Match: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, _ = do(t, "GET", srv.URL+"/static/app.css", "If-Modified-Since", lm)
	if resp.StatusCode != 304 {
		t.Errorf("If-Modified-Since: %d", resp.StatusCode)
	}
	// Stored with S3's default type: typed by its extension.
	if resp, body = do(t, "GET", srv.URL+"/static/logo.png"); resp.StatusCode != 200 || body != "PNG" || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("logo.png: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, _ = do(t, "GET", srv.URL+"/static/nope.css"); resp.StatusCode != 404 {
		t.Errorf("missing key: %d", resp.StatusCode)
	}
	if resp, _ = do(t, "POST", srv.URL+"/static/app.css"); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d", resp.StatusCode)
	}
	// Decoded once: %252e%252e reaches the handler as the literal
	// segment %2e%2e and names that object, never "..".
	if resp, body = do(t, "GET", srv.URL+"/static/%252e%252e/lit.txt"); resp.StatusCode != 200 || body != "literal" || f.lastPath() != "/assets/static/%252e%252e/lit.txt" {
		t.Errorf("literal %%2e%%2e key: %d %q (S3 asked for %s)", resp.StatusCode, body, f.lastPath())
	}
	// No listing, no escape: these never reach the service.
	before := f.count.Load()
	for _, p := range []string{"/static/../secret.txt", "/static/%2e%2e/secret.txt", "/static/./app.css", "/static/.hidden", "/static/d/", "/", "/static//app.css"} {
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
	if n := f.count.Load() - before; n != 0 {
		t.Errorf("%d refused paths reached the service", n)
	}
	// With mainPageSuffix, a directory path serves its index object.
	idx := serveS3(t, f.bucket(t, S3Options{Name: "bb", MainPageSuffix: "index.html"}))
	if resp, body = do(t, "GET", idx.URL+"/static/d/"); resp.StatusCode != 200 || body != "<p>index" {
		t.Errorf("index object: %d %q", resp.StatusCode, body)
	}
	// A bucket that does not exist is the backend's problem: 502, counted.
	nb := f.bucket(t, S3Options{Name: "bb", Bucket: "no-such-bucket"})
	if resp, _ = do(t, "GET", serveS3(t, nb).URL+"/static/app.css"); resp.StatusCode != 502 || nb.Counts().Missing.Load() != 1 {
		t.Errorf("no such bucket: %d, %d counted", resp.StatusCode, nb.Counts().Missing.Load())
	}
}

// TestS3Credentials: requests are signed with the keys of the
// credentials file or the AWS environment variables; without keys the
// service's AccessDenied is a 403, counted against the bucket.
func TestS3Credentials(t *testing.T) {
	f := newFakeS3(t, testAKID)
	f.put(t, "a.txt", "a", map[string]string{"Content-Type": "text/plain"})
	file := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(file, []byte("[default]\naws_access_key_id = other\naws_secret_access_key = x\n[cdn]\naws_access_key_id = "+testAKID+"\naws_secret_access_key = s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "")
	creds, err := S3Credentials(file, "cdn")
	if err != nil {
		t.Fatal(err)
	}
	signed := f.bucket(t, S3Options{Name: "bb", Credentials: creds})
	if resp, body := do(t, "GET", serveS3(t, signed).URL+"/a.txt"); resp.StatusCode != 200 || body != "a" {
		t.Errorf("signed from the file: %d %q", resp.StatusCode, body)
	}
	if none, err := S3Credentials("", ""); none != nil || err != nil {
		t.Fatalf("no keys anywhere: %v %v, want anonymous", none, err)
	}
	var log bytes.Buffer
	anon := f.bucket(t, S3Options{Name: "bb", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if resp, _ := do(t, "GET", serveS3(t, anon).URL+"/a.txt"); resp.StatusCode != 403 || anon.Counts().Denied.Load() != 1 {
		t.Errorf("unsigned: %d, %d counted", resp.StatusCode, anon.Counts().Denied.Load())
	}
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "refused access") || !strings.Contains(log.String(), "AccessDenied") {
		t.Errorf("the refusal was not logged as the backend's problem: %q", log.String())
	}
	t.Setenv("AWS_ACCESS_KEY_ID", testAKID)
	if _, err := S3Credentials("", ""); err == nil || !strings.Contains(err.Error(), "only one of") {
		t.Errorf("half a key pair: %v", err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
	creds, err = S3Credentials("", "")
	if err != nil {
		t.Fatal(err)
	}
	env := f.bucket(t, S3Options{Name: "bb", Credentials: creds})
	if resp, _ := do(t, "GET", serveS3(t, env).URL+"/a.txt"); resp.StatusCode != 200 {
		t.Errorf("signed from the environment: %d", resp.StatusCode)
	}
	if _, err := S3Credentials(filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Error("a missing credentials file is accepted")
	}
}

// TestS3Down: a refused connection is 502 and a service that never
// answers 504 within the timeout, each counted against the bucket.
func TestS3Down(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	u, _ := url.Parse(refused)
	quiet := slog.New(slog.DiscardHandler)
	down := NewS3Bucket(S3Options{Name: "bb", Logger: quiet, Endpoint: u, Bucket: "assets", PathStyle: true, Timeout: 2 * time.Second}, nil)
	if resp, _ := do(t, "GET", serveS3(t, down).URL+"/a.txt"); resp.StatusCode != 502 || down.Counts().Unreachable.Load() != 1 {
		t.Errorf("refused: %d, %d counted", resp.StatusCode, down.Counts().Unreachable.Load())
	}
	// A service that accepts and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var conns sync.WaitGroup
	done := make(chan struct{})
	defer conns.Wait()
	defer close(done)
	conns.Go(func() {
		c, err := silent.Accept()
		if err == nil {
			<-done
			c.Close()
		}
	})
	u, _ = url.Parse("http://" + silent.Addr().String())
	slow := NewS3Bucket(S3Options{Name: "bb", Logger: quiet, Endpoint: u, Bucket: "assets", PathStyle: true, Timeout: 300 * time.Millisecond}, nil)
	start := time.Now()
	resp, _ := do(t, "GET", serveS3(t, slow).URL+"/a.txt")
	if resp.StatusCode != 504 || slow.Counts().Timeouts.Load() != 1 || time.Since(start) > 2500*time.Millisecond {
		t.Errorf("silent: %d after %v, %d counted", resp.StatusCode, time.Since(start), slow.Counts().Timeouts.Load())
	}
}

// TestS3BehindCache: the cache in front of an S3 bucket answers the
// second request itself, revalidates a stale object with If-None-Match
// (a 304 from the service), and with serveWhileStale serves the stale
// object while the service is down.
func TestS3BehindCache(t *testing.T) {
	f := newFakeS3(t, "")
	f.put(t, "img/a.png", "PNGDATA", map[string]string{"Content-Type": "image/png", "Cache-Control": "max-age=10"})
	b := f.bucket(t, S3Options{Name: "bb", Timeout: 2 * time.Second})
	c, clk := newCache(t, Options{})
	p := pol(&config.CdnPolicy{CacheMode: "USE_ORIGIN_HEADERS", ServeWhileStale: ptr(100)})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := &Request{Policy: p, Backend: "bb", Scheme: "http", Host: r.Host, Path: r.URL.EscapedPath()}
		c.Serve(w, r, q, func(w2 http.ResponseWriter, r2 *http.Request) { b.Serve(w2, r2, r2.URL.Path) }, &Result{})
	}))
	defer front.Close()
	for i := range 2 {
		resp, body := do(t, "GET", front.URL+"/img/a.png")
		if resp.StatusCode != 200 || body != "PNGDATA" || resp.Header.Get("Content-Type") != "image/png" {
			t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
		if i == 1 && !strings.HasPrefix(resp.Header.Get("Cache-Status"), "Spillway; hit") {
			t.Errorf("second request: %q, want a hit", resp.Header.Get("Cache-Status"))
		}
	}
	if n := f.count.Load(); n != 1 {
		t.Fatalf("the service got %d requests for two, want 1", n)
	}
	// Stale: revalidated with the service, which answers 304.
	clk.add(20 * time.Second)
	resp, body := do(t, "GET", front.URL+"/img/a.png")
	if resp.StatusCode != 200 || body != "PNGDATA" || f.count.Load() != 2 || !strings.Contains(resp.Header.Get("Cache-Status"), "fwd-status=304") {
		t.Errorf("stale: %d %q %q, %d service requests", resp.StatusCode, body, resp.Header.Get("Cache-Status"), f.count.Load())
	}
	// Down: the stale object is served (stale-if-error), nothing panics.
	f.srv.Close()
	clk.add(20 * time.Second)
	resp, body = do(t, "GET", front.URL+"/img/a.png")
	if resp.StatusCode != 200 || body != "PNGDATA" || !strings.Contains(resp.Header.Get("Cache-Status"), "stale") {
		t.Errorf("service down: %d %q %q", resp.StatusCode, body, resp.Header.Get("Cache-Status"))
	}
	// An object never cached: the service's failure, 502.
	if resp, _ = do(t, "GET", front.URL+"/img/b.png"); resp.StatusCode != 502 {
		t.Errorf("uncached while down: %d, want 502", resp.StatusCode)
	}
	if b.Counts().Unreachable.Load() == 0 {
		t.Error("the service being down was not counted against the bucket")
	}
}
