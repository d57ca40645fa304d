package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
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
	cfg := servetest.Parse(t, adminTestConfig)
	s := servetest.Run(t, cfg, serve.Options{Admin: "0.0.0.0:0", AdminToken: adminTestToken, WatchInterval: -1})
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

// get-health --live (the container's HEALTHCHECK) needs no token: 0 and
// "ok" when the instance answers /healthz, 1 saying why when it does not.
func TestGetHealthLive(t *testing.T) {
	addr := tokenAdmin(t)
	t.Setenv("SPILLWAY_ADMIN_TOKEN", "")
	if code, out, errOut := runMain(t, "get-health", "--live", "--admin", addr); code != 0 || out != "ok\n" {
		t.Errorf("live instance: exit %d, stdout %q, stderr %q; want 0 and ok", code, out, errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if code, _, errOut := runMain(t, "get-health", "--live", "--admin", closed); code != 1 || !strings.Contains(errOut, "not live") {
		t.Errorf("nothing listening: exit %d, stderr %q; want 1 and not live", code, errOut)
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

// spillway ctl drains, lists, refuses and clears through the admin API,
// with the token.
func TestCtlDrainListClear(t *testing.T) {
	addr := tokenAdmin(t)
	t.Setenv("SPILLWAY_ADMIN_TOKEN", "")
	code, _, errOut := runMain(t, "ctl", "drain", "--admin", addr, "--endpoint", "127.0.0.1:9")
	if code == 0 || !strings.Contains(errOut, "wants a token") {
		t.Fatalf("without a token: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("SPILLWAY_ADMIN_TOKEN", adminTestToken)
	code, _, errOut = runMain(t, "ctl", "drain", "--admin", addr, "--service", "bs")
	if code == 0 || !strings.Contains(errOut, "only backend") {
		t.Errorf("drain of the only backend: exit %d, stderr %q; want refused, saying why", code, errOut)
	}
	code, out, errOut := runMain(t, "ctl", "set", "--admin", addr, "--service", "bs", "--capacity-scaler", "0.5", "--for", "1h", "--actor", "bob", "--reason", "canary")
	if code != 0 || !strings.Contains(out, "CAPACITY_SCALER service=bs (0.5)") || !strings.Contains(out, "bob") {
		t.Fatalf("set: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, _ = runMain(t, "get-health", "--admin", addr)
	if code != 0 || !strings.Contains(out, "runtime overlay") || !strings.Contains(out, "canary") {
		t.Errorf("get-health does not show the overlay:\n%s", out)
	}
	code, out, errOut = runMain(t, "ctl", "clear", "--admin", addr, "CAPACITY_SCALER service=bs")
	if code != 0 || !strings.Contains(out, "no runtime overlay") {
		t.Errorf("clear: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, _, errOut = runMain(t, "ctl", "set", "--admin", addr, "--service", "bs")
	if code == 0 || !strings.Contains(errOut, "--capacity-scaler X or --weight W") {
		t.Errorf("set without a value: exit %d, stderr %q", code, errOut)
	}
}
