// Package control holds Spillway's mutable control state: endpoint health,
// auto-capacity drain with its hysteresis, and the offered demand that RATE
// capacity is measured against. It is pure: every method takes `now`, and
// nothing here reads a clock, sleeps or does I/O. One goroutine owns a
// State (serve's event loop, or the simulator); the data plane reads the
// immutable engine.View built from it.
package control

import (
	"math"
	"time"

	"github.com/spillwaylb/spillway/internal/health"
	"github.com/spillwaylb/spillway/internal/plan"
)

// The auto-capacity-drain constants from Google Cloud's documentation.
const (
	DrainBelow       = 0.25 // a group with fewer healthy members is a drain candidate
	UndrainAtOrAbove = 0.35 // ... and is undrained after this share holds for Plan.UndrainHold
	MaxDrainedShare  = 0.50 // at most this share of a service's groups is drained
)

// DrainState is one backend's (service, group) auto-capacity-drain state.
type DrainState struct {
	// Drained: effective capacity is zero, as if capacityScaler were 0.
	Drained bool
	// Blocked: the backend is a drain candidate but the 50% safety limit
	// keeps it in service.
	Blocked bool
	// Since is when Drained last changed.
	Since time.Time
	// RecoveringSince is when a drained backend's healthy share last rose
	// to 35% or more (zero when it is below).
	RecoveringSince time.Time
	// UndrainedAt is when the backend was last undrained (zero if never);
	// with spillway.undrainRampSec it ramps back from then.
	UndrainedAt time.Time
}

// rampStep returns the share of its capacity a backend undrained `elapsed`
// ago may use with an undrain ramp of `period` (seed 004's gradual
// failback: 10%, 25%, 50%, then 100%, evenly spaced), and the time left
// until the next step (0 once at 100%).
func rampStep(elapsed, period time.Duration) (float64, time.Duration) {
	steps := [...]float64{0.10, 0.25, 0.50}
	if period <= 0 || elapsed < 0 {
		return 1, 0
	}
	k := int(elapsed * time.Duration(len(steps)) / period)
	if k >= len(steps) {
		return 1, 0
	}
	return steps[k], period*time.Duration(k+1)/time.Duration(len(steps)) - elapsed
}

// State is the control state for one Plan.
type State struct {
	plan    *plan.Plan
	health  []health.State
	ejected []bool
	drain   [][]DrainState // [service][backend]
	demand  [][]float64    // [service][client region] offered rps; the last column is "no region"
	// measured is a UTILIZATION backend's capacity (rps) estimated from
	// the utilisation its endpoints report; 0: none (the configured
	// capacity).
	measured [][]float64 // [service][backend]
	version  uint64
	// evaluated is the time of the last Evaluate: the "now" that ramp
	// shares are read at.
	evaluated time.Time
	// follower: drain states are set by ApplyDrain only (a fleet
	// instance that is not the elected leader); Evaluate decides nothing.
	follower bool
}

// New returns a State for p in which every endpoint is unknown (healthy).
func New(p *plan.Plan) *State {
	s := &State{
		plan:     p,
		health:   make([]health.State, len(p.Endpoints)),
		ejected:  make([]bool, len(p.Endpoints)),
		drain:    make([][]DrainState, len(p.Services)),
		demand:   make([][]float64, len(p.Services)),
		measured: make([][]float64, len(p.Services)),
	}
	for i, svc := range p.Services {
		s.drain[i] = make([]DrainState, len(svc.Backends))
		s.demand[i] = make([]float64, len(p.Regions)+1)
		s.measured[i] = make([]float64, len(svc.Backends))
	}
	return s
}

// Rebase returns a State for a new plan that keeps what is known about
// endpoints (by address, group and health check) and drain states (by
// service and group name), so a reload does not forget health. Outlier
// ejections are not carried: outlier detection starts afresh with the new
// plan's detectors.
func (s *State) Rebase(p *plan.Plan) *State {
	n := New(p)
	old := map[string]int{}
	for _, e := range s.plan.Endpoints {
		old[endpointKey(e)] = e.ID
	}
	for _, e := range p.Endpoints {
		if id, ok := old[endpointKey(e)]; ok {
			n.health[e.ID] = s.health[id]
		}
	}
	for _, svc := range p.Services {
		os := s.plan.ServiceByName[svc.Name]
		if os == nil {
			continue
		}
		for _, b := range svc.Backends {
			for _, ob := range os.Backends {
				if ob.Group.Name == b.Group.Name {
					n.drain[svc.ID][b.Index] = s.drain[os.ID][ob.Index]
					if b.Mode == ob.Mode {
						n.measured[svc.ID][b.Index] = s.measured[os.ID][ob.Index]
					}
				}
			}
		}
	}
	n.follower = s.follower
	n.version = s.version + 1
	return n
}

func endpointKey(e *plan.Endpoint) string {
	k := e.Addr + "|" + e.Group.Name
	if e.HealthCheck != nil {
		k += "|" + e.HealthCheck.Name
	}
	return k
}

// Plan returns the plan this state is for.
func (s *State) Plan() *plan.Plan { return s.plan }

// Version increases whenever something a View depends on changes.
func (s *State) Version() uint64 { return s.version }

// Healthy reports whether endpoint id may receive traffic (healthy by its
// health check and not ejected by outlier detection).
func (s *State) Healthy(id int) bool { return s.health[id].Healthy() && !s.ejected[id] }

// Health returns endpoint id's health state.
func (s *State) Health(id int) health.State { return s.health[id] }

// Ejected reports whether outlier detection has ejected endpoint id.
func (s *State) Ejected(id int) bool { return s.ejected[id] }

