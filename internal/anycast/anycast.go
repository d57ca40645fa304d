// Package anycast decides, for each anycast prefix of the frontends
// (frontends[].anycastPrefixes), whether this instance announces it over
// BGP: ANNOUNCED, DEGRADED (announced with a longer AS path or a MED, to
// attract less traffic without disappearing) or WITHDRAWN, each with a
// reason. The inputs are the config's spillway.bgp, what each frontend
// can serve with (its listener, and the healthy share of the capacity
// its URL map reaches, measured from the control state), the fleet's
// staleness, shutdown, and the previous decision, which carries the
// hysteresis: a prefix gets worse at once and better only after it has
// been better for holdDownSec, so a flapping backend does not flap a
// route.
//
// The package is pure: time comes in as an argument. The shell that
// speaks BGP (package bgp, wired in by serve) applies the decisions.
package anycast

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// State is how a prefix is announced.
type State uint8

// The states, worst first (a higher State is better).
const (
	Withdrawn State = iota
	Degraded
	Announced
)

// String returns the state's name as get-health and /metrics show it.
func (s State) String() string {
	switch s {
	case Announced:
		return "ANNOUNCED"
	case Degraded:
		return "DEGRADED"
	}
	return "WITHDRAWN"
}

// MarshalText writes the state's name (JSON).
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name (JSON).
func (s *State) UnmarshalText(b []byte) error {
	for _, c := range []State{Withdrawn, Degraded, Announced} {
		if c.String() == string(b) {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("anycast: unknown state %q", b)
}

// Reason says why a prefix is in its state. The set is fixed (it is a
// metric label); Prefix.Detail says the rest in words.
type Reason string

// The reasons.
const (
	// Serving: ANNOUNCED, the frontends can serve.
	Serving Reason = "serving"
	// LowCapacity: DEGRADED, the healthy share of reachable capacity is
	// below spillway.bgp.degraded.belowHealthyCapacityPercent.
	LowCapacity Reason = "low_capacity"
	// HoldDown: the prefix could be better but has not been for
	// holdDownSec yet; it stays as it was.
	HoldDown Reason = "hold_down"
	// BelowMinimum: WITHDRAWN, the healthy share is below
	// minHealthyCapacityPercent.
	BelowMinimum Reason = "below_minimum"
	// NoHealthyBackend: WITHDRAWN, no endpoint the frontend reaches is
	// healthy.
	NoHealthyBackend Reason = "no_healthy_backend"
	// AwaitingProbes: WITHDRAWN, no endpoint is healthy yet and some
	// have not been probed.
	AwaitingProbes Reason = "awaiting_probes"
	// NoCapacity: WITHDRAWN, every backend the frontend reaches is
	// drained or has capacity 0, or its URL map reaches no backend
	// service: the site is drained.
	NoCapacity Reason = "no_capacity"
	// NotListening: WITHDRAWN, the frontend's listener is not bound.
	NotListening Reason = "not_listening"
	// FleetStale: WITHDRAWN, the instance lost etcd longer than
	// spillway.bgp.maxStaleSec.
	FleetStale Reason = "fleet_stale"
	// ShuttingDown: WITHDRAWN, spillway serve is stopping (lame duck).
	ShuttingDown Reason = "shutting_down"
)

// Reasons lists every reason.
func Reasons() []Reason {
	return []Reason{Serving, LowCapacity, HoldDown, BelowMinimum, NoHealthyBackend, AwaitingProbes, NoCapacity, NotListening, FleetStale, ShuttingDown}
}

// Frontend is what one frontend can serve with now.
type Frontend struct {
	Name     string
	Prefixes []netip.Prefix
	// Listening is whether its listener is bound.
	Listening bool
	Capacity  Capacity
}

// Input is everything a decision depends on.
type Input struct {
	Now time.Time
	// BGP is spillway.bgp (thresholds, hold-down, max stale).
	BGP       *config.BGP
	Frontends []Frontend
	// Stale is set while a fleet instance has lost etcd, since
	// StaleSince.
	Stale      bool
	StaleSince time.Time
	// ShuttingDown withdraws everything.
	ShuttingDown bool
	// Prev is the previous decision (nil at first).
	Prev []Prefix
}

// Prefix is the decision for one prefix.
type Prefix struct {
	Prefix netip.Prefix `json:"prefix"`
	// Frontends announce the prefix; it takes the worst of their states.
	Frontends []string `json:"frontends"`
	State     State    `json:"state"`
	Reason    Reason   `json:"reason"`
	Detail    string   `json:"detail"`
	// HealthyPercent is the healthy share of the reachable capacity of
	// the frontends (the lowest of them), 0-100.
	HealthyPercent float64 `json:"healthyPercent"`
	// Since is when the prefix took State.
	Since time.Time `json:"since"`
	// ASPathPrepend and MED are what a DEGRADED prefix carries.
	ASPathPrepend int    `json:"asPathPrepend,omitempty"`
	MED           *int64 `json:"med,omitempty"`
	// PendingSince is when a better state became possible (HoldDown).
	PendingSince time.Time `json:"pendingSince,omitzero"`
	// WasAnnounced: the prefix has been announced since it appeared; a
	// first announcement needs no hold-down.
	WasAnnounced bool `json:"-"`
}

// target is what the inputs ask for now, before hysteresis.
type target struct {
	state   State
	reason  Reason
	detail  string
	percent float64
}

// Decide returns the decision for every prefix of in.Frontends, sorted
// (IPv4 first, then by address and length).
func Decide(in Input) []Prefix {
	prev := map[netip.Prefix]*Prefix{}
	for i := range in.Prev {
		prev[in.Prev[i].Prefix] = &in.Prev[i]
	}
	targets := map[netip.Prefix]*target{}
	owners := map[netip.Prefix][]string{}
	for i := range in.Frontends {
		f := &in.Frontends[i]
		t := evaluate(&in, f)
		for _, p := range f.Prefixes {
			owners[p] = append(owners[p], f.Name)
			if cur, ok := targets[p]; !ok || worse(&t, cur) {
				tc := t
				targets[p] = &tc
			}
		}
	}
	out := make([]Prefix, 0, len(targets))
	for p, t := range targets {
		d := step(prev[p], t, &in)
		d.Prefix, d.Frontends = p, owners[p]
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Prefix) int {
		return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
	})
	return out
}

// worse reports whether a is worse than b (lower state, or at the same
// state a lower healthy share).
func worse(a, b *target) bool {
	return a.state < b.state || a.state == b.state && a.percent < b.percent
}

// evaluate is what one frontend asks for.
func evaluate(in *Input, f *Frontend) target {
	c := f.Capacity
	pct := c.Percent()
	wd := func(r Reason, format string, args ...any) target {
		return target{state: Withdrawn, reason: r, detail: f.Name + ": " + fmt.Sprintf(format, args...), percent: pct}
	}
	b := in.BGP
	switch {
	case in.ShuttingDown:
		return wd(ShuttingDown, "spillway serve is stopping: withdrawn first, still serving for drainSec (%s) before closing", b.Drain())
	case in.Stale && b.MaxStale() > 0 && in.Now.Sub(in.StaleSince) >= b.MaxStale():
		return wd(FleetStale, "etcd lost since %s, longer than maxStaleSec (%s)", in.StaleSince.UTC().Format(time.RFC3339), b.MaxStale())
	case !f.Listening:
		return wd(NotListening, "its listener is not bound")
	case c.Static:
		return target{state: Announced, reason: Serving, detail: f.Name + ": listening (no backends to measure)", percent: 100}
	case c.Services == 0:
		return wd(NoCapacity, "every backend its URL map reaches is drained or has capacity 0, or it reaches none")
	case c.Healthy == 0 && c.Unknown > 0:
		return wd(AwaitingProbes, "%d of %d endpoints not probed yet, none healthy", c.Unknown, c.Members)
	case c.Healthy == 0:
		return wd(NoHealthyBackend, "none of its %d endpoints is healthy", c.Members)
	case pct < b.MinHealthyPercent():
		return wd(BelowMinimum, "%s of its reachable capacity healthy (%s), below minHealthyCapacityPercent %s", fmtPct(pct), c.counts(), fmtPct(b.MinHealthyPercent()))
	case b.Degraded != nil && pct < b.Degraded.BelowHealthyCapacityPercent:
		return target{state: Degraded, reason: LowCapacity, percent: pct,
			detail: fmt.Sprintf("%s: %s of its reachable capacity healthy (%s), below degraded.belowHealthyCapacityPercent %s", f.Name, fmtPct(pct), c.counts(), fmtPct(b.Degraded.BelowHealthyCapacityPercent))}
	}
	return target{state: Announced, reason: Serving, percent: pct, detail: fmt.Sprintf("%s: %s of its reachable capacity healthy (%s)", f.Name, fmtPct(pct), c.counts())}
}

// step applies the hysteresis: worse at once, better after holdDownSec
// (at once for a prefix never announced yet).
func step(prev *Prefix, t *target, in *Input) Prefix {
	now := in.Now
	d := Prefix{State: t.state, Reason: t.reason, Detail: t.detail, HealthyPercent: t.percent, Since: now}
	switch {
	case prev == nil, t.state < prev.State, t.state > prev.State && (!prev.WasAnnounced || in.BGP.HoldDown() == 0):
		// New, worse, or a first announcement: at once.
	case t.state == prev.State:
		d.Since = prev.Since
	default: // better: hold down
		pending := prev.PendingSince
		if pending.IsZero() {
			pending = now
		}
		until := pending.Add(in.BGP.HoldDown())
		if now.Before(until) {
			d.State, d.Reason, d.Since, d.PendingSince = prev.State, HoldDown, prev.Since, pending
			d.Detail = fmt.Sprintf("%s since %s; stays %s until %s (holdDownSec %s)", t.detail, pending.UTC().Format(time.RFC3339), prev.State, until.UTC().Format(time.RFC3339), in.BGP.HoldDown())
		}
	}
	d.WasAnnounced = d.State != Withdrawn || prev != nil && prev.WasAnnounced
	if d.State == Degraded && in.BGP.Degraded != nil {
		d.ASPathPrepend, d.MED = in.BGP.Degraded.ASPathPrepend, in.BGP.Degraded.MED
	}
	return d
}

// fmtPct writes a percentage with at most one decimal.
func fmtPct(p float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", p), ".0") + "%"
}
