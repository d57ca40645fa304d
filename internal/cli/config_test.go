package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// run runs the command line and returns its exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestConfigCommands: push, get, history, rollback and get --instances
// against a real embedded etcd, and an invalid file refused by push.
func TestConfigCommands(t *testing.T) {
	e := fleettest.Start(t)
	t.Setenv(fleetEnv, "etcd://"+e.ClientAddr)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	other := filepath.Join(dir, "other.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte(adminTestConfig), 0o644)
	os.WriteFile(other, []byte(strings.Replace(adminTestConfig, "port: 9}", "port: 10}", 1)), 0o644)
	os.WriteFile(bad, []byte(strings.Replace(adminTestConfig, "defaultService: bs", "defaultService: nowhere", 1)), 0o644)

	if code, _, stderr := run(t, "config", "history"); code != 1 || !strings.Contains(stderr, "config push") {
		t.Fatalf("history of an empty fleet: exit %d, stderr %q; want 1 and the fix", code, stderr)
	}
	if code, out, stderr := run(t, "config", "push", good, "--author", "ana", "--message", "first"); code != 0 || !strings.Contains(out, "revision 1") {
		t.Fatalf("push: exit %d, %q %q", code, out, stderr)
	}
	if code, out, stderr := run(t, "config", "push", "--author=bo", other); code != 0 || !strings.Contains(out, "revision 2") {
		t.Fatalf("push with the flag first: exit %d, %q %q", code, out, stderr)
	}
	code, out, stderr := run(t, "config", "push", bad, "--author", "ana")
	if code != 1 || !strings.Contains(stderr, "bad.yaml") || !strings.Contains(stderr, "nowhere") {
		t.Fatalf("push of an invalid file: exit %d, stderr %q; want 1 and the validation error", code, stderr)
	}
	if code, out, stderr = run(t, "config", "get"); code != 0 || !strings.Contains(out, "port: 10}") || !strings.Contains(stderr, "revision 2 by bo") {
		t.Fatalf("get: exit %d, %q %q; want revision 2 (the invalid push changed nothing)", code, out, stderr)
	}
	if code, out, _ = run(t, "config", "get", "--revision", "1"); code != 0 || out != adminTestConfig {
		t.Fatalf("get --revision 1: exit %d, %q", code, out)
	}
	if code, out, stderr = run(t, "config", "rollback", "1", "--author", "cy"); code != 0 || !strings.Contains(out, "is now revision 3") {
		t.Fatalf("rollback: exit %d, %q %q", code, out, stderr)
	}
	code, out, _ = run(t, "config", "history")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[1], "3 ") || !strings.Contains(lines[1], "rollback to revision 1") || !strings.Contains(lines[3], "first") {
		t.Fatalf("history: exit %d\n%s", code, out)
	}
	if code, _, stderr = run(t, "config", "rollback", "x"); code != 1 || !strings.Contains(stderr, "config history") {
		t.Fatalf("rollback x: exit %d, %q", code, stderr)
	}
	if code, _, _ = run(t, "config", "push"); code != 2 {
		t.Fatalf("push without a file: exit %d, want 2", code)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs spillway serve with args until the test ends; it
// returns the admin address and the log.
func startServe(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	t.Setenv("GOMAXPROCS", "2") // keeps --procs auto off in the test process
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"serve", "--admin", admin}, args...), io.Discard, logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d:\n%s", code, logs)
			}
		case <-time.After(45 * time.Second): // generous: a loaded machine
			t.Errorf("serve did not stop within 45 s")
		}
	})
	waitFor(t, "the admin API", func() bool {
		resp, err := http.Get("http://" + admin + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, logs)
	return admin, logs
}

func waitFor(t *testing.T, what string, cond func() bool, logs *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second) // generous: a loaded machine
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 45 s, still waiting for %s; log:\n%s", what, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// publishedFleetStatus waits for /health to carry the fleet status and
// returns it: the instance's agent publishes it just after the admin API
// starts answering (seen nil on a loaded machine when read at once).
func publishedFleetStatus(t *testing.T, admin string, logs *syncBuffer) *control.FleetStatus {
	t.Helper()
	var f *control.FleetStatus
	waitFor(t, "the fleet status in /health", func() bool { f = fleetStatus(t, admin); return f != nil }, logs)
	return f
}

func fleetStatus(t *testing.T, admin string) *control.FleetStatus {
	resp, err := http.Get("http://" + admin + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r report.Health
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.Fleet
}

// TestServeFleet: spillway serve --fleet takes the pushed config, shows
// up in config get --instances, and follows a new push.
func TestServeFleet(t *testing.T) {
	e := fleettest.Start(t)
	fl := "etcd://" + e.ClientAddr
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(adminTestConfig), 0o644)
	if code, _, stderr := run(t, "config", "push", good, "--fleet", fl, "--author", "ana"); code != 0 {
		t.Fatal(stderr)
	}
	admin, logs := startServe(t, "--fleet", fl, "--instance", "lb-a", "--region", "us-east1")
	if !strings.Contains(logs.String(), "starting with the fleet's config") {
		t.Fatalf("log does not say the fleet's config was taken:\n%s", logs)
	}
	waitFor(t, "lb-a listed at revision 1", func() bool {
		_, out, _ := run(t, "config", "get", "--instances", "--fleet", fl)
		return strings.Contains(out, "lb-a") && strings.Contains(out, "us-east1") && strings.Contains(out, " 1 ") && strings.Contains(out, "applied")
	}, logs)
	if code, _, stderr := run(t, "config", "push", good, "--fleet", fl, "--author", "bo"); code != 0 {
		t.Fatal(stderr)
	}
	waitFor(t, "revision 2 in force", func() bool {
		f := fleetStatus(t, admin)
		return f != nil && f.Revision == 2 && f.Instance == "lb-a" && !f.Stale
	}, logs)
	// Sharded probing is on by default in fleet mode.
	waitFor(t, "probes shared", func() bool { return strings.Contains(logs.String(), "fleet: sharing probes") }, logs)
	// So is fleet-wide RATE: the instance publishes its demand.
	waitFor(t, "demand shared", func() bool { return strings.Contains(logs.String(), "fleet: sharing demand") }, logs)
	cl, err := fleet.ClientConfig{Endpoints: []string{e.ClientAddr}, DialTimeout: 2 * time.Second}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitFor(t, "lb-a's demand record in etcd", func() bool {
		resp, err := cl.Get(context.Background(), "/spillway/demand/lb-a")
		return err == nil && len(resp.Kvs) == 1
	}, logs)
}

// TestServeFleetFallback: with etcd unreachable at start, serve --fleet
// serves --config FILE, says so, and is stale; without --config it fails
// with the fix.
func TestServeFleetFallback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "etcd://" + ln.Addr().String()
	ln.Close()
	code, _, stderr := run(t, "serve", "--fleet", dead, "--instance", "x", "--fleet-timeout", "300ms", "--admin", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "cannot reach etcd") || !strings.Contains(stderr, "--config FILE") {
		t.Fatalf("no etcd, no --config: exit %d, stderr %q", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "last-resort.yaml")
	os.WriteFile(file, []byte(adminTestConfig), 0o644)
	admin, logs := startServe(t, "--fleet", dead, "--instance", "x", "--fleet-timeout", "300ms", "--config", file)
	if !strings.Contains(logs.String(), "cannot reach etcd at start; serving the --config file") {
		t.Fatalf("the log does not say the file is served:\n%s", logs)
	}
	f := publishedFleetStatus(t, admin, logs)
	if !f.Stale || f.Revision != 0 || f.StaleWhy == "" {
		t.Fatalf("fleet status %+v, want stale at revision 0 (the file)", f)
	}
}

// TestServeFleetConfigFailsHere: a pushed config that validates but does
// not start on this host (its certificate file is missing here) makes
// serve --fleet start from --config FILE, report the revision rejected,
// and take the next push that starts.
func TestServeFleetConfigFailsHere(t *testing.T) {
	e := fleettest.Start(t)
	fl := "etcd://" + e.ClientAddr
	dir := t.TempDir()
	missing := filepath.Join(dir, "absent.pem")
	https := strings.Replace(adminTestConfig, "protocol: HTTP,", `protocol: HTTPS, certificates: [{certificateFile: "`+missing+`", privateKeyFile: "`+missing+`"}],`, 1)
	bad, good := filepath.Join(dir, "https.yaml"), filepath.Join(dir, "good.yaml")
	os.WriteFile(bad, []byte(https), 0o644)
	os.WriteFile(good, []byte(adminTestConfig), 0o644)
	if code, _, stderr := run(t, "config", "push", bad, "--fleet", fl, "--author", "ana"); code != 0 {
		t.Fatalf("push of a config valid but failing on this host: %s", stderr)
	}
	admin, logs := startServe(t, "--fleet", fl, "--instance", "lb-a", "--config", good)
	if !strings.Contains(logs.String(), "does not start on this instance; starting from the --config file") {
		t.Fatalf("the log does not say the file is served:\n%s", logs)
	}
	f := publishedFleetStatus(t, admin, logs)
	if f.Revision != 0 || f.RejectedRevision != 1 || !strings.Contains(f.RejectedError, "absent.pem") {
		t.Fatalf("fleet status %+v, want revision 0 (the file) and 1 rejected", f)
	}
	waitFor(t, "lb-a listed as rejecting revision 1", func() bool {
		_, out, _ := run(t, "config", "get", "--instances", "--fleet", fl)
		return strings.Contains(out, "lb-a") && strings.Contains(out, "rejected 1") && strings.Contains(out, "absent.pem")
	}, logs)
	if code, _, stderr := run(t, "config", "push", good, "--fleet", fl, "--author", "bo"); code != 0 {
		t.Fatal(stderr)
	}
	waitFor(t, "revision 2 in force", func() bool {
		f := fleetStatus(t, admin)
		return f != nil && f.Revision == 2 && f.RejectedRevision == 0
	}, logs)
}
