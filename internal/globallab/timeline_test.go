//go:build linux

package globallab

import (
	"errors"
	"testing"
	"time"
)

func TestSettled(t *testing.T) {
	s := time.Second
	a := func(at time.Duration, edge string) answer {
		if edge == "" {
			return answer{At: at, Err: errors.New("timeout")}
		}
		return answer{At: at, Status: 200, Zone: "us-east4-b", Edge: edge}
	}
	as := []answer{a(0, "euw"), a(s, ""), a(2*s, ""), a(3*s, "use"), a(4*s, "use"), a(5*s, "use"), a(6*s, ""), a(7*s, "euw")}
	for _, c := range []struct {
		name     string
		from, to time.Duration
		want     time.Duration
		ok       bool
	}{
		{"moves after the failures", s, 5 * s, 2 * s, true},
		{"a failure in flight at the next event is left out", s, 7 * s, 2 * s, true},
		{"a failure before the window end counts", s, 8 * s, 0, false},
		{"nothing in the window", 10 * s, 12 * s, 0, false},
	} {
		got, ok := settled(as, c.from, c.to, viaEdge("use"))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("%s: settled = %s, %v; want %s, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if n := failed(as, s, 7*s); n != 3 {
		t.Errorf("failed = %d, want 3", n)
	}
}
