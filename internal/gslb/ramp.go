package gslb

import "time"

// DefaultMaxErrorRate is the error rate above which an observation during
// a ramp rolls the ramp back.
const DefaultMaxErrorRate = 0.25

// Ramp is the gradual failback of one recovered member: its weight
// returns in steps (by default 10%, 25%, 50%, 100%) spaced evenly over
// Period, the first step at once and the last at Period. A failed probe
// or an error rate above MaxErrorRate during the ramp rolls the member
// back to 0 (Observe), and it must recover again to start a new ramp.
//
// Ramp is pure: time is an argument, so tests drive it with a virtual
// clock. The zero value is a member at full weight that is not ramping.
// A Ramp is a value; copies are independent (Steps is shared and must
// not be modified).
type Ramp struct {
	// Period is how long the ramp takes; 0 returns a member at once.
	Period time.Duration
	// Steps are increasing percentages ending in 100; empty means 100.
	Steps []int
	// MaxErrorRate is the error rate (0..1) above which Observe rolls
	// back; 0 means DefaultMaxErrorRate.
	MaxErrorRate float64

	start      time.Time // when the ramp began (zero: not ramping)
	rolledBack bool
}

// NewRamp returns a ramp template: a member at full weight that will ramp
// over period through steps when Start is called.
func NewRamp(period time.Duration, steps []int) Ramp {
	return Ramp{Period: period, Steps: steps}
}

// Start begins a ramp at now (the member has just recovered).
func (r *Ramp) Start(now time.Time) {
	r.start, r.rolledBack = now, false
	if r.Period <= 0 || len(r.Steps) <= 1 {
		r.start = time.Time{}
	}
}

// Weight returns the fraction (0..1) of its weight the member gets at now.
func (r Ramp) Weight(now time.Time) float64 {
	if r.rolledBack {
		return 0
	}
	if r.start.IsZero() || len(r.Steps) == 0 {
		return 1
	}
	return float64(r.Steps[r.step(now)]) / 100
}

// step returns the index of the step in force at now.
func (r Ramp) step(now time.Time) int {
	n := len(r.Steps)
	if n <= 1 {
		return n - 1
	}
	el := now.Sub(r.start)
	if el < 0 {
		return 0
	}
	// Step i begins at i·Period/(n-1): the first at once, the last at Period.
	i := int(el * time.Duration(n-1) / r.Period)
	return min(i, n-1)
}

// Ramping reports whether the member is part-way back at now: ramping up,
// or rolled back and waiting to recover.
func (r Ramp) Ramping(now time.Time) bool {
	if r.rolledBack {
		return true
	}
	return !r.start.IsZero() && len(r.Steps) > 0 && r.Steps[r.step(now)] < 100
}

// NextChange returns when Weight next changes after now (zero if it does
// not change by itself).
func (r Ramp) NextChange(now time.Time) time.Time {
	if !r.Ramping(now) || r.rolledBack {
		return time.Time{}
	}
	n := len(r.Steps)
	next := r.step(now) + 1
	return r.start.Add(r.Period * time.Duration(next) / time.Duration(n-1))
}

// Observe feeds an error rate (0..1) measured at now: a failed probe is
// 1, a passing one 0, and a passive measurement anything between. During
// a ramp a rate above MaxErrorRate rolls the member back to weight 0 and
// Observe reports true. Outside a ramp Observe does nothing: taking a
// member down is the health state machine's job.
func (r *Ramp) Observe(errorRate float64, now time.Time) bool {
	if r.rolledBack || !r.Ramping(now) {
		return false
	}
	limit := r.MaxErrorRate
	if limit == 0 {
		limit = DefaultMaxErrorRate
	}
	if errorRate <= limit {
		return false
	}
	r.rolledBack = true
	return true
}

// End returns when the ramp reaches full weight (zero when not ramping).
func (r Ramp) End() time.Time {
	if r.start.IsZero() || r.rolledBack {
		return time.Time{}
	}
	return r.start.Add(r.Period)
}

// RolledBack reports whether the ramp was rolled back by Observe.
func (r Ramp) RolledBack() bool { return r.rolledBack }

// Stop ends any ramp: the member is at full weight (for members that go
// down, the health state excludes them anyway).
func (r *Ramp) Stop() { r.start, r.rolledBack = time.Time{}, false }
