package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
)

// TestFleetOverTLSWithAuth: the --fleet-ca/-cert/-key and --fleet-user
// flags reach etcd's client: config push and serve --fleet work against
// an etcd that wants TLS, a client certificate and a password, and fail
// with a wrong password or without the client certificate.
func TestFleetOverTLSWithAuth(t *testing.T) {
	tf := fleettest.NewTLSFiles(t, "root")
	e := fleettest.StartTLS(t, tf)
	admin, err := fleet.ClientConfig{Endpoints: []string{e.ClientAddr}, CAFile: tf.CA, CertFile: tf.ClientCert, KeyFile: tf.ClientKey}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "lb", "lb-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "lb", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("etcd auth setup: %v", err)
		}
	}
	dir := t.TempDir()
	pw, wrong, cfgFile := filepath.Join(dir, "pw"), filepath.Join(dir, "wrong"), filepath.Join(dir, "c.yaml")
	os.WriteFile(pw, []byte("lb-pw\n"), 0o600)
	os.WriteFile(wrong, []byte("nope\n"), 0o600)
	os.WriteFile(cfgFile, []byte(adminTestConfig), 0o644)
	t.Setenv(fleetEnv, "")
	tlsFlags := []string{"--fleet", "etcds://" + e.ClientAddr, "--fleet-ca", tf.CA, "--fleet-cert", tf.ClientCert, "--fleet-key", tf.ClientKey, "--fleet-user", "lb"}
	with := func(args ...string) []string { return append(args, tlsFlags...) }

	if code, out, stderr := run(t, with("config", "push", cfgFile, "--author", "ana", "--fleet-password-file", pw)...); code != 0 || !strings.Contains(out, "revision 1") {
		t.Fatalf("push over TLS with a password: exit %d, %q %q", code, out, stderr)
	}
	if code, _, stderr := run(t, with("config", "get", "--fleet-password-file", wrong, "--timeout", "3s")...); code != 1 || !strings.Contains(stderr, "authentication failed") {
		t.Fatalf("wrong password: exit %d, stderr %q", code, stderr)
	}
	noCert := []string{"config", "get", "--fleet", "etcds://" + e.ClientAddr, "--fleet-ca", tf.CA, "--fleet-user", "lb", "--fleet-password-file", pw, "--timeout", "2s"}
	if code, _, stderr := run(t, noCert...); code != 1 {
		t.Fatalf("without the client certificate: exit %d, stderr %q; want a failure", code, stderr)
	}

	_, logs := startServe(t, with("serve", "--instance", "lb-tls", "--fleet-password-file", pw)[1:]...)
	waitFor(t, "lb-tls listed at revision 1", func() bool {
		_, out, _ := run(t, with("config", "get", "--instances", "--fleet-password-file", pw)...)
		return strings.Contains(out, "lb-tls") && strings.Contains(out, "applied")
	}, logs)
}
