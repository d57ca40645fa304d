package serve_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

const testToken = "s3cret-admin-token-0123456789"

// adminServer runs a server with one HTTP frontend, a config file (so
// POST /reload can succeed) and the given admin options.
func adminServer(t *testing.T, opts serve.Options) *serve.Server {
	t.Helper()
	be := startBackend(t, "A")
	y := oneServiceYAML(be.addr, `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`, "")
	path := filepath.Join(t.TempDir(), "spillway.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.ConfigPath, opts.WatchInterval = path, -1
	return servetest.Run(t, servetest.Parse(t, y), opts)
}

// adminURL is the admin address reached over loopback.
func adminURL(s *serve.Server) string {
	addr := s.AdminAddr()
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		addr = "127.0.0.1" + addr[i:]
	}
	return "http://" + addr
}

func adminDo(t *testing.T, method, url string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Profiling is served only when asked for.
func TestPprofIsOptIn(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := adminServer(t, serve.Options{Admin: "127.0.0.1:0", Pprof: on})
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		if got := adminDo(t, "GET", adminURL(s)+"/debug/pprof/", nil); got != want {
			t.Errorf("pprof %v: GET /debug/pprof/ answered %d, want %d", on, got, want)
		}
	}
}

// An admin listener that is not on loopback needs a token.
func TestNonLoopbackAdminNeedsToken(t *testing.T) {
	be := startBackend(t, "A")
	c := servetest.Parse(t, oneServiceYAML(be.addr, `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`, ""))
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "admin.example:9901"} {
		_, err := serve.New(c, serve.Options{Admin: addr})
		if err == nil || !strings.Contains(err.Error(), "--admin-token-file") || !strings.Contains(err.Error(), "SPILLWAY_ADMIN_TOKEN") {
			t.Errorf("admin %s without a token: %v; want an error naming the fix", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		if _, err := serve.New(c, serve.Options{Admin: addr}); err != nil {
			t.Errorf("admin %s without a token: %v", addr, err)
		}
	}
	if _, err := serve.New(c, serve.Options{Admin: "0.0.0.0:0", AdminToken: "short"}); err == nil || !strings.Contains(err.Error(), "16") {
		t.Errorf("a 5-character token was accepted: %v", err)
	}
}

// With a token: a non-loopback admin listener wants it on every endpoint
// but /healthz; a loopback one on mutating endpoints.
func TestAdminToken(t *testing.T) {
	remote := adminServer(t, serve.Options{Admin: "0.0.0.0:0", AdminToken: testToken})
	local := adminServer(t, serve.Options{Admin: "127.0.0.1:0", AdminToken: testToken, Pprof: true})
	good := map[string]string{"Authorization": "Bearer " + testToken}
	tests := []struct {
		s      *serve.Server
		method string
		path   string
		header map[string]string
		want   int
	}{
		{remote, "GET", "/health", nil, 401},
		{remote, "GET", "/health", map[string]string{"Authorization": "Bearer " + testToken + "x"}, 401},
		{remote, "GET", "/health", map[string]string{"Authorization": "Basic " + testToken}, 401},
		{remote, "GET", "/health", good, 200},
		{remote, "GET", "/health", map[string]string{"Authorization": "bearer " + testToken}, 200},
		{remote, "GET", "/metrics", nil, 401},
		{remote, "GET", "/metrics", good, 200},
		{remote, "GET", "/healthz", nil, 200},
		{remote, "POST", "/reload", nil, 401},
		{remote, "POST", "/reload", good, 200},
		{local, "GET", "/health", nil, 200},
		{local, "GET", "/debug/pprof/", nil, 401},
		{local, "GET", "/debug/pprof/", good, 200},
		{local, "POST", "/reload", nil, 401},
		{local, "POST", "/reload", good, 200},
	}
	for _, tt := range tests {
		if got := adminDo(t, tt.method, adminURL(tt.s)+tt.path, tt.header); got != tt.want {
			who := "loopback"
			if tt.s == remote {
				who = "non-loopback"
			}
			t.Errorf("%s admin: %s %s %v: %d, want %d", who, tt.method, tt.path, tt.header, got, tt.want)
		}
	}
}

// Browsers cannot make a loopback admin API reload: cross-origin requests
// to mutating endpoints, and requests for a host name other than
// localhost (DNS rebinding), are refused.
func TestAdminRejectsCrossOrigin(t *testing.T) {
	s := adminServer(t, serve.Options{Admin: "127.0.0.1:0"})
	tests := []struct {
		method string
		header map[string]string
		want   int
	}{
		{"POST", nil, 200},
		{"POST", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200},
		{"POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"POST", map[string]string{"Origin": "http://evil.example"}, 403},
		{"POST", map[string]string{"Host": "evil.example:9901", "Origin": "http://evil.example:9901"}, 403},
		{"GET", map[string]string{"Host": "evil.example:9901"}, 403},
	}
	for _, tt := range tests {
		path := "/reload"
		if tt.method == "GET" {
			path = "/health"
		}
		if got := adminDo(t, tt.method, adminURL(s)+path, tt.header); got != tt.want {
			t.Errorf("%s %s %v: %d, want %d", tt.method, path, tt.header, got, tt.want)
		}
	}
}
