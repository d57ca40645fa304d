package serve_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// Cloud CDN through the real proxy: a CDN-enabled service in front of a
// recording backend (its request count is the proof) and a CDN-enabled
// backend bucket, behind a security policy.
func TestCDNThroughProxy(t *testing.T) {
	var hits atomic.Int64
	be := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Cache-Control", "public, max-age=300")
		// A backend that reflects an unkeyed header: the classic cache
		// poisoning target.
		fmt.Fprintf(w, "page %s for %s", r.URL.Path, r.Header.Get("X-Forwarded-Host"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go be.Serve(ln)
	t.Cleanup(func() { be.Close() })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	dir := t.TempDir()
	// Objects are named by the whole request path, as in a bucket.
	if err := os.MkdirAll(filepath.Join(dir, "static"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "static", "logo.png"), []byte("PNGDATA"), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "access.log")
	key := []byte("0123456789abcdef")
	y := fmt.Sprintf(`
networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- name: bs
  backends: [{group: neg}]
  enableCDN: true
  cdnPolicy: {cacheMode: USE_ORIGIN_HEADERS, bypassCacheOnRequestHeaders: [{headerName: X-Bypass}]}
  securityPolicy: armor
backendBuckets:
- {name: bb, bucketName: %s, enableCdn: true}
securityPolicies:
- name: armor
  rules:
  - {priority: 100, action: deny(403), match: {expr: {expression: "request.path.startsWith('/private')"}}}
  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}
urlMaps:
- name: um
  defaultService: bs
  hostRules: [{hosts: ['*'], pathMatcher: pm}]
  pathMatchers:
  - name: pm
    defaultService: global/backendServices/bs
    pathRules: [{paths: ['/static/*'], service: projects/p/global/backendBuckets/bb}]
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
spillway:
  accessLog: {enable: true, path: %s, format: JSON}
  signedUrlKeys: [{backend: bs, keyName: k1, keyValue: %s}]
`, host, port, dir, logPath, base64.URLEncoding.EncodeToString(key))
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	front := "http://" + s.FrontendAddr("fe")
	get := func(path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", front+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
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
	// A miss, then hits: the backend sees one request.
	_, b1 := get("/a")
	resp, b2 := get("/a", "X-Forwarded-Host", "evil.example")
	if hits.Load() != 1 || b1 != b2 || strings.Contains(b2, "evil") || !strings.Contains(resp.Header.Get("Cache-Status"), "hit") {
		t.Fatalf("poisoning or no hit: %d backend requests, %q then %q, %v", hits.Load(), b1, b2, resp.Header)
	}
	// bypassCacheOnRequestHeaders reaches the backend and stores nothing.
	get("/a", "X-Bypass", "1")
	if hits.Load() != 2 {
		t.Errorf("bypass: %d backend requests, want 2", hits.Load())
	}
	// A refused request is never cached nor served from the cache.
	for range 2 {
		if resp, _ := get("/private/x"); resp.StatusCode != 403 {
			t.Errorf("security policy: %d", resp.StatusCode)
		}
	}
	if hits.Load() != 2 {
		t.Errorf("a refused request reached the backend")
	}
	// Signed URLs: a bad signature is 403 and reaches nothing; a good
	// one is served.
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	u := "http://" + s.FrontendAddr("fe") + "/signed?Expires=" + exp + "&KeyName=k1"
	m := hmac.New(sha1.New, key)
	m.Write([]byte(u))
	good := u + "&Signature=" + base64.URLEncoding.EncodeToString(m.Sum(nil))
	if resp, _ := get(strings.TrimPrefix(good, front)); resp.StatusCode != 200 {
		t.Errorf("good signed URL: %d", resp.StatusCode)
	}
	if resp, _ := get(strings.TrimPrefix(u, front) + "&Signature=AAAA"); resp.StatusCode != 403 || resp.Header.Get("X-Spillway-Status-Details") != "signed_request_invalid" {
		t.Errorf("bad signed URL: %d %v", resp.StatusCode, resp.Header)
	}
	// The bucket: served from the directory, then from the cache.
	resp, body := get("/static/logo.png")
	if resp.StatusCode != 200 || body != "PNGDATA" || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("bucket: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if err := os.Remove(filepath.Join(dir, "static", "logo.png")); err != nil {
		t.Fatal(err)
	}
	if resp, body = get("/static/logo.png"); body != "PNGDATA" || !strings.Contains(resp.Header.Get("Cache-Status"), "hit") {
		t.Errorf("bucket hit: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	// Invalidation through the admin API.
	req, _ := http.NewRequest("POST", "http://"+s.AdminAddr()+"/cache/invalidate", strings.NewReader(`{"path": "/static/*"}`))
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ib, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !strings.Contains(string(ib), `"removed":1`) {
		t.Fatalf("invalidate: %d %s", r.StatusCode, ib)
	}
	if resp, _ = get("/static/logo.png"); resp.StatusCode != 404 {
		t.Errorf("after invalidation: %d, want 404 (the file is gone)", resp.StatusCode)
	}
	// /metrics and the access log.
	mr, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	if !strings.Contains(string(mb), `spillway_cdn_hits_total{backend="bs"} 1`) || !strings.Contains(string(mb), `spillway_cdn_hits_total{backend="bb"} 1`) {
		t.Errorf("metrics: %s", grepLines(string(mb), "spillway_cdn_hits"))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		lb, _ := os.ReadFile(logPath)
		if strings.Contains(string(lb), `"cacheHit":true`) && strings.Contains(string(lb), `"statusDetails":"response_from_cache"`) &&
			strings.Contains(string(lb), `"cacheFillBytes":"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log lacks the cache fields:\n%s", lb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// An unsafe method through the proxy (answered 200) removes the
	// URI's object: the next GET goes to the backend.
	get("/u")
	get("/u")
	n := hits.Load()
	pr, err := http.Post(front+"/u", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	pr.Body.Close()
	if resp, _ := get("/u"); hits.Load() != n+2 || strings.Contains(resp.Header.Get("Cache-Status"), "hit") {
		t.Errorf("GET after POST /u: %q, %d backend requests since, want the POST and the GET", resp.Header.Get("Cache-Status"), hits.Load()-n)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A miss storm through the real proxy: 1,000 clients, each on its own
// connection, ask at once for one cold key. The origin holds its answer
// until every client has written its request (bounded), so that all of
// them are at the proxy while the one fill is in flight; it must see
// exactly one request, and every client gets the whole object.
func TestCDNMissStorm(t *testing.T) {
	const clients = 1000
	body := strings.Repeat("s", 4096)
	var originReqs, written atomic.Int64
	be := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		originReqs.Add(1)
		deadline := time.Now().Add(20 * time.Second)
		for written.Load() < clients && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		io.WriteString(w, body)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go be.Serve(ln)
	t.Cleanup(func() { be.Close() })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	y := fmt.Sprintf(`
networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- name: bs
  backends: [{group: neg}]
  enableCDN: true
  cdnPolicy: {cacheMode: USE_ORIGIN_HEADERS, requestCoalescing: true}
urlMaps:
- {name: um, defaultService: bs}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
`, host, port)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "", WatchInterval: -1})
	url := "http://" + s.FrontendAddr("fe") + "/storm/cold.bin"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		wg                   sync.WaitGroup
		ok, collapsed, fails atomic.Int64
		firstErr             atomic.Value
		start                = make(chan struct{})
	)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{DisableKeepAlives: true}
			defer tr.CloseIdleConnections()
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { written.Add(1) }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), "GET", url, nil)
			<-start
			resp, err := tr.RoundTrip(req)
			if err != nil {
				fails.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				written.Add(1) // do not keep the origin waiting for it
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || string(b) != body {
				fails.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d, %d bytes, %v", resp.StatusCode, len(b), err))
				return
			}
			ok.Add(1)
			if strings.Contains(resp.Header.Get("Cache-Status"), "collapsed") {
				collapsed.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	t.Logf("%d clients: %d ok (%d collapsed onto the fill), %d failed; origin requests %d", clients, ok.Load(), collapsed.Load(), fails.Load(), originReqs.Load())
	if ok.Load() != clients {
		t.Fatalf("%d of %d clients failed, first: %v", fails.Load(), clients, firstErr.Load())
	}
	if n := originReqs.Load(); n != 1 {
		t.Fatalf("the origin received %d requests, want 1", n)
	}
	if collapsed.Load() == 0 {
		t.Fatalf("no response waited on the fill: the storm was not concurrent")
	}
}

// A backend bucket whose directory does not exist (a typo, a volume not
// mounted) is refused with the field and the fix, at start and on a
// reload; the reload keeps the running bucket serving. The same for a
// signed URL key file that cannot be read.
func TestBucketDirectoryMissing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("A"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := func(bucketDir, keys string) string {
		return fmt.Sprintf(`
backendBuckets:
- {name: bb, bucketName: %s, enableCdn: true}
urlMaps:
- {name: um, defaultService: global/backendBuckets/bb}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
%s`, bucketDir, keys)
	}
	missing := filepath.Join(dir, "nothere")
	file := filepath.Join(dir, "a.txt")
	noKey := "spillway:\n  signedUrlKeys: [{backend: bb, keyName: k1, keyFile: " + missing + "}]\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"missing", cfg(missing, ""), "backendBuckets[bb].bucketName: " + missing},
		{"a file", cfg(file, ""), "is not a directory"},
		{"key file", cfg(dir, noKey), "spillway.signedUrlKeys[0].keyFile"},
	} {
		_, err := serve.New(servetest.Parse(t, tc.yaml), serve.Options{WatchInterval: -1})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("%s: New: %v, want an error with %q and a fix", tc.name, err, tc.want)
		}
	}
	s := servetest.Run(t, servetest.Parse(t, cfg(dir, "")), serve.Options{WatchInterval: -1})
	if err := s.Reload(context.Background(), servetest.Parse(t, cfg(missing, ""))); err == nil || !strings.Contains(err.Error(), "bucketName") {
		t.Errorf("reload to a missing directory: %v, want it refused", err)
	}
	resp, err := http.Get("http://" + s.FrontendAddr("fe") + "/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "A" {
		t.Errorf("after the refused reload: %d %q, want the old bucket's 200 A", resp.StatusCode, b)
	}
}

// spillway.cdn is read at start: a reload that changes it applies the
// rest and says, once per reload, that the store waits for a restart.
func TestReloadCDNStoreNeedsRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := func(mem string) *config.Config {
		return servetest.Parse(t, fmt.Sprintf(`
backendBuckets:
- {name: bb, bucketName: %s, enableCdn: true}
urlMaps:
- {name: um, defaultService: global/backendBuckets/bb}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
spillway:
  cdn: {memoryBytes: %s}
`, dir, mem))
	}
	logs := &syncBuffer{}
	s := servetest.Run(t, cfg("1048576"), serve.Options{WatchInterval: -1, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err := s.Reload(context.Background(), cfg("1048576")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "spillway.cdn") {
		t.Errorf("an unchanged spillway.cdn was logged:\n%s", logs)
	}
	if err := s.Reload(context.Background(), cfg("2097152")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "spillway.cdn changed") || !strings.Contains(logs.String(), "restart") {
		t.Errorf("a changed spillway.cdn was not logged as waiting for a restart:\n%s", logs)
	}
}
