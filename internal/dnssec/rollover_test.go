package dnssec

import (
	"os"
	"reflect"
	"testing"
	"time"
)

// The key state is kept on disk: a second Roll at the same time (a
// restart) makes nothing new and gives the same keys; one at the
// rollover's time adds the successor, scheduled from the state alone.
func TestRollResumes(t *testing.T) {
	dir := t.TempDir()
	p := Policy{ZSKLifetime: 30 * 24 * time.Hour, Propagation: time.Hour, MaxZoneTTL: time.Hour, ParentDelay: 48 * time.Hour}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first, err := Roll(dir, "gslb.example.", p, t0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Roll(dir, "gslb.example.", p, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first.State, again.State) || len(first.State.Keys) != 2 {
		t.Fatalf("a restart changed the keys:\n%+v\n%+v", first.State, again.State)
	}
	due := t0.Add(p.ZSKLifetime - p.dnskeyWait())
	if next := again.State.NextEvent(t0.Add(time.Hour), p); !next.Equal(due) {
		t.Fatalf("next event %v, want %v", next, due)
	}
	rolled, err := Roll(dir, "gslb.example.", p, due)
	if err != nil {
		t.Fatal(err)
	}
	if len(rolled.State.Keys) != 3 {
		t.Fatalf("at the rollover: %+v", rolled.State.Keys)
	}
	old, succ := rolled.State.Keys[1], rolled.State.Keys[2]
	if !succ.Active.Equal(due.Add(2*time.Hour)) || !old.Retired.Equal(succ.Active) || !old.Removed.Equal(succ.Active.Add(2*time.Hour)) {
		t.Fatalf("schedule: old %+v, new %+v", old, succ)
	}
	end, err := Roll(dir, "gslb.example.", p, old.Removed)
	if err != nil {
		t.Fatal(err)
	}
	if len(end.State.Keys) != 2 {
		t.Fatalf("after removal: %+v", end.State.Keys)
	}
	if _, err := os.Stat(dir + "/" + old.File); !os.IsNotExist(err) {
		t.Fatalf("removed key's file: %v", err)
	}
}
