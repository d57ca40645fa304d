package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/embedded"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
)

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServeFleetEmbedded: three spillway serve --fleet-embedded, each
// running its own etcd member, form one cluster without a separate
// etcd; a config pushed through one member's client URL reaches all
// three, and each lists the others.
func TestServeFleetEmbedded(t *testing.T) {
	names := []string{"lb-a", "lb-b", "lb-c"}
	var peers, clients []string
	for _, n := range names {
		peers = append(peers, n+"=http://"+freePort(t))
		clients = append(clients, freePort(t))
	}
	cluster := strings.Join(peers, ",")
	file := filepath.Join(t.TempDir(), "last-resort.yaml")
	os.WriteFile(file, []byte(adminTestConfig), 0o644)
	var admins []string
	var logs []*syncBuffer
	for i, n := range names {
		// The first member has no quorum until the second starts: it
		// starts from --config, stale, and follows once the cluster forms.
		admin, lg := startServe(t, "--fleet-embedded", cluster, "--instance", n, "--region", "us-east1",
			"--fleet-embedded-client", "http://"+clients[i], "--fleet-data", filepath.Join(t.TempDir(), n),
			"--fleet-timeout", "1s", "--config", file)
		if !strings.Contains(lg.String(), "embedded etcd member started") {
			t.Fatalf("%s: the log does not say its member started:\n%s", n, lg)
		}
		admins, logs = append(admins, admin), append(logs, lg)
	}
	if !strings.Contains(logs[0].String(), "cannot reach etcd at start; serving the --config file") {
		t.Errorf("lb-a, alone at first, did not start from --config:\n%s", logs[0])
	}
	fl := "etcd://" + strings.Join(clients, ",")
	if code, out, stderr := run(t, "config", "push", file, "--fleet", "etcd://"+clients[1], "--author", "ana"); code != 0 {
		t.Fatalf("push: %s%s", out, stderr)
	}
	for i, admin := range admins {
		waitFor(t, names[i]+" at revision 1", func() bool {
			f := fleetStatus(t, admin)
			return f != nil && f.Revision == 1 && !f.Stale && f.Instance == names[i]
		}, logs[i])
	}
	waitFor(t, "three instances listed", func() bool {
		_, out, _ := run(t, "config", "get", "--instances", "--fleet", fl)
		return strings.Count(out, "applied") == 3
	}, logs[0])
}

// TestServeFleetEmbeddedFlags: wrong --fleet-embedded combinations are
// refused with the flag and the fix.
func TestServeFleetEmbeddedFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte(adminTestConfig), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fleet-data", dir, "--config", file}, "--fleet-data needs --fleet-embedded"},
		{[]string{"--fleet-embedded-client", "http://127.0.0.1:2379", "--config", file}, "--fleet-embedded-client needs --fleet-embedded"},
		{[]string{"--fleet-embedded-state", "existing", "--config", file}, "--fleet-embedded-state needs --fleet-embedded"},
		{[]string{"--fleet-embedded", "a=http://127.0.0.1:1", "--instance", "a", "--fleet-embedded-state", "join"}, `--fleet-embedded-state "join": want new or existing`},
		{[]string{"--fleet-embedded", "a=http://127.0.0.1:1", "--instance", "b"}, "--instance b, is not a member"},
		{[]string{"--fleet-embedded", "a=127.0.0.1:2380", "--instance", "a"}, "is not http://HOST:PORT"},
		{[]string{"--fleet-embedded", "a=https://127.0.0.1:2380", "--instance", "a"}, "plain HTTP only"},
		{[]string{"--fleet-embedded", "a=http://127.0.0.1", "--instance", "a"}, "needs a numeric port"},
		{[]string{"--fleet-embedded", "a=http://127.0.0.1:1", "--instance", "a", "--fleet-embedded-client", "http://0.0.0.0:2379"}, "--fleet-embedded-client: \"http://0.0.0.0:2379\": an unspecified host"},
		{[]string{"--fleet-embedded", "a=http://[::]:2380", "--instance", "a"}, "an unspecified host"},
		{[]string{"--fleet-embedded", "a=http://127.0.0.1:1,a=http://127.0.0.1:2", "--instance", "a"}, "member a is named twice"},
		{[]string{"--fleet-embedded", "a", "--instance", "a"}, "is not NAME=http://HOST:PORT"},
		{[]string{"--fleet-embedded", "a=http://127.0.0.1:1", "--instance", "a", "--fleet-embedded-client", "http://127.0.0.1:1"}, "is this member's peer URL"},
		{[]string{"--fleet-embedded", "a=http://127.0.0.1:1", "--instance", "a", "--fleet-ca", file}, "--fleet-ca with --fleet-embedded"},
		{[]string{"--fleet", "etcd://127.0.0.1:2379", "--fleet-lease", "1500ms", "--config", file}, "--fleet-lease 1.5s: etcd leases count whole seconds"},
		{[]string{"--fleet", "etcd://127.0.0.1:2379", "--fleet-lease", "1s", "--config", file}, "at least 2s"},
	} {
		code, _, stderr := run(t, append([]string{"serve", "--admin", ""}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "fix") {
			t.Errorf("serve %v: exit %d, stderr %q; want an error with %q and a fix", c.args, code, stderr, c.want)
		}
	}
}

