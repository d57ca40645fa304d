package serve

import "time"

// FleetStatus is how a fleet instance (spillway serve --fleet) stands with
// the fleet's shared config in etcd. Package fleet keeps it current with
// SetFleetStatus; /health shows it as "fleet" and /metrics as the
// spillway_fleet_* gauges. A standalone instance has none.
type FleetStatus struct {
	// Instance and Region are the instance's --instance and --region.
	Instance string `json:"instance"`
	Region   string `json:"region,omitempty"`
	// Revision is the fleet config revision in force; 0 when the config
	// in force came from the --config file (etcd was unreachable at start
	// or held no config yet).
	Revision int64 `json:"configRevision"`
	// Stale is true while the instance has lost etcd (or never reached
	// it): it keeps serving its last good config, which may be older than
	// the fleet's. StaleSince and StaleWhy say since when and why.
	Stale      bool      `json:"stale"`
	StaleSince time.Time `json:"staleSince,omitzero"`
	StaleWhy   string    `json:"staleWhy,omitempty"`
	// RejectedRevision is the last fleet revision this instance could not
	// apply (0 if none since the last one applied), with the reason.
	RejectedRevision int64  `json:"rejectedRevision,omitempty"`
	RejectedError    string `json:"rejectedError,omitempty"`
}

// SetFleetStatus records the instance's fleet status (package fleet calls
// it on every change).
func (s *Server) SetFleetStatus(st FleetStatus) { s.fleet.Store(&st) }

// FleetStatus returns the instance's fleet status, nil when standalone.
func (s *Server) FleetStatus() *FleetStatus { return s.fleet.Load() }
