package serve_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// oneServiceYAML is a config with one backend service whose only endpoint
// is beAddr, and one frontend (a YAML flow mapping, e.g.
// `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`).
// extra is appended at the top level (e.g. sslPolicies).
func oneServiceYAML(beAddr, frontend, extra string) string {
	host, port, _ := net.SplitHostPort(beAddr)
	return fmt.Sprintf(`networkEndpointGroups:
- name: neg
  zone: us-east1-b
  endpoints:
  - {ipAddress: %s, port: %s}
backendServices:
- name: bs
  backends:
  - {group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}
urlMaps:
- name: um
  defaultService: bs
frontends:
- %s
%s`, host, port, frontend, extra)
}

func getBody(cl *http.Client, url string) (string, error) {
	resp, err := cl.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), nil
}

// The watcher compares the file with the config in force, not with the
// last file it read: write B, reload it by hand, put A back before the
// next poll. A is not the config in force, so the watcher must reload it.
func TestWatchRestoresFileReloadedAway(t *testing.T) {
	a, b := startBackend(t, "A"), startBackend(t, "B")
	fe := `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`
	yamlA, yamlB := oneServiceYAML(a.addr, fe, ""), oneServiceYAML(b.addr, fe, "")
	path := filepath.Join(t.TempDir(), "spillway.yaml")
	if err := os.WriteFile(path, []byte(yamlA), 0o600); err != nil {
		t.Fatal(err)
	}
	s := servetest.Run(t, servetest.Parse(t, yamlA), serve.Options{ConfigPath: path, WatchInterval: time.Second})
	url := "http://" + s.FrontendAddr("fe")
	cl := &http.Client{Timeout: 5 * time.Second}
	if got, err := getBody(cl, url); err != nil || got != "A" {
		t.Fatalf("before: %q, %v", got, err)
	}
	// Let the watcher take its first look at A.
	time.Sleep(300 * time.Millisecond)
	if err := os.WriteFile(path, []byte(yamlB), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadFile(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	if got, err := getBody(cl, url); err != nil || got != "B" {
		t.Fatalf("after reloading B: %q, %v", got, err)
	}
	if err := os.WriteFile(path, []byte(yamlA), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watcher to bring back A", func() bool {
		got, _ := getBody(cl, url)
		return got == "A"
	})
}