// Ramp returns the share of its capacity a service's backend may use: 1,
// except while it ramps back after an undrain (spillway.undrainRampSec).
func (s *State) Ramp(service, backend int) float64 {
	d := s.drain[service][backend]
	if d.Drained || d.UndrainedAt.IsZero() {
		return 1
	}
	r, _ := rampStep(s.evaluated.Sub(d.UndrainedAt), s.plan.UndrainRamp)
	return r
}

// Drain returns the drain state of a service's backend.
func (s *State) Drain(service, backend int) DrainState { return s.drain[service][backend] }

// Demand returns the offered rate (rps) from a client region (-1: clients
// with no region) to a service.
func (s *State) Demand(service, region int) float64 { return s.demand[service][s.col(region)] }

func (s *State) col(region int) int {
	if region < 0 {
		return len(s.plan.Regions)
	}
	return region
}

// ObserveProbe steps endpoint id's health with one probe result and
// re-evaluates drain. It reports whether anything changed.
func (s *State) ObserveProbe(id int, ok bool, detail string, now time.Time) bool {
	e := s.plan.Endpoints[id]
	th := health.Thresholds{Healthy: 1, Unhealthy: 1}
	if hc := e.HealthCheck; hc != nil {
		th = health.Thresholds{Healthy: hc.HealthyThreshold, Unhealthy: hc.UnhealthyThreshold}
	}
	changed := s.health[id].Observe(ok, detail, now, th)
	if s.Evaluate(now) || changed {
		s.version++
		return true
	}
	return false
}

// ObserveVerdict sets endpoint id's health to a verdict whose thresholds
// were already applied elsewhere (the fleet's shared view: the instances
// probing the endpoint apply them before they publish), and re-evaluates
// drain. It reports whether anything changed.
func (s *State) ObserveVerdict(id int, healthy bool, detail string, now time.Time) bool {
	changed := s.health[id].Observe(healthy, detail, now, health.Thresholds{Healthy: 1, Unhealthy: 1})
	if s.Evaluate(now) || changed {
		s.version++
		return true
	}
	return false
}

// SetEjected marks endpoint id ejected (or returned) by outlier detection.
func (s *State) SetEjected(id int, ejected bool, now time.Time) bool {
	if s.ejected[id] == ejected {
		return false
	}
	s.ejected[id] = ejected
	s.Evaluate(now)
	s.version++
	return true
}

// SetDemand records the offered rate from a client region (-1: none) to a
// service when it differs by more than 5% from the recorded one. It
// reports whether the value moved enough (5%, or from/to zero) to matter.
func (s *State) SetDemand(service, region int, rps float64, now time.Time) bool {
	region = s.col(region)
	// The stored value is the one views were last built with; a new rate
	// replaces it only when it moved enough, so a slow drift is compared
	// with that value and is not lost window by window.
	old := s.demand[service][region]
	if old == rps || (old != 0 && rps != 0 && rps <= old*1.05 && rps >= old*0.95) {
		return false
	}
	s.demand[service][region] = rps
	s.version++
	return true
}

// SetMeasuredCapacity sets the capacity, in requests per second, that a
// backend with balancingMode UTILIZATION is measured to have: the rate it
// served times its target utilisation over the utilisation its endpoints
// reported (docs/global.md, "Capacity between the layers"); 0 (or less,
// or not finite) forgets it. Like SetDemand it ignores moves within 5%
// of the value views were last built with, and reports whether it
// changed anything. Backends of other modes ignore it.
func (s *State) SetMeasuredCapacity(service, backend int, rps float64, now time.Time) bool {
	if s.plan.Services[service].Backends[backend].Mode != "UTILIZATION" {
		return false
	}
	if !(rps > 0) || math.IsInf(rps, 0) {
		rps = 0
	}
	old := s.measured[service][backend]
	if old == rps || (old != 0 && rps != 0 && rps <= old*1.05 && rps >= old*0.95) {
		return false
	}
	s.measured[service][backend] = rps
	s.version++
	return true
}

// Capacity returns a backend's RATE capacity in requests per second:
// the configured one (+Inf when none), or the measured one
// (SetMeasuredCapacity) when that is lower.
func (s *State) Capacity(service, backend int) float64 {
	c := s.plan.Services[service].Backends[backend].Capacity
	if m := s.measured[service][backend]; m > 0 && m < c {
		return m
	}
	return c
}

// Measured returns a backend's measured capacity (rps), 0 when none.
func (s *State) Measured(service, backend int) float64 { return s.measured[service][backend] }

// Tick re-evaluates time-based rules (undrain holds). It reports whether
// anything changed.
func (s *State) Tick(now time.Time) bool {
	if s.Evaluate(now) {
		s.version++
		return true
	}
	return false
}

// NextDeadline returns the earliest time at which Tick could change
// something (an undrain hold expiring, or the next step of an undrain
// ramp), or the zero time if none is pending. The simulator jumps its virtual clock straight to it.
func (s *State) NextDeadline() time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, ds := range s.drain {
		for _, d := range ds {
			switch {
			case d.Drained && !d.RecoveringSince.IsZero():
				consider(d.RecoveringSince.Add(s.plan.UndrainHold))
			case !d.Drained && !d.UndrainedAt.IsZero():
				if _, left := rampStep(s.evaluated.Sub(d.UndrainedAt), s.plan.UndrainRamp); left > 0 {
					consider(s.evaluated.Add(left))
				}
			}
		}
	}
	return next
}

// HealthyShare returns the share of a backend's configured members that
// are healthy (0 for an empty backend).
func (s *State) HealthyShare(b *plan.Backend) float64 {
	if len(b.Endpoints) == 0 {
		return 0
	}
	h := 0
	for _, e := range b.Endpoints {
		if s.Healthy(e.ID) {
			h++
		}
	}
	return float64(h) / float64(len(b.Endpoints))
}
