package serve

import (
	"sync/atomic"

	"github.com/spillwaylb/spillway/internal/control"
)

// fleetStatus is the fleet status component: what package fleet reports
// (the status and where to read its control loop's and shares' state),
// read as one snapshot by /health, /metrics and the dashboard. Nothing
// is set on a standalone instance.
type fleetStatus struct {
	status atomic.Pointer[control.FleetStatus]
	src    atomic.Pointer[control.FleetSources]
}

// snapshot returns the status with its sources read now, nil when none
// was set.
func (f *fleetStatus) snapshot() *control.FleetStatus {
	st := f.status.Load()
	if st == nil {
		return nil
	}
	out := *st
	if src := f.src.Load(); src != nil {
		if src.Control != nil {
			c := src.Control()
			out.Control = &c
		}
		if src.Probing != nil {
			p := src.Probing()
			out.Probing = &p
		}
		if src.Demand != nil {
			d := src.Demand()
			out.Demand = &d
		}
		if src.RateLimits != nil {
			r := src.RateLimits()
			out.RateLimits = &r
		}
	}
	return &out
}

// SetFleetSources registers where FleetStatus reads the control loop's
// and the probe share's state.
func (s *Server) SetFleetSources(src control.FleetSources) { s.fleet.src.Store(&src) }

// SetFleetStatus records the instance's fleet status (package fleet calls
// it on every change).
func (s *Server) SetFleetStatus(st control.FleetStatus) { s.fleet.status.Store(&st) }

// FleetStatus returns the instance's fleet status, nil when standalone.
func (s *Server) FleetStatus() *control.FleetStatus { return s.fleet.snapshot() }
