package serve

import "github.com/spillwaylb/spillway/internal/control"

// SetFleetSources registers where FleetStatus reads the control loop's
// and the probe share's state.
func (s *Server) SetFleetSources(src control.FleetSources) { s.fleetSrc.Store(&src) }

// SetFleetStatus records the instance's fleet status (package fleet calls
// it on every change).
func (s *Server) SetFleetStatus(st control.FleetStatus) { s.fleet.Store(&st) }

// FleetStatus returns the instance's fleet status, nil when standalone.
func (s *Server) FleetStatus() *control.FleetStatus {
	st := s.fleet.Load()
	if st == nil {
		return nil
	}
	out := *st
	if src := s.fleetSrc.Load(); src != nil {
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
	}
	return &out
}
