package serve

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwaylb/spillway/internal/anycast"
	"github.com/spillwaylb/spillway/internal/bgp"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// bgpDescs are the anycast metrics (spillway.bgp only): one series per
// neighbor and state, and one per prefix, whose reason label takes the
// fixed values of package anycast.
type bgpDescs struct {
	sessionState, sessionUp, sessionFlaps, sessionAdvertised   *prometheus.Desc
	prefixState, prefixAnnounced, prefixHealthy, applyFailures *prometheus.Desc
}

func newBGPDescs() bgpDescs {
	nb := []string{"neighbor", "peer_asn"}
	return bgpDescs{
		sessionState:      prometheus.NewDesc("spillway_bgp_session_state", "1 for the BGP state (IDLE, CONNECT, ACTIVE, OPENSENT, OPENCONFIRM, ESTABLISHED) each neighbor's session is in, 0 for the others.", append(nb, "state"), nil),
		sessionUp:         prometheus.NewDesc("spillway_bgp_session_established", "1 while the session with the neighbor is ESTABLISHED, else 0.", nb, nil),
		sessionFlaps:      prometheus.NewDesc("spillway_bgp_session_flaps_total", "Times the session with the neighbor went down.", nb, nil),
		sessionAdvertised: prometheus.NewDesc("spillway_bgp_session_advertised_prefixes", "Prefixes announced on the session now.", nb, nil),
		prefixState:       prometheus.NewDesc("spillway_bgp_prefix_state", "1 for the state (ANNOUNCED, DEGRADED, WITHDRAWN) and reason each anycast prefix is in now; reason is one of serving, low_capacity, hold_down, below_minimum, no_healthy_backend, awaiting_probes, no_capacity, not_listening, fleet_stale, shutting_down.", []string{"prefix", "state", "reason"}, nil),
		prefixAnnounced:   prometheus.NewDesc("spillway_bgp_prefix_announced", "1 while the anycast prefix is announced (ANNOUNCED or DEGRADED), else 0.", []string{"prefix"}, nil),
		prefixHealthy:     prometheus.NewDesc("spillway_bgp_prefix_healthy_capacity_percent", "Healthy share (0-100) of the reachable capacity of the frontends announcing the prefix (the lowest of them).", []string{"prefix"}, nil),
		applyFailures:     prometheus.NewDesc("spillway_bgp_apply_error", "1 while the last anycast decision could not be applied to the BGP speaker (get-health says why), else 0.", nil, nil),
	}
}

func (d bgpDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.sessionState, d.sessionUp, d.sessionFlaps, d.sessionAdvertised, d.prefixState, d.prefixAnnounced, d.prefixHealthy, d.applyFailures}
}

// collect emits the anycast metrics of b (nothing without spillway.bgp).
func (d bgpDescs) collect(ch chan<- prometheus.Metric, b *report.BGP) {
	if b == nil {
		return
	}
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	for _, s := range b.Sessions {
		asn := strconv.FormatUint(uint64(s.PeerASN), 10)
		for _, st := range bgp.States() {
			gauge(d.sessionState, b01(s.State == st), s.Neighbor, asn, st)
		}
		gauge(d.sessionUp, b01(s.State == "ESTABLISHED"), s.Neighbor, asn)
		gauge(d.sessionAdvertised, float64(s.Advertised), s.Neighbor, asn)
		ch <- prometheus.MustNewConstMetric(d.sessionFlaps, prometheus.CounterValue, float64(s.Flaps), s.Neighbor, asn)
	}
	for _, p := range b.Prefixes {
		pfx := p.Prefix.String()
		gauge(d.prefixState, 1, pfx, p.State.String(), string(p.Reason))
		gauge(d.prefixAnnounced, b01(p.State != anycast.Withdrawn), pfx)
		gauge(d.prefixHealthy, p.HealthyPercent, pfx)
	}
	gauge(d.applyFailures, b01(b.Error != ""))
}

func b01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
