package control

import (
	"sort"
	"time"
)

// Evaluate applies auto-capacity drain to every service whose policy
// enables it, and reports whether any drain state changed.
//
// The rules (Google Cloud's documented behaviour; see docs/semantics.md):
//   - a backend with fewer than 25% of its configured members healthy is a
//     drain candidate, unless it has zero capacity (capacityScaler 0 or no
//     members);
//   - a drained backend is undrained once 35% or more of its members have
//     been healthy continuously for Plan.UndrainHold (60 s by default);
//   - at most 50% of the service's backends (the denominator counts every
//     backend, zero-capacity ones included) are drained at once. When the
//     candidates exceed the limit, the least healthy are drained first
//     (ties by backend order) and the rest are reported as Blocked.
//
// On a drain follower (SetDrainFollower) Evaluate decides nothing: it only
// moves the time ramp shares are read at and reports whether an undrain
// ramp stepped.
func (s *State) Evaluate(now time.Time) bool {
	changed := false
	prev := s.evaluated
	s.evaluated = now
	if s.follower {
		return s.rampMoved(prev, now)
	}
	for _, svc := range s.plan.Services {
		ds := s.drain[svc.ID]
		if !svc.AutoDrain {
			for i := range ds {
				if ds[i].Drained || ds[i].Blocked {
					ds[i] = DrainState{}
					changed = true
				}
			}
			continue
		}
		drained := 0
		type cand struct {
			i     int
			share float64
		}
		var cands []cand
		for _, b := range svc.Backends {
			d := &ds[b.Index]
			share := s.HealthyShare(b)
			if d.Drained {
				if share >= UndrainAtOrAbove {
					if d.RecoveringSince.IsZero() {
						d.RecoveringSince = now
					}
					if !now.Before(d.RecoveringSince.Add(s.plan.UndrainHold)) {
						*d = DrainState{Since: now, UndrainedAt: now}
						changed = true
						continue
					}
				} else {
					d.RecoveringSince = time.Time{}
				}
				drained++
				continue
			}
			if !d.UndrainedAt.IsZero() {
				// An undrain ramp stepping up changes the split.
				before, _ := rampStep(prev.Sub(d.UndrainedAt), s.plan.UndrainRamp)
				after, _ := rampStep(now.Sub(d.UndrainedAt), s.plan.UndrainRamp)
				changed = changed || before != after
			}
			if share < DrainBelow && !b.ZeroCapacity() {
				cands = append(cands, cand{b.Index, share})
			} else if d.Blocked {
				d.Blocked = false
				changed = true
			}
		}
		limit := int(float64(len(svc.Backends)) * MaxDrainedShare)
		// Over the limit (a reload removed backends, so drains carried
		// over exceed 50%): the healthiest drained backends return first.
		for drained > limit {
			best := -1
			for _, b := range svc.Backends {
				if ds[b.Index].Drained && (best < 0 || s.HealthyShare(b) > s.HealthyShare(svc.Backends[best])) {
					best = b.Index
				}
			}
			ds[best] = DrainState{Since: now, UndrainedAt: now}
			drained--
			changed = true
		}
		sort.SliceStable(cands, func(a, b int) bool { return cands[a].share < cands[b].share })
		for _, c := range cands {
			d := &ds[c.i]
			if drained < limit {
				*d = DrainState{Drained: true, Since: now}
				drained++
				changed = true
				continue
			}
			if !d.Blocked {
				d.Blocked = true
				changed = true
			}
		}
	}
	return changed
}

// rampMoved reports whether an undrain ramp's step differs between the
// times prev and now.
func (s *State) rampMoved(prev, now time.Time) bool {
	for _, ds := range s.drain {
		for _, d := range ds {
			if d.Drained || d.UndrainedAt.IsZero() {
				continue
			}
			before, _ := rampStep(prev.Sub(d.UndrainedAt), s.plan.UndrainRamp)
			after, _ := rampStep(now.Sub(d.UndrainedAt), s.plan.UndrainRamp)
			if before != after {
				return true
			}
		}
	}
	return false
}
