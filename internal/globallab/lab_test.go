//go:build linux

package globallab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/cli"
	"github.com/spillwaylb/spillway/internal/globallab"
	"github.com/spillwaylb/spillway/internal/netlab"
)

// childEnv makes the test binary run the spillway command line instead
// of the tests: the lab starts its edges, regional layers and GSLB as
// `spillway serve` processes inside the namespaces, and in the test that
// binary is this one (os.Executable).
const childEnv = "SPILLWAY_GLOBALLAB_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// need skips without the rights to build namespaces or without BIRD,
// unless SPILLWAY_REQUIRE_NETNS is set (CI runs as root and sets it).
func need(t *testing.T) {
	t.Helper()
	err := netlab.Check()
	if err == nil {
		if _, lerr := exec.LookPath("bird"); lerr != nil {
			err = lerr
		}
	}
	if err == nil {
		return
	}
	if os.Getenv("SPILLWAY_REQUIRE_NETNS") != "" {
		t.Fatalf("SPILLWAY_REQUIRE_NETNS is set: %v (fix: run as root; apt-get install -y bird2 iproute2)", err)
	}
	t.Skip("spillway lab --global: " + err.Error())
}

// TestLabGlobal runs `spillway lab --global --json` as a user would and
// requires every row's verdict to be ok, every row to be there, and no
// namespace of the lab left afterwards.
func TestLabGlobal(t *testing.T) {
	need(t)
	if testing.Short() {
		t.Skip("the global lab takes about a minute and a half (-short)")
	}
	t.Setenv(childEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, []string{"lab", "--global", "--json"}, &stdout, &stderr)
	t.Logf("progress:\n%s", stderr.String())
	var rep globallab.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d; the report is not JSON: %v\n%s", code, err, stdout.String())
	}
	var table bytes.Buffer
	globallab.WriteTable(&table, &rep)
	t.Logf("\n%s", table.String())
	if code != 0 {
		t.Errorf("spillway lab --global exited %d", code)
	}
	want := []string{"a1", "a2", "a3", "a4", "a5", "a6", "d1", "d2", "d3", "b1", "b2", "c1", "c2", "d4", "c3", "c4", "c5", "e1", "e2"}
	var got []string
	for _, row := range rep.Rows {
		got = append(got, row.ID)
		if row.Verdict != globallab.Pass {
			t.Errorf("row %s %s: %s (expected %s; measured %s)", row.ID, row.What, row.Verdict, row.Expected, row.Measured)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rows %v, want %v", got, want)
	}
	left, err := netlab.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range left {
		if strings.HasPrefix(ns, globallab.Prefix) {
			t.Errorf("namespace %s left after the lab", ns)
		}
	}
}

// Without CAP_NET_ADMIN the lab says so in one line and exits 1. As
// root the check runs in a child whose capability bounding set lacks
// CAP_NET_ADMIN and CAP_SYS_ADMIN (setpriv), so root loses them on exec.
func TestLabGlobalWithoutNetAdmin(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := 0
	if netlab.Check() != nil {
		code = cli.Main(context.Background(), []string{"lab", "--global"}, &stdout, &stderr)
	} else {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("running as root and no setpriv (util-linux) to drop CAP_NET_ADMIN with")
		}
		cmd := exec.Command(setpriv, "--bounding-set", "-net_admin,-sys_admin", "--inh-caps", "-net_admin,-sys_admin", os.Args[0], "lab", "--global")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
	}
	msg := stderr.String()
	if code != 1 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "CAP_NET_ADMIN") || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and one line naming CAP_NET_ADMIN", code, stdout.String(), msg)
	}
}
