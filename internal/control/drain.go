package control

import (
	"sort"
	"time"

	"github.com/spillwaylb/spillway/internal/plan"
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
	prev := s.evaluated
	s.evaluated = now
	if s.follower {
		return s.rampMoved(prev, now)
	}
	changed := false
	for _, svc := range s.plan.Services {
		if s.evaluateService(svc, prev, now) {
			changed = true
		}
	}
	return changed
}

// drainCandidate is a backend (by index) below the drain threshold, with
// its healthy share.
type drainCandidate struct {
	i     int
	share float64
}

// evaluateService applies Evaluate's rules to one service, in three
// stages: scan the backends (undrain the recovered, collect the drain
// candidates), enforce the 50% limit on the drains carried over, then
// drain the candidates the limit allows. It reports whether any drain
// state changed; prev is the time of the previous Evaluate.
func (s *State) evaluateService(svc *plan.Service, prev, now time.Time) bool {
	ds := s.drain[svc.ID]
	if !svc.AutoDrain {
		return clearDrains(ds)
	}
	drained, cands, changed := s.scanBackends(svc, ds, prev, now)
	limit := int(float64(len(svc.Backends)) * MaxDrainedShare)
	// Over the limit (a reload removed backends, so drains carried
	// over exceed 50%): the healthiest drained backends return first.
	for drained > limit {
		s.undrainHealthiest(svc, ds, now)
		drained--
		changed = true
	}
	if drainCandidates(ds, cands, drained, limit, now) {
		changed = true
	}
	return changed
}

// clearDrains resets every drained or blocked state of a service whose
// policy does not enable auto-capacity drain; it reports whether any was.
func clearDrains(ds []DrainState) bool {
	changed := false
	for i := range ds {
		if ds[i].Drained || ds[i].Blocked {
			ds[i] = DrainState{}
			changed = true
		}
	}
	return changed
}

// scanBackends walks svc's backends once: a drained backend that has held
// UndrainAtOrAbove for the undrain hold is undrained, the rest are
// counted; a backend below DrainBelow with capacity is a candidate, and
// one that is not loses Blocked. It returns the count still drained, the
// candidates (in backend order) and whether any state changed (an undrain
// ramp stepping up counts: it changes the split).
func (s *State) scanBackends(svc *plan.Service, ds []DrainState, prev, now time.Time) (drained int, cands []drainCandidate, changed bool) {
	for _, b := range svc.Backends {
		d := &ds[b.Index]
		share := s.HealthyShare(b)
		if d.Drained {
			if s.recover(d, share, now) {
				changed = true
				continue
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
			cands = append(cands, drainCandidate{b.Index, share})
		} else if d.Blocked {
			d.Blocked = false
			changed = true
		}
	}
	return drained, cands, changed
}

// recover steps a drained backend's recovery with its healthy share: the
// hold starts when the share reaches UndrainAtOrAbove and resets when it
// falls below; once the share has held for Plan.UndrainHold the backend
// is undrained, and recover reports true.
func (s *State) recover(d *DrainState, share float64, now time.Time) bool {
	if share < UndrainAtOrAbove {
		d.RecoveringSince = time.Time{}
		return false
	}
	if d.RecoveringSince.IsZero() {
		d.RecoveringSince = now
	}
	if now.Before(d.RecoveringSince.Add(s.plan.UndrainHold)) {
		return false
	}
	*d = DrainState{Since: now, UndrainedAt: now}
	return true
}

// undrainHealthiest undrains the drained backend of svc with the highest
// healthy share (the first in backend order on a tie).
func (s *State) undrainHealthiest(svc *plan.Service, ds []DrainState, now time.Time) {
	best := -1
	for _, b := range svc.Backends {
		if ds[b.Index].Drained && (best < 0 || s.HealthyShare(b) > s.HealthyShare(svc.Backends[best])) {
			best = b.Index
		}
	}
	ds[best] = DrainState{Since: now, UndrainedAt: now}
}

// drainCandidates drains the candidates, least healthy first (ties in
// backend order), while fewer than limit backends are drained, and marks
// the rest Blocked. It reports whether any state changed.
func drainCandidates(ds []DrainState, cands []drainCandidate, drained, limit int, now time.Time) bool {
	changed := false
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
