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
