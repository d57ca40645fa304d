package soak

import (
	"strings"
	"testing"
)

// A malformed-body request the proxy answered 503 because no backend was
// reachable (it never read the body) is judged like the steady load:
// expected inside a convergence window, a failure outside one. Any other
// 5xx to a malformed request is a failure wherever it falls.
func TestMalformedBodyUnreachedIsJudgedByWindow(t *testing.T) {
	for _, c := range []struct {
		name    string
		hostile HostileStats
		fail    string
	}{
		{"inside a window", HostileStats{Unreached: 1}, ""},
		{"outside", HostileStats{Unreached: 1, UnreachedOutside: 1}, "no backend reached"},
		{"other 5xx", HostileStats{Notes: map[string]int{"malformed bad chunk size → 502": 1}, NoteExamples: map[string]string{}}, "blamed on the backends"},
	} {
		r := &Report{Hostile: c.hostile, ProxyAliveAtEnd: true}
		got := strings.Join(r.Failures(), "; ")
		if c.fail == "" && strings.Contains(got, "malformed") || c.fail != "" && !strings.Contains(got, c.fail) {
			t.Errorf("%s: failures %q, want one containing %q", c.name, got, c.fail)
		}
	}
}
