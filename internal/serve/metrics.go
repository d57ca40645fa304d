package serve

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics exposes the control state on the admin listener's /metrics. It
// is a collector over the published health report and a few loop-side
// counters, so the request path pays nothing for it.
type metrics struct {
	s *Server

	reloads, reloadFailures atomic.Uint64
	// certReloads and certReloadFailures count the watcher's reloads of
	// changed certificate, key and CA files.
	certReloads, certReloadFailures atomic.Uint64
	// keyFailures counts failed DNSSEC key steps (dnskeys.go).
	keyFailures atomic.Uint64
	// ops counts probes and outlier ejections (opsmetrics.go).
	ops opsCounters
	// dns counts DNS queries (dnsmetrics.go).
	dns dnsCounters
	// d are the descriptors of the request, operational and DNS metrics.
	d *obsDescs

	endpointHealthy *prometheus.Desc
	endpointEjected *prometheus.Desc
	backendHealthy  *prometheus.Desc
	backendMembers  *prometheus.Desc
	backendDrained  *prometheus.Desc
	backendBlocked  *prometheus.Desc
	backendShare    *prometheus.Desc
	offeredRate     *prometheus.Desc
	reloadsDesc     *prometheus.Desc
	reloadFailDesc  *prometheus.Desc
	stateVersion    *prometheus.Desc
	certReloadsDesc *prometheus.Desc
	certFailDesc    *prometheus.Desc
	fleetStale      *prometheus.Desc
	fleetRevision   *prometheus.Desc
	fleetLeader     *prometheus.Desc
	fleetProbing    *prometheus.Desc
	fleetPeers      *prometheus.Desc
	// bgp are the anycast metrics (bgpmetrics.go).
	bgp           bgpDescs
	fleetRLPeers  *prometheus.Desc
	fleetRLWrites *prometheus.Desc
}

