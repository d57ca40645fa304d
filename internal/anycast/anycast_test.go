package anycast

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

var (
	t0   = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pfx4 = netip.MustParsePrefix("203.0.113.0/24")
	pfx6 = netip.MustParsePrefix("2001:db8:1::/48")
)

func intp(n int) *int         { return &n }
func f64p(f float64) *float64 { return &f }
func i64p(n int64) *int64     { return &n }
func healthy(h, n int) Capacity {
	return Capacity{Services: 1, Share: float64(h) / float64(n), Healthy: h, Members: n}
}

// bgpConf is the documented example: floor 1%, degraded below 50% with 3
// prepends, hold-down 30 s.
func bgpConf() *config.BGP {
	return &config.BGP{LocalASN: 65001, RouterID: "192.0.2.1", MinHealthyCapacityPercent: f64p(1),
		Degraded: &config.BGPDegraded{BelowHealthyCapacityPercent: 50, ASPathPrepend: 3}, HoldDownSec: intp(30), MaxStaleSec: intp(300)}
}

// event is one step of a scenario: at t0+at, the frontend has cap (and
// the other inputs), and the prefix must then be want/reason.
type event struct {
	at       time.Duration
	cap      Capacity
	down     bool // listener not bound
	stale    time.Duration
	shutdown bool
	want     State
	reason   Reason
}

