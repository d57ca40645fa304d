package cli

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

func TestSetProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOMAXPROCS", "")
	if auto, err := setProcs("auto", false, log); err != nil || !auto {
		t.Errorf("auto: %v, %v; want auto mode", auto, err)
	}
	if auto, err := setProcs("3", true, log); err != nil || auto || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("3: auto %v, err %v, GOMAXPROCS %d; want fixed at 3", auto, err, runtime.GOMAXPROCS(0))
	}
	for _, bad := range []string{"0", "-1", "two", ""} {
		if _, err := setProcs(bad, true, log); err == nil || !strings.Contains(err.Error(), "--procs") {
			t.Errorf("%q: err %v, want a --procs error", bad, err)
		}
	}

	// The environment variable wins over the default, not over the flag.
	t.Setenv("GOMAXPROCS", "2")
	if auto, _ := setProcs("auto", false, log); auto {
		t.Error("auto mode despite GOMAXPROCS in the environment")
	}
	if auto, _ := setProcs("auto", true, log); !auto {
		t.Error("--procs auto given explicitly did not win over GOMAXPROCS")
	}
}

func TestMaxConnectionsFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  bool
	}{
		{"0", 0, false},
		{"5000", 5000, false},
		{"-1", 0, true},
		{"lots", 0, true},
	} {
		got, err := maxConnections(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("maxConnections(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "--max-connections") {
			t.Errorf("maxConnections(%q): error %q does not name the flag", tc.in, err)
		}
	}
	if n, err := maxConnections("auto"); err != nil || n < 0 {
		t.Errorf("maxConnections(auto) = %d, %v", n, err)
	}
}
