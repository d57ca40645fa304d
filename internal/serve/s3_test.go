package serve_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// A backend bucket exported from Google Cloud (bucketName a Cloud
// Storage name) served from an S3-compatible bucket on loopback
// (gofakes3) through the real proxy and its cache: the service's
// request count proves the second request a hit; a reload whose
// credentials file is missing is refused and the running config keeps
// serving; the service stopped, a cached object is still served and an
// uncached one is 502, counted in spillway_bucket_errors_total.
func TestS3BucketThroughProxy(t *testing.T) {
	be := s3mem.New()
	if err := be.CreateBucket("assets"); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"Content-Type": "image/png", "Cache-Control": "max-age=300", "Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	if _, err := be.PutObject("assets", "static/logo.png", meta, strings.NewReader("PNGDATA"), 7, nil); err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int64
	var signed atomic.Bool
	fake := gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		signed.Store(strings.Contains(r.Header.Get("Authorization"), "Credential=AKIDPROXY/"))
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(s3.Close)
	creds := filepath.Join(t.TempDir(), "s3-credentials")
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = AKIDPROXY\naws_secret_access_key = s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := func(credsFile string) string {
		return fmt.Sprintf(`
backendBuckets:
- {name: bb-static, bucketName: my-gcs-assets, enableCdn: true, cdnPolicy: {cacheMode: USE_ORIGIN_HEADERS, serveWhileStale: 86400}}
urlMaps:
- {name: um, defaultService: global/backendBuckets/bb-static}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
spillway:
  buckets:
  - bucketName: my-gcs-assets
    s3: {endpoint: %q, bucket: assets, credentialsFile: %s, timeoutSec: 2}
`, s3.URL, credsFile)
	}
	s := servetest.Run(t, servetest.Parse(t, conf(creds)), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	front := "http://" + s.FrontendAddr("fe")
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(front + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for i := range 2 {
		resp, body := get("/static/logo.png")
		if resp.StatusCode != 200 || body != "PNGDATA" || resp.Header.Get("Content-Type") != "image/png" || resp.Header.Get("Etag") == "" {
			t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
	}
	if gets.Load() != 1 || !signed.Load() {
		t.Fatalf("the S3 service got %d requests for two (want 1), signed with the file's key: %v", gets.Load(), signed.Load())
	}
	if resp, _ := get("/static/none.png"); resp.StatusCode != 404 {
		t.Errorf("missing object: %d", resp.StatusCode)
	}
	err := s.Reload(context.Background(), servetest.Parse(t, conf(creds+".missing")))
	if err == nil || !strings.Contains(err.Error(), "spillway.buckets[bucketName=my-gcs-assets].s3.credentialsFile") || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("reload with a missing credentials file: %v", err)
	}
	s3.Close()
	if resp, body := get("/static/logo.png"); resp.StatusCode != 200 || body != "PNGDATA" {
		t.Errorf("cached object, service down: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get("/static/other.png"); resp.StatusCode != 502 {
		t.Errorf("uncached object, service down: %d, want 502", resp.StatusCode)
	}
	mr, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	if !strings.Contains(string(m), `spillway_bucket_errors_total{bucket="bb-static",reason="unreachable"} 1`) {
		t.Errorf("metrics lack the unreachable service:\n%s", grepLines(string(m), "spillway_bucket"))
	}
}