func TestDecide(t *testing.T) {
	up := healthy(6, 6)
	tests := []struct {
		name   string
		conf   func(*config.BGP)
		events []event
	}{
		{"first announcement needs no hold-down", nil, []event{
			{at: 0, cap: Capacity{Services: 1, Unknown: 6, Members: 6}, want: Withdrawn, reason: AwaitingProbes},
			{at: time.Second, cap: up, want: Announced, reason: Serving},
		}},
		{"all backends down withdraws at once, returns after hold-down", nil, []event{
			{at: 0, cap: up, want: Announced, reason: Serving},
			{at: 10 * time.Second, cap: healthy(0, 6), want: Withdrawn, reason: NoHealthyBackend},
			{at: 11 * time.Second, cap: up, want: Withdrawn, reason: HoldDown},
			{at: 40 * time.Second, cap: up, want: Withdrawn, reason: HoldDown},
			{at: 41 * time.Second, cap: up, want: Announced, reason: Serving},
		}},
		{"degraded below 50% with prepend, back after hold-down", nil, []event{
			{at: 0, cap: up, want: Announced, reason: Serving},
			{at: time.Second, cap: healthy(2, 6), want: Degraded, reason: LowCapacity},
			{at: 2 * time.Second, cap: up, want: Degraded, reason: HoldDown},
			{at: 32 * time.Second, cap: up, want: Announced, reason: Serving},
		}},
		{"below the floor", func(b *config.BGP) { b.MinHealthyCapacityPercent = f64p(40) }, []event{
			{at: 0, cap: healthy(2, 6), want: Withdrawn, reason: BelowMinimum},
			{at: time.Second, cap: healthy(3, 6), want: Announced, reason: Serving},
		}},
		{"without degraded, a low share still announces", func(b *config.BGP) { b.Degraded = nil }, []event{
			{at: 0, cap: healthy(1, 6), want: Announced, reason: Serving},
		}},
		{"default floor: any healthy endpoint", func(b *config.BGP) { b.MinHealthyCapacityPercent, b.Degraded = nil, nil }, []event{
			{at: 0, cap: healthy(1, 100), want: Announced, reason: Serving},
			{at: time.Second, cap: healthy(0, 100), want: Withdrawn, reason: NoHealthyBackend},
		}},
		{"drained site", nil, []event{
			{at: 0, cap: up, want: Announced, reason: Serving},
			{at: time.Second, cap: Capacity{}, want: Withdrawn, reason: NoCapacity},
		}},
		{"listener down", nil, []event{
			{at: 0, cap: up, down: true, want: Withdrawn, reason: NotListening},
			{at: time.Second, cap: up, want: Announced, reason: Serving},
		}},
		{"fleet stale past the limit", nil, []event{
			{at: 0, cap: up, want: Announced, reason: Serving},
			{at: 100 * time.Second, cap: up, stale: 99 * time.Second, want: Announced, reason: Serving},
			{at: 301 * time.Second, cap: up, stale: 300 * time.Second, want: Withdrawn, reason: FleetStale},
			{at: 302 * time.Second, cap: up, want: Withdrawn, reason: HoldDown},
		}},
		{"stale without a limit keeps announcing", func(b *config.BGP) { b.MaxStaleSec = nil }, []event{
			{at: 0, cap: up, want: Announced, reason: Serving},
			{at: time.Hour, cap: up, stale: time.Hour, want: Announced, reason: Serving},
		}},
		{"shutdown withdraws and never returns", nil, []event{
			{at: 0, cap: up, want: Announced, reason: Serving},
			{at: time.Second, cap: up, shutdown: true, want: Withdrawn, reason: ShuttingDown},
			{at: time.Minute, cap: up, shutdown: true, want: Withdrawn, reason: ShuttingDown},
		}},
		{"hold-down 0 returns at once", func(b *config.BGP) { b.HoldDownSec = intp(0) }, []event{
			{at: 0, cap: up, want: Announced, reason: Serving},
			{at: time.Second, cap: healthy(0, 6), want: Withdrawn, reason: NoHealthyBackend},
			{at: 2 * time.Second, cap: up, want: Announced, reason: Serving},
		}},
		{"a relapse restarts the hold-down", nil, []event{
			{at: 0, cap: up, want: Announced, reason: Serving},
			{at: time.Second, cap: healthy(0, 6), want: Withdrawn, reason: NoHealthyBackend},
			{at: 2 * time.Second, cap: up, want: Withdrawn, reason: HoldDown},
			{at: 20 * time.Second, cap: healthy(0, 6), want: Withdrawn, reason: NoHealthyBackend},
			{at: 21 * time.Second, cap: up, want: Withdrawn, reason: HoldDown},
			{at: 50 * time.Second, cap: up, want: Withdrawn, reason: HoldDown},
			{at: 51 * time.Second, cap: up, want: Announced, reason: Serving},
		}},
		{"MED instead of prepend", func(b *config.BGP) { b.Degraded.ASPathPrepend, b.Degraded.MED = 0, i64p(100) }, []event{
			{at: 0, cap: healthy(1, 6), want: Degraded, reason: LowCapacity},
		}},
		{"DNS frontend serves while listening", nil, []event{
			{at: 0, cap: Capacity{Static: true}, want: Announced, reason: Serving},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bgpConf()
			if tt.conf != nil {
				tt.conf(b)
			}
			var prev []Prefix
			for i, ev := range tt.events {
				now := t0.Add(ev.at)
				in := Input{Now: now, BGP: b, Prev: prev, ShuttingDown: ev.shutdown,
					Frontends: []Frontend{{Name: "edge", Prefixes: []netip.Prefix{pfx4}, Listening: !ev.down, Capacity: ev.cap}}}
				if ev.stale > 0 {
					in.Stale, in.StaleSince = true, now.Add(-ev.stale)
				}
				prev = Decide(in)
				if len(prev) != 1 {
					t.Fatalf("event %d: %d decisions", i, len(prev))
				}
				d := prev[0]
				if d.State != ev.want || d.Reason != ev.reason {
					t.Fatalf("event %d (t+%s): %s/%s (%s), want %s/%s", i, ev.at, d.State, d.Reason, d.Detail, ev.want, ev.reason)
				}
				if !strings.HasPrefix(d.Detail, "edge: ") || d.Prefix != pfx4 || len(d.Frontends) != 1 {
					t.Errorf("event %d: %+v", i, d)
				}
				if d.State == Degraded && d.ASPathPrepend != b.Degraded.ASPathPrepend && d.MED != b.Degraded.MED {
					t.Errorf("event %d: degraded without its attributes: %+v", i, d)
				}
				if d.State != Degraded && (d.ASPathPrepend != 0 || d.MED != nil) {
					t.Errorf("event %d: %s with degraded attributes", i, d.State)
				}
			}
		})
	}
}