func newMetrics(s *Server) *metrics {
	be := []string{"backend_service", "group", "zone", "region", "preference"}
	return &metrics{
		s:               s,
		d:               newObsDescs(),
		endpointHealthy: prometheus.NewDesc("spillway_endpoint_healthy", "1 when the endpoint passes its health check (or has not been probed yet), else 0.", []string{"backend_service", "group", "zone", "endpoint"}, nil),
		endpointEjected: prometheus.NewDesc("spillway_endpoint_ejected", "1 while outlier detection has ejected the endpoint.", []string{"backend_service", "group", "zone", "endpoint"}, nil),
		backendHealthy:  prometheus.NewDesc("spillway_backend_healthy_members", "Healthy members of a backend (group) of a backend service.", be, nil),
		backendMembers:  prometheus.NewDesc("spillway_backend_members", "Configured members of a backend (group) of a backend service.", be, nil),
		backendDrained:  prometheus.NewDesc("spillway_backend_drained", "1 while auto-capacity drain has drained the backend.", be, nil),
		backendBlocked:  prometheus.NewDesc("spillway_backend_drain_blocked", "1 while the backend is a drain candidate held back by the 50% limit.", be, nil),
		backendShare:    prometheus.NewDesc("spillway_backend_traffic_share", "Share of the backend service's traffic (clients without a region) the backend receives, 0-1.", be, nil),
		offeredRate:     prometheus.NewDesc("spillway_offered_rate_rps", "Offered rate (requests per second) from the clients of a region (\"\" for none) to a backend service, that RATE capacity is compared with: as last measured over a demand window, within 5%; in fleet mode the whole fleet's. Regions of HTTP(S) frontends only.", []string{"backend_service", "client_region"}, nil),
		reloadsDesc:     prometheus.NewDesc("spillway_config_reloads_total", "Config reloads applied.", nil, nil),
		reloadFailDesc:  prometheus.NewDesc("spillway_config_reload_failures_total", "Config reloads rejected (the old config kept serving).", nil, nil),
		stateVersion:    prometheus.NewDesc("spillway_control_state_version", "Increases on every health, drain or demand change.", nil, nil),
		certReloadsDesc: prometheus.NewDesc("spillway_tls_file_reloads_total", "Changed certificate, key or CA files loaded by the file watcher.", nil, nil),
		certFailDesc:    prometheus.NewDesc("spillway_tls_file_reload_failures_total", "Changed certificate, key or CA files that failed to load (the old ones kept serving).", nil, nil),
		fleetStale:      prometheus.NewDesc("spillway_fleet_stale", "Fleet mode only: 1 while the instance has lost etcd and serves its last good config, else 0.", nil, nil),
		fleetRevision:   prometheus.NewDesc("spillway_fleet_config_revision", "Fleet mode only: the fleet config revision in force (0: the --config file).", nil, nil),
		fleetLeader:     prometheus.NewDesc("spillway_fleet_control_leader", "Fleet mode only: 1 on the instance elected to decide drains, else 0 (summed over the fleet: 1).", nil, nil),
		fleetProbing:    prometheus.NewDesc("spillway_fleet_probe_targets", "Fleet mode only: the probe targets this instance probes (sharded probing).", nil, nil),
		fleetPeers:      prometheus.NewDesc("spillway_fleet_demand_peers", "Fleet mode only: the other instances whose offered rates this instance counts against RATE capacity (fleet-wide RATE).", nil, nil),
		bgp:             newBGPDescs(),
		fleetRLPeers:    prometheus.NewDesc("spillway_fleet_rate_limit_peers", "Fleet mode only: the other instances whose rate limit counts and bans this instance's security policies add to their own (fleet-wide rate limits).", nil, nil),
		fleetRLWrites:   prometheus.NewDesc("spillway_fleet_rate_limit_writes_total", "Fleet mode only: the writes of this instance's rate limit record to etcd.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.endpointHealthy, m.endpointEjected, m.backendHealthy, m.backendMembers, m.backendDrained, m.backendBlocked, m.backendShare, m.offeredRate, m.reloadsDesc, m.reloadFailDesc, m.stateVersion, m.certReloadsDesc, m.certFailDesc, m.fleetStale, m.fleetRevision, m.fleetLeader, m.fleetProbing, m.fleetPeers, m.fleetRLPeers, m.fleetRLWrites} {
		ch <- d
	}
	for _, d := range m.d.all() {
		ch <- d
	}
	for _, d := range m.bgp.all() {
		ch <- d
	}
	for _, d := range m.s.dnstel.descs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector from the published report.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b01 := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	if r := m.s.Health(); r != nil {
		gauge(m.stateVersion, float64(r.Version))
		for _, svc := range r.Services {
			for _, b := range svc.Backends {
				l := []string{svc.Name, b.Group, b.Zone, b.Region, b.Preference}
				gauge(m.backendHealthy, float64(b.Healthy), l...)
				gauge(m.backendMembers, float64(b.Members), l...)
				gauge(m.backendDrained, b01(b.Drained), l...)
				gauge(m.backendBlocked, b01(b.DrainBlocked), l...)
				gauge(m.backendShare, b.Share, l...)
				for _, e := range b.Endpoints {
					el := []string{svc.Name, b.Group, b.Zone, e.IPAddress}
					gauge(m.endpointHealthy, b01(e.HealthState != "UNHEALTHY"), el...)
					gauge(m.endpointEjected, b01(e.Ejected), el...)
				}
			}
			seen := map[string]bool{}
			for _, f := range svc.Frontends {
				if !seen[f.ClientRegion] {
					seen[f.ClientRegion] = true
					gauge(m.offeredRate, f.OfferedRate, svc.Name, f.ClientRegion)
				}
			}
		}
		m.bgp.collect(ch, r.BGP)
	}
	if f := m.s.FleetStatus(); f != nil {
		gauge(m.fleetStale, b01(f.Stale))
		gauge(m.fleetRevision, float64(f.Revision))
		if f.Control != nil {
			gauge(m.fleetLeader, b01(f.Control.Leading))
		}
		if f.Probing != nil {
			gauge(m.fleetProbing, float64(f.Probing.Probing))
		}
		if f.Demand != nil {
			gauge(m.fleetPeers, float64(len(f.Demand.Peers)))
		}
		if r := f.RateLimits; r != nil {
			gauge(m.fleetRLPeers, float64(len(r.Peers)))
			ch <- prometheus.MustNewConstMetric(m.fleetRLWrites, prometheus.CounterValue, float64(r.Writes))
		}
	}
	ch <- prometheus.MustNewConstMetric(m.reloadsDesc, prometheus.CounterValue, float64(m.reloads.Load()))
	ch <- prometheus.MustNewConstMetric(m.reloadFailDesc, prometheus.CounterValue, float64(m.reloadFailures.Load()))
	ch <- prometheus.MustNewConstMetric(m.certReloadsDesc, prometheus.CounterValue, float64(m.certReloads.Load()))
	ch <- prometheus.MustNewConstMetric(m.certFailDesc, prometheus.CounterValue, float64(m.certReloadFailures.Load()))
	m.s.reqMetrics.collect(ch, m.d)
	m.collectOps(ch)
	m.collectDNS(ch)
	m.s.dnstel.collect(ch)
	if snap := m.s.Snapshot(); snap != nil {
		for _, c := range snap.Armor.Counts() {
			ch <- prometheus.MustNewConstMetric(m.d.descArmor, prometheus.CounterValue, float64(c.Count), c.Policy, strconv.FormatInt(c.Priority, 10), c.Result, strconv.FormatBool(c.Preview))
		}
	}
}

// handler returns the /metrics handler over a registry of its own (no
// global registry), with the Go runtime and process collectors.
func (m *metrics) handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, newRunMetrics(m.s), newLayerMetrics(m.s.layers), newBucketMetrics(m.s.Snapshot), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if c := m.s.cache.cache; c != nil {
		reg.MustRegister(newCDNMetrics(c))
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
