package soak

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/cli"
)

// childEnv makes the test binary run `spillway serve` instead of the
// tests: the soak's proxy is a separate process running the real CLI.
const childEnv = "SPILLWAY_SOAK_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "serve" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestSoak runs the short soak (about 30 s) by default. Environment:
//
//	SPILLWAY_SOAK=10m          the full soak with 10 minutes of chaos (any duration)
//	SPILLWAY_SOAK=off          skip (so does -short)
//	SPILLWAY_SOAK_BIN=PATH     the spillway binary to run (default: this test binary, re-executed as `spillway serve`)
//	SPILLWAY_SOAK_REPORT=PATH  also write the report (table, then JSON) to PATH
//	SPILLWAY_SOAK_DIR=PATH     keep the configs, certificates and the proxy's log in PATH
func TestSoak(t *testing.T) {
	env := os.Getenv("SPILLWAY_SOAK")
	if testing.Short() || env == "off" {
		t.Skip("soak skipped (-short or SPILLWAY_SOAK=off)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the soak reads the proxy's RSS, descriptors and sockets from /proc (Linux only)")
	}
	o := Short()
	if env != "" && env != "short" {
		d, err := time.ParseDuration(env)
		if err != nil || d <= 0 {
			t.Fatalf("SPILLWAY_SOAK=%q: want a duration such as 10m, short or off", env)
		}
		o = Full(d)
	}
	o.Exe, o.Env = os.Args[0], []string{childEnv + "=serve"}
	if bin := os.Getenv("SPILLWAY_SOAK_BIN"); bin != "" {
		o.Exe, o.Env = bin, nil
	}
	if dir := os.Getenv("SPILLWAY_SOAK_DIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		o.Dir, o.KeepDir = dir, true
	}
	o.Progress = testWriter{t}

	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Log("\n" + table.String())
	if path := os.Getenv("SPILLWAY_SOAK_REPORT"); path != "" {
		js, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(table.String()+"\n"+string(js)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range rep.Failures() {
		t.Error(f)
	}
	// Every kind of chaos must have happened, or the soak proved nothing.
	if rep.ZoneKills == 0 || rep.Flaps == 0 || rep.ValidApplied == 0 || rep.InvalidRejected == 0 ||
		len(rep.Rotations) == 0 || rep.Hostile.Slowloris == 0 || rep.Hostile.SlowReaders == 0 ||
		rep.Hostile.Malformed == 0 || rep.Hostile.Pipelines == 0 {
		t.Errorf("some chaos never happened: zone kills %d, flaps %d, valid reloads %d, invalid reloads %d, rotations %d, slowloris %d, slow readers %d, malformed %d, pipelines %d",
			rep.ZoneKills, rep.Flaps, rep.ValidApplied, rep.InvalidRejected, len(rep.Rotations),
			rep.Hostile.Slowloris, rep.Hostile.SlowReaders, rep.Hostile.Malformed, rep.Hostile.Pipelines)
	}
}

// testWriter sends progress lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