// TestFlappingBackendDoesNotFlapTheRoute: three of four endpoints flap
// every 2 s for two minutes (health checks that pass and fail in turn),
// taking the healthy share across the degraded threshold; then every
// endpoint flaps.
// Without hysteresis the route would change 60 times; with it, it
// changes once when the flapping starts and once 30 s after it stops.
func TestFlappingBackendDoesNotFlapTheRoute(t *testing.T) {
	for _, tc := range []struct {
		name     string
		down     Capacity
		worst    State
		maxFlaps int
	}{
		{"three of four endpoints", healthy(1, 4), Degraded, 2},
		{"every endpoint", healthy(0, 4), Withdrawn, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bgpConf()
			var prev []Prefix
			changes, last := 0, Announced
			decide := func(at time.Duration, c Capacity) Prefix {
				prev = Decide(Input{Now: t0.Add(at), BGP: b, Prev: prev,
					Frontends: []Frontend{{Name: "edge", Prefixes: []netip.Prefix{pfx4, pfx6}, Listening: true, Capacity: c}}})
				if prev[0].State != last {
					changes++
					last = prev[0].State
				}
				return prev[0]
			}
			decide(0, healthy(4, 4))
			for at := time.Second; at <= 2*time.Minute; at += time.Second {
				c := healthy(4, 4)
				if at/(2*time.Second)%2 == 0 {
					c = tc.down
				}
				if d := decide(at, c); d.State != tc.worst {
					t.Fatalf("t+%s while flapping: %s/%s, want %s", at, d.State, d.Reason, tc.worst)
				}
			}
			stable := 2 * time.Minute
			for at := stable + time.Second; at < stable+30*time.Second; at += time.Second {
				if d := decide(at, healthy(4, 4)); d.State != tc.worst || d.Reason != HoldDown {
					t.Fatalf("t+%s, stable for %s: %s/%s, want %s/hold_down", at, at-stable, d.State, d.Reason, tc.worst)
				}
			}
			if d := decide(stable+31*time.Second, healthy(4, 4)); d.State != Announced {
				t.Fatalf("31 s after the flapping stopped: %s/%s (%s)", d.State, d.Reason, d.Detail)
			}
			if changes > tc.maxFlaps {
				t.Errorf("the route changed %d times, want at most %d", changes, tc.maxFlaps)
			}
			if len(prev) != 2 || prev[0].Prefix != pfx4 || prev[1].Prefix != pfx6 || prev[1].State != prev[0].State {
				t.Errorf("both prefixes follow the frontend: %+v", prev)
			}
		})
	}
}

// TestSharedPrefixTakesTheWorst: a prefix two frontends announce (HTTP
// and HTTPS on one address) is announced only while both can serve.
func TestSharedPrefixTakesTheWorst(t *testing.T) {
	b := bgpConf()
	other := netip.MustParsePrefix("198.51.100.0/24")
	in := Input{Now: t0, BGP: b, Frontends: []Frontend{
		{Name: "http", Prefixes: []netip.Prefix{pfx4}, Listening: true, Capacity: healthy(6, 6)},
		{Name: "https", Prefixes: []netip.Prefix{pfx4, other}, Listening: true, Capacity: healthy(2, 6)},
	}}
	got := Decide(in)
	if len(got) != 2 {
		t.Fatalf("%d decisions", len(got))
	}
	shared := got[1]
	if got[0].Prefix != other || shared.Prefix != pfx4 {
		t.Fatalf("order: %v, %v", got[0].Prefix, got[1].Prefix)
	}
	if shared.State != Degraded || !strings.HasPrefix(shared.Detail, "https: ") || strings.Join(shared.Frontends, ",") != "http,https" {
		t.Errorf("shared prefix %+v", shared)
	}
	if shared.HealthyPercent < 33 || shared.HealthyPercent > 34 {
		t.Errorf("healthy percent %v, want the lower 33.3", shared.HealthyPercent)
	}
}

// TestRemovedPrefixIsDropped: a prefix no frontend lists any more has no
// decision (the shell withdraws it), and one added later starts afresh.
func TestRemovedPrefixIsDropped(t *testing.T) {
	b := bgpConf()
	f := Frontend{Name: "edge", Prefixes: []netip.Prefix{pfx4, pfx6}, Listening: true, Capacity: healthy(1, 1)}
	prev := Decide(Input{Now: t0, BGP: b, Frontends: []Frontend{f}})
	f.Prefixes = []netip.Prefix{pfx6}
	got := Decide(Input{Now: t0.Add(time.Second), BGP: b, Frontends: []Frontend{f}, Prev: prev})
	if len(got) != 1 || got[0].Prefix != pfx6 || got[0].Since != t0 {
		t.Errorf("after removal: %+v", got)
	}
}

func TestStateText(t *testing.T) {
	for _, s := range []State{Withdrawn, Degraded, Announced} {
		b, _ := s.MarshalText()
		var back State
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("%s: round trip %v %v", s, back, err)
		}
	}
	var s State
	if s.UnmarshalText([]byte("UP")) == nil {
		t.Error("UP accepted")
	}
	if len(Reasons()) != 10 {
		t.Errorf("reasons %v", Reasons())
	}
}
