package control

import "time"

// FleetStatus is how a fleet instance (spillway serve --fleet) stands with
// the fleet's shared config in etcd. Package fleet keeps it current with
// serve.Server.SetFleetStatus; /health shows it as "fleet" and /metrics as the
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
	// Control and Probing are the state of the instance's control loop
	// and probe share when it runs them (FleetSources), read when the
	// status is.
	Control *FleetControl `json:"control,omitempty"`
	Probing *FleetProbing `json:"probing,omitempty"`
	Demand  *FleetDemand  `json:"demand,omitempty"`
	// RateLimits is the state of the instance's rate limit share.
	RateLimits *FleetRateLimits `json:"rateLimits,omitempty"`
}

// FleetRateLimits is how an instance shares its security policies' rate
// limits (docs/fleet.md, "Fleet-wide rate limits").
type FleetRateLimits struct {
	// Connected is false while the share cannot reach etcd: the instance
	// then counts alone, and keeps the others' bans.
	Connected bool `json:"connected"`
	// Peers are the other instances whose counts this instance adds
	// (those that have keys over the floor or bans to share).
	Peers []string `json:"peers"`
	// Writes counts the writes of this instance's record to etcd.
	Writes int64 `json:"writes"`
}

// FleetDemand is how an instance shares demand for fleet-wide RATE
// (docs/fleet.md, "Fleet-wide RATE").
type FleetDemand struct {
	// Connected is false while the share cannot reach etcd (or never
	// could): the others' rates are then the last seen.
	Connected bool `json:"connected"`
	// Peers are the other instances whose offered rates this instance
	// counts.
	Peers []string `json:"peers"`
}

// FleetControl is what an instance knows of the fleet's elected control
// loop (docs/fleet.md, "One control loop").
type FleetControl struct {
	// Leader is the elected instance that decides drains ("" when none is
	// known); Leading is true on the leader itself.
	Leader  string `json:"leader"`
	Leading bool   `json:"leading"`
	// Connected is false while the loop has no session with etcd: a
	// follower then keeps the drain state it last applied.
	Connected bool `json:"connected"`
	// Applied counts the leader's drain states this instance applied;
	// Writes the drain states it published while leading.
	Applied int64 `json:"drainStatesApplied"`
	Writes  int64 `json:"drainStatesPublished"`
}

// FleetProbing is what an instance's share of the fleet's probing is
// (docs/fleet.md, "Sharded probing").
type FleetProbing struct {
	// Targets is how many probe targets the config has; Probing how many
	// of them this instance probes.
	Targets int `json:"targets"`
	Probing int `json:"probing"`
	// Connected is false while the share has lost etcd: the instance then
	// believes only its own probes.
	Connected bool `json:"connected"`
}

// FleetSources report the state of a fleet instance's control loop,
// probe share, demand share and rate limit share; any may be nil (not
// running).
type FleetSources struct {
	Control    func() FleetControl
	Probing    func() FleetProbing
	Demand     func() FleetDemand
	RateLimits func() FleetRateLimits
}

// DemandRates are offered rates in requests per second, by backend
// service name and then client region name ("" for the clients of
// frontends without a region). Names, not plan indexes, so that they
// mean the same on every instance of a fleet whatever plan each runs.
type DemandRates map[string]map[string]float64

// Add adds rps to (service, region).
func (d DemandRates) Add(service, region string, rps float64) {
	m := d[service]
	if m == nil {
		m = map[string]float64{}
		d[service] = m
	}
	m[region] += rps
}

// GroupLoad is what one instance measured of one backend with
// balancingMode UTILIZATION over a demand window: the rate of its
// endpoints' responses that carried a load report (ORCA's
// endpoint-load-metrics header), and the mean utilisation they reported.
type GroupLoad struct {
	RPS         float64 `json:"rps"`
	Utilization float64 `json:"utilization"`
}

// LoadRates are GroupLoads by backend service name and then backend
// group name (names, as for DemandRates).
type LoadRates map[string]map[string]GroupLoad

// Add combines g into (service, group): the rates add up and the
// utilisation is the rate-weighted mean of the reports.
func (l LoadRates) Add(service, group string, g GroupLoad) {
	if !(g.RPS > 0) {
		return
	}
	m := l[service]
	if m == nil {
		m = map[string]GroupLoad{}
		l[service] = m
	}
	old := m[group]
	sum := old.RPS + g.RPS
	m[group] = GroupLoad{RPS: sum, Utilization: (old.Utilization*old.RPS + g.Utilization*g.RPS) / sum}
}