// TestServeFleetEmbeddedMemberFails: an instance whose embedded member
// does not start (here its peer port is taken; in production, a lost
// data directory) still serves: from --config, marked stale, when it
// knows no other etcd; from the fleet when --fleet names the other
// members' client URLs. Without --config it fails with the error and
// the fix. The data plane does not depend on the member starting.
func TestServeFleetEmbeddedMemberFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cluster := "lb-a=http://" + taken.Addr().String()
	dir := t.TempDir()
	file := filepath.Join(dir, "last-resort.yaml")
	os.WriteFile(file, []byte(adminTestConfig), 0o644)
	member := []string{"--fleet-embedded", cluster, "--instance", "lb-a", "--region", "us-east1",
		"--fleet-embedded-client", "http://" + freePort(t), "--fleet-data", filepath.Join(dir, "a"), "--fleet-timeout", "1s"}

	code, _, stderr := run(t, append([]string{"serve", "--admin", ""}, member...)...)
	if code == 0 || !strings.Contains(stderr, "--fleet-embedded") || !strings.Contains(stderr, "fix") || !strings.Contains(stderr, "--config") {
		t.Errorf("without --config: exit %d, stderr %q; want the member's error and the fix", code, stderr)
	}

	// The default data directory, under $TMPDIR, is warned about.
	t.Setenv("TMPDIR", dir)
	code, _, stderr = run(t, "serve", "--admin", "", "--fleet-embedded", cluster, "--instance", "lb-a", "--fleet-embedded-client", "http://"+freePort(t))
	if code == 0 || !strings.Contains(stderr, "temporary directory") || !strings.Contains(stderr, "fix: give --fleet-data DIR on persistent storage") {
		t.Errorf("default --fleet-data: exit %d, stderr %q; want a warning with the fix", code, stderr)
	}

	admin, logs := startServe(t, append(member, "--config", file)...)
	for _, want := range []string{"embedded etcd member did not start", "fix", "cannot reach etcd at start; serving the --config file"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
	if f := publishedFleetStatus(t, admin, logs); !f.Stale {
		t.Errorf("fleet status %+v; want stale", f)
	}

	// With --fleet naming a running etcd (the other members' client
	// URLs), the instance follows the fleet without its own member.
	e := fleettest.Start(t)
	if code, _, stderr := run(t, "config", "push", file, "--fleet", "etcd://"+e.ClientAddr, "--author", "ana"); code != 0 {
		t.Fatal(stderr)
	}
	member[len(member)-3] = filepath.Join(dir, "b")
	admin, logs = startServe(t, append(member, "--config", file, "--fleet", "etcd://"+e.ClientAddr)...)
	waitFor(t, "revision 1, not stale", func() bool {
		f := fleetStatus(t, admin)
		return f != nil && f.Revision == 1 && !f.Stale
	}, logs)
}

// TestServeFleetEmbeddedMemberStops: an instance whose embedded member
// stops after it started (here removed from the cluster through the
// other member, as etcdctl member remove would) logs an error with the
// fix, turns stale once etcd no longer answers, and keeps serving.
func TestServeFleetEmbeddedMemberStops(t *testing.T) {
	pa, pb, ca, cb := freePort(t), freePort(t), freePort(t), freePort(t)
	cluster := "lb-a=http://" + pa + ",lb-b=http://" + pb
	peers, err := embedded.ParseCluster("cluster", cluster)
	if err != nil {
		t.Fatal(err)
	}
	cbu, err := embedded.ParseURL("client", "http://"+cb)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := embedded.Start(embedded.Options{Name: "lb-b", Cluster: peers, ClientURL: cbu, Dir: filepath.Join(t.TempDir(), "b"), Logger: fleettest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	file := filepath.Join(t.TempDir(), "last-resort.yaml")
	os.WriteFile(file, []byte(adminTestConfig), 0o644)
	admin, logs := startServe(t, "--fleet-embedded", cluster, "--instance", "lb-a", "--region", "us-east1",
		"--fleet-embedded-client", "http://"+ca, "--fleet-data", filepath.Join(t.TempDir(), "a"),
		"--fleet-timeout", "10s", "--config", file)
	if code, _, stderr := run(t, "config", "push", file, "--fleet", "etcd://"+cb, "--author", "ana"); code != 0 {
		t.Fatal(stderr)
	}
	waitFor(t, "revision 1, not stale", func() bool {
		f := fleetStatus(t, admin)
		return f != nil && f.Revision == 1 && !f.Stale
	}, logs)

	cl, err := fleet.ClientConfig{Endpoints: []string{cb}}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	ml, err := cl.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ml.Members {
		if m.Name != "lb-a" {
			continue
		}
		// etcd refuses to remove a member until the cluster has been
		// healthy for a while ("unhealthy cluster").
		for _, err := cl.MemberRemove(ctx, m.ID); err != nil; _, err = cl.MemberRemove(ctx, m.ID) {
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	waitFor(t, "the member's stop logged, and stale", func() bool {
		f := fleetStatus(t, admin)
		return strings.Contains(logs.String(), "embedded etcd member stopped") && f != nil && f.Stale && f.Revision == 1
	}, logs)
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "embedded etcd member stopped") {
			t.Log(line)
			if !strings.Contains(line, "fix") {
				t.Errorf("the error has no fix: %s", line)
			}
		}
	}
}
