package cli

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// spillway cache invalidate against a running serve (with an admin
// token): the prefix's objects go to the origin again, the others stay
// cached; a bad path, a missing token and a server that is not there
// are refused, each saying what to fix.
func TestCacheInvalidateCommand(t *testing.T) {
	var origin atomic.Int64
	be := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin.Add(1)
		w.Header().Set("Cache-Control", "public, max-age=3600")
		io.WriteString(w, "object "+r.URL.Path)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go be.Serve(ln)
	t.Cleanup(func() { be.Close() })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	cfg := servetest.Parse(t, fmt.Sprintf(`networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- {name: bs, backends: [{group: neg}], enableCDN: true, cdnPolicy: {cacheMode: USE_ORIGIN_HEADERS}}
urlMaps:
- {name: um, defaultService: bs}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
`, host, port))
	s := servetest.Run(t, cfg, serve.Options{Admin: "127.0.0.1:0", AdminToken: adminTestToken, WatchInterval: -1})
	fetch := func(path string) {
		t.Helper()
		resp, err := http.Get("http://" + s.FrontendAddr("fe") + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	paths := []string{"/images/a.png", "/images/b.png", "/index.html"}
	for range 2 {
		for _, p := range paths {
			fetch(p)
		}
	}
	if n := origin.Load(); n != 3 {
		t.Fatalf("%d origin requests for 3 objects read twice, want 3", n)
	}

	t.Setenv("SPILLWAY_ADMIN_TOKEN", "")
	if code, _, errOut := runMain(t, "cache", "invalidate", "--admin", s.AdminAddr(), "--path", "/images/*"); code == 0 || !strings.Contains(errOut, "--admin-token-file") {
		t.Errorf("without a token: exit %d, stderr %q; want a failure naming --admin-token-file", code, errOut)
	}
	if code, _, errOut := runMain(t, "cache", "invalidate", "--admin", s.AdminAddr(), "--path", "/images*"); code == 0 || !strings.Contains(errOut, "'*' may only end the path") {
		t.Errorf("a bad path: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("SPILLWAY_ADMIN_TOKEN", adminTestToken)
	code, out, errOut := runMain(t, "cache", "invalidate", "--admin", s.AdminAddr(), "--path", "/images/*")
	if code != 0 || out != "invalidated /images/*: 2 objects removed\n" {
		t.Fatalf("invalidate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, p := range paths {
		fetch(p)
	}
	if n := origin.Load(); n != 5 {
		t.Errorf("%d origin requests after invalidating /images/*, want 5 (the two images again, not /index.html)", n)
	}
	if code, out, _ := runMain(t, "cache", "invalidate", "--admin", s.AdminAddr(), "--path", "/index.html"); code != 0 || out != "invalidated /index.html: 1 object removed\n" {
		t.Errorf("one object: exit %d, stdout %q", code, out)
	}
	// --host limits it to one host: another host's objects stay.
	if code, out, _ := runMain(t, "cache", "invalidate", "--admin", s.AdminAddr(), "--path", "/index.html", "--host", "other.example"); code != 0 || !strings.Contains(out, ": 0 objects removed") {
		t.Errorf("another host: exit %d, stdout %q; want 0 removed", code, out)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	if code, _, errOut := runMain(t, "cache", "invalidate", "--admin", addr, "--path", "/x"); code == 0 || !strings.Contains(errOut, "cannot reach the admin API") {
		t.Errorf("no server: exit %d, stderr %q", code, errOut)
	}
}

// TestCacheUsage: spillway cache --help teaches the flags too; a
// mistyped subcommand and a missing --path are one line each, with the
// fix, as other commands' mistakes are.
func TestCacheUsage(t *testing.T) {
	code, out, errOut := runMain(t, "cache", "--help")
	for _, want := range []string{"Usage: spillway cache invalidate", "Examples:", "--path PATH", "--admin ADDR", "--host HOST"} {
		if code != 0 || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("cache --help: exit %d, want 0 and %q in:\n%s", code, want, errOut)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cache", "invalidat", "--path", "/x"}, `spillway cache: unknown subcommand "invalidat"; did you mean "invalidate"? (spillway cache --help)`},
		{[]string{"cache", "purge"}, `spillway cache: unknown subcommand "purge"; want invalidate (spillway cache --help)`},
		{[]string{"cache", "invalidate"}, `spillway cache invalidate: --path is required, e.g. --path '/images/*' or --path /index.html`},
	} {
		code, out, errOut := runMain(t, tt.args...)
		if code != 2 || errOut != tt.want+"\n" || out != "" {
			t.Errorf("spillway %q: exit %d, stderr:\n%s\nwant exit 2 and only\n%s", tt.args, code, errOut, tt.want)
		}
	}
}
