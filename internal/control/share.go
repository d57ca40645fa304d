package control

import (
	"time"
)

// DrainEntry is one backend's drain state as a fleet shares it: named by
// service and group rather than by index, so it means the same thing on
// every instance (and across a reload that reorders backends).
type DrainEntry struct {
	Service         string    `json:"service"`
	Backend         string    `json:"backend"` // the group's name
	Drained         bool      `json:"drained,omitempty"`
	Blocked         bool      `json:"blocked,omitempty"`
	Since           time.Time `json:"since,omitzero"`
	RecoveringSince time.Time `json:"recoveringSince,omitzero"`
	UndrainedAt     time.Time `json:"undrainedAt,omitzero"`
}

func (e DrainEntry) state() DrainState {
	return DrainState{Drained: e.Drained, Blocked: e.Blocked, Since: e.Since, RecoveringSince: e.RecoveringSince, UndrainedAt: e.UndrainedAt}
}

func (d DrainState) zero() bool {
	return !d.Drained && !d.Blocked && d.Since.IsZero() && d.RecoveringSince.IsZero() && d.UndrainedAt.IsZero()
}

func (d DrainState) equal(o DrainState) bool {
	return d.Drained == o.Drained && d.Blocked == o.Blocked && d.Since.Equal(o.Since) &&
		d.RecoveringSince.Equal(o.RecoveringSince) && d.UndrainedAt.Equal(o.UndrainedAt)
}

// DrainSnapshot returns the drain state of every backend whose state is
// not the zero one (never drained, not blocked), in plan order (services,
// then their backends). Times keep no monotonic reading, so a snapshot
// compares equal to itself after a round trip through JSON.
func (s *State) DrainSnapshot() []DrainEntry {
	var out []DrainEntry
	for _, svc := range s.plan.Services {
		for _, b := range svc.Backends {
			d := s.drain[svc.ID][b.Index]
			if d.zero() {
				continue
			}
			out = append(out, DrainEntry{
				Service: svc.Name, Backend: b.Group.Name,
				Drained: d.Drained, Blocked: d.Blocked,
				Since: d.Since.Round(0), RecoveringSince: d.RecoveringSince.Round(0), UndrainedAt: d.UndrainedAt.Round(0),
			})
		}
	}
	return out
}

// ApplyDrain sets every backend's drain state from a snapshot (a backend
// the snapshot does not name gets the zero state; entries naming a service
// or group this plan does not have are ignored) without deciding anything:
// hold timers and ramps continue from the snapshot's times. now becomes
// the time ramp shares are read at, if it is later than the last one. It
// reports whether anything a View depends on changed.
func (s *State) ApplyDrain(snap []DrainEntry, now time.Time) bool {
	type key struct{ svc, group string }
	byName := make(map[key]DrainState, len(snap))
	for _, e := range snap {
		byName[key{e.Service, e.Backend}] = e.state()
	}
	changed := false
	for _, svc := range s.plan.Services {
		for _, b := range svc.Backends {
			d := byName[key{svc.Name, b.Group.Name}]
			if !s.drain[svc.ID][b.Index].equal(d) {
				s.drain[svc.ID][b.Index] = d
				changed = true
			}
		}
	}
	if now.After(s.evaluated) {
		prev := s.evaluated
		s.evaluated = now
		changed = s.rampMoved(prev, now) || changed
	}
	if changed {
		s.version++
	}
	return changed
}

// SetDrainFollower makes the state a drain follower (true: drain states
// change only through ApplyDrain; Evaluate decides nothing) or a decider
// again (false, the default: every instance decides, as standalone). A
// fleet's elected leader decides; the other instances follow. Rebase
// keeps the setting.
func (s *State) SetDrainFollower(follower bool) { s.follower = follower }

// DrainFollower reports whether the state is a drain follower.
func (s *State) DrainFollower() bool { return s.follower }
