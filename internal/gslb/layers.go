package gslb

import (
	"slices"
	"time"

	"github.com/spillwaylb/spillway/internal/health"
)

// Layer is how deep one of a member's health checks looks (seed 004:
// shallow every 5 s, deep every 15 s, synthetic every 60 s).
type Layer uint8

const (
	// Shallow checks (TCP connect, HTTP 200) decide whether a member is
	// up: it is down while any of them is down.
	Shallow Layer = iota
	// Deep checks (e.g. a cache fetch with origin validation) halve the
	// member's weight while any of them is failing.
	Deep
	// Synthetic checks (a full transaction) zero the member's weight
	// while any of them is failing: the member is kept, but gets traffic
	// only when no member with weight is left.
	Synthetic
)

// String returns the configuration spelling of l.
func (l Layer) String() string {
	switch l {
	case Deep:
		return "DEEP"
	case Synthetic:
		return "SYNTHETIC"
	}
	return "SHALLOW"
}

// LayerCheck is one of a member's health checks: its layer and its
// hysteresis.
type LayerCheck struct {
	Layer      Layer
	Thresholds health.Thresholds
	// Group, when not 0, makes the check a child of a calculated check
	// (Route 53's): the member's checks of the same Group count as one
	// check of their Layer, up while at least MinHealthy of them are up
	// (each child with its own hysteresis). Children of a group share
	// Layer and MinHealthy.
	Group      int
	MinHealthy int
}

// Layered is the health of one member from its layered checks: whether
// it is up (Healthy) and the fraction of its weight it keeps (Factor).
// It is pure: time is an argument, so tests drive it with a virtual
// clock. A member without checks is healthy at full weight; so is each
// check until its first result (which then decides at once, like
// health.State).
type Layered struct {
	checks []LayerCheck // shared between copies; never modified
	states []health.State
}

// NewLayered returns the health of a member with checks, all unknown.
func NewLayered(checks []LayerCheck) Layered {
	return Layered{checks: checks, states: make([]health.State, len(checks))}
}

// Observe feeds the result of check i at now and reports whether
// Healthy or Factor changed.
func (l *Layered) Observe(i int, ok bool, detail string, now time.Time) bool {
	h, f := l.Healthy(), l.Factor()
	l.states[i].Observe(ok, detail, now, l.checks[i].Thresholds)
	return l.Healthy() != h || l.Factor() != f
}

// Known reports whether check i has had a result.
func (l *Layered) Known(i int) bool { return l.states[i].Known() }

// Healthy reports whether every shallow check (plain or calculated) is
// up.
func (l *Layered) Healthy() bool {
	for i := range l.states {
		if l.checks[i].Layer == Shallow && !l.up(i) {
			return false
		}
	}
	return true
}

// up reports whether check i counts as passing: its own state, or for a
// child of a calculated check, whether at least MinHealthy children of
// its group pass.
func (l *Layered) up(i int) bool {
	c := &l.checks[i]
	if c.Group == 0 {
		return l.states[i].Healthy()
	}
	n := 0
	for j := range l.checks {
		if l.checks[j].Group == c.Group && l.states[j].Healthy() {
			n++
		}
	}
	return n >= c.MinHealthy
}

// HasShallow reports whether any check decides up or down.
func (l *Layered) HasShallow() bool {
	for _, c := range l.checks {
		if c.Layer == Shallow {
			return true
		}
	}
	return false
}

// Factor returns the fraction of its weight the member keeps: 0 while a
// synthetic check fails, else 0.5 while a deep check fails, else 1.
func (l *Layered) Factor() float64 {
	f := 1.0
	for i := range l.states {
		if l.up(i) {
			continue
		}
		switch l.checks[i].Layer {
		case Synthetic:
			return 0
		case Deep:
			f = 0.5
		}
	}
	return f
}

// Layer returns the layer of check i.
func (l *Layered) Layer(i int) Layer { return l.checks[i].Layer }

// Fail takes the member down at now: every shallow check restarts from
// a failure, so the member needs its healthy threshold of successes to
// come back (a failback rollback).
func (l *Layered) Fail(detail string, now time.Time) {
	for i := range l.states {
		if l.checks[i].Layer == Shallow {
			l.states[i] = health.State{}
			l.states[i].Observe(false, detail, now, l.checks[i].Thresholds)
		}
	}
}

// clone returns a copy of l whose check states are its own.
func (l Layered) clone() Layered {
	return Layered{checks: l.checks, states: slices.Clone(l.states)}
}
