package fleettest

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// childEnv makes the test binary, run again by TestQuietEtcd, be the
// child that starts and stops an etcd.
const childEnv = "FLEETTEST_QUIET_CHILD"

// TestQuietEtcd: starting, stopping and restarting an etcd, as the fleet
// tests do, writes none of etcd's log lines to the output: each stop
// used to print three "level":"error" lines with stack traces (112 in a
// passing go test -v ./internal/fleet/), one per listener etcd closes.
// The etcd runs in a child process, whose whole output is checked.
func TestQuietEtcd(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		e := Start(t)
		e.Stop()
		e.Restart()
		return // the cleanup stops it again
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestQuietEtcd$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestQuietEtcd") {
		t.Fatalf("the child did not run the test:\n%s", out)
	}
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, `"level":`) || strings.Contains(line, "etcd: ") {
			t.Errorf("etcd logged while starting and stopping: %s", line)
		}
	}
}

// recordTB records what is logged to it.
type recordTB struct {
	testing.TB
	mu   sync.Mutex
	logs []string
}

func (r *recordTB) Log(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range args {
		r.logs = append(r.logs, a.(string))
	}
}

// TestLoggerKeepsErrors: Logger hands etcd's errors to the test's log,
// without a stack trace, and leaves out warnings.
func TestLoggerKeepsErrors(t *testing.T) {
	rec := &recordTB{TB: t}
	lg := Logger(rec)
	lg.Warn("a warning")
	lg.Error("lost the disk")
	if len(rec.logs) != 1 || !strings.Contains(rec.logs[0], "lost the disk") || !strings.Contains(rec.logs[0], "ERROR") || strings.Contains(rec.logs[0], "\n") {
		t.Errorf("logged %q; want one line with the error", rec.logs)
	}
}
