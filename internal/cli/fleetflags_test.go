package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The etcd TLS and user flags reach the client config, and wrong
// combinations are refused with the fix.
func TestFleetFlags(t *testing.T) {
	t.Setenv(fleetEnv, "")
	t.Setenv(fleetPasswordEnv, "")
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)
	parse := func(args ...string) (*fleetFlags, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		ff := addFleetFlags(fs, "")
		return ff, fs.Parse(args)
	}
	ff, _ := parse("--fleet", "etcds://e1:2379,e2:2379", "--fleet-ca", "ca.pem", "--fleet-cert", "c.pem", "--fleet-key", "k.pem", "--fleet-user", "lb", "--fleet-password-file", pw)
	cc, err := ff.clientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.Endpoints) != 2 || !cc.Secure || cc.CAFile != "ca.pem" || cc.CertFile != "c.pem" || cc.KeyFile != "k.pem" || cc.Username != "lb" || cc.Password != "s3cret" {
		t.Fatalf("client config %+v", cc)
	}
	t.Setenv(fleetPasswordEnv, "from-env")
	ff, _ = parse("--fleet", "etcd://e1:2379", "--fleet-user", "lb")
	if cc, err = ff.clientConfig(); err != nil || cc.Password != "from-env" || cc.Secure {
		t.Fatalf("password from the environment: %+v, %v", cc, err)
	}
	t.Setenv(fleetPasswordEnv, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--fleet etcd://"},
		{[]string{"--fleet", "etcd://e1:2379", "--fleet-user", "lb"}, "--fleet-password-file"},
		{[]string{"--fleet", "etcd://e1:2379", "--fleet-password-file", pw}, "--fleet-user NAME"},
		{[]string{"--fleet", "e1"}, "host:port"},
	} {
		ff, _ := parse(c.args...)
		if _, err := ff.clientConfig(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
	ff, _ = parse("--fleet", "etcd://e1:2379", "--fleet-cert", "c.pem")
	if _, _, err := ff.store(); err == nil || !strings.Contains(err.Error(), "--fleet-key") {
		t.Errorf("cert without key: err = %v", err)
	}
	ff, _ = parse("--fleet", "etcd://e1:2379", "--fleet-ca", filepath.Join(t.TempDir(), "absent.pem"))
	if _, _, err := ff.store(); err == nil || !strings.Contains(err.Error(), "--fleet-ca") {
		t.Errorf("absent CA file: err = %v", err)
	}
}
