package cli

import (
	"strings"
	"testing"
)

// TestLabFleetFlags: spillway lab --fleet refuses what it cannot run,
// before starting anything.
func TestLabFleetFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fleet", "--scenario", "winticket"}, "cannot be combined with --scenario"},
		{[]string{"--fleet", "--fleet-instances", "1"}, "--fleet-instances must be at least 2"},
		{[]string{"--fleet", "--fleet-lease", "500ms"}, "--fleet-lease 500ms: etcd leases count whole seconds"},
		{[]string{"--fleet", "--fleet-lease", "2500ms"}, "give whole seconds, at least 2s"},
		{[]string{"--global", "--fleet"}, "--global runs its own topology"},
		{[]string{"--global", "--at", "10s:down=us-south1"}, "--global runs its own topology"},
	} {
		code, _, stderr := run(t, append([]string{"lab"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("lab %v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}
