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
	// peers are the other instances' summaries for the dashboard's
	// fleet view (SetFleetPeers).
	peers atomic.Pointer[func() ([]control.Summary, bool)]
}

// dashPeers returns the other instances' summaries and whether they are
// current; ok is false when standalone.
func (f *fleetStatus) dashPeers() (peers []control.Summary, connected, ok bool) {
	p := f.peers.Load()
	if p == nil {
		return nil, false, false
	}
	peers, connected = (*p)()
	return peers, connected, true
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

// SetFleetPeers registers where the dashboard reads the other fleet
// instances' summaries (package fleet's SummaryShare).
func (s *Server) SetFleetPeers(peers func() ([]control.Summary, bool)) { s.fleet.peers.Store(&peers) }

// FleetSummary returns this instance's summary for the fleet view
// (package fleet publishes it): see dashboard.Dashboard.Summary.
func (s *Server) FleetSummary() control.Summary { return s.dash.Summary() }
