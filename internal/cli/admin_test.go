package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
)

const adminTestConfig = `networkEndpointGroups:
- name: neg
  zone: us-east1-b
  endpoints:
  - {ipAddress: 127.0.0.1, port: 9}
backendServices:
- name: bs
  backends:
  - {group: neg, balancingMode: RATE, maxRatePerEndpoint: 100}
urlMaps:
- name: um
  defaultService: bs
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
`

const adminTestToken = "cli-test-admin-token-0123456789"

// tokenAdmin runs a server whose admin API (all interfaces) wants
// adminTestToken; it returns the admin address over loopback.
func tokenAdmin(t *testing.T) string {
	t.Helper()
	cfg, err := config.Parse([]byte(adminTestConfig), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := serve.New(cfg, serve.Options{Admin: "0.0.0.0:0", AdminToken: adminTestToken, WatchInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("server not ready after 30 s")
	}
	_, port, _ := net.SplitHostPort(s.AdminAddr())
	return net.JoinHostPort("127.0.0.1", port)
}

// get-health sends the admin token from --admin-token-file or
// SPILLWAY_ADMIN_TOKEN, and says what to do when it is missing.
func TestGetHealthSendsAdminToken(t *testing.T) {
	addr := tokenAdmin(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(adminTestToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPILLWAY_ADMIN_TOKEN", "")
	code, _, errOut := runMain(t, "get-health", "--admin", addr)
	if code == 0 || !strings.Contains(errOut, "--admin-token-file") {
		t.Errorf("without a token: exit %d, stderr %q; want a failure naming --admin-token-file", code, errOut)
	}
	code, out, errOut := runMain(t, "get-health", "--admin", addr, "--admin-token-file", tokenFile)
	if code != 0 || !strings.Contains(out, "backend service bs") {
		t.Errorf("--admin-token-file: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	t.Setenv("SPILLWAY_ADMIN_TOKEN", adminTestToken)
	code, out, errOut = runMain(t, "get-health", "--admin", addr)
	if code != 0 || !strings.Contains(out, "backend service bs") {
		t.Errorf("SPILLWAY_ADMIN_TOKEN: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// serve refuses a non-loopback admin address without a token, and an
// empty token file.
func TestServeAdminTokenErrors(t *testing.T) {
	dir := t.TempDir()
	cfgFile, empty := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "empty")
	if err := os.WriteFile(cfgFile, []byte(adminTestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPILLWAY_ADMIN_TOKEN", "")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--admin", "0.0.0.0:0"}, "--admin-token-file"},
		{[]string{"--admin", "127.0.0.1:0", "--admin-token-file", empty}, "is empty"},
		{[]string{"--admin", "127.0.0.1:0", "--admin-token-file", filepath.Join(dir, "missing")}, "--admin-token-file"},
	}
	for _, tt := range tests {
		code, _, errOut := runMain(t, append([]string{"serve", "--config", cfgFile, "--watch", "0"}, tt.args...)...)
		if code == 0 || !strings.Contains(errOut, tt.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want an error with %q", tt.args, code, errOut, tt.want)
		}
	}
}
