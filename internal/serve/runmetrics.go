package serve

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// runMetrics is the collector of the process's build and its frontends'
// connections and requests in flight: counters the listeners and the
// frontends' handlers keep (one atomic add each), read at scrape time.
type runMetrics struct {
	s         *Server
	build     *prometheus.Desc
	buildVals []string
	active    *prometheus.Desc
	accepted  *prometheus.Desc
	inflight  *prometheus.Desc
	parked    *prometheus.Desc
}

func newRunMetrics(s *Server) *runMetrics {
	bi, _ := debug.ReadBuildInfo()
	return &runMetrics{
		s:         s,
		build:     prometheus.NewDesc("spillway_build_info", "Always 1: the build's version (the main module's), Go version and VCS revision (\"\" when the build recorded none), from the binary's build information.", []string{"version", "goversion", "revision"}, nil),
		buildVals: buildLabels(bi),
		active:    prometheus.NewDesc("spillway_connections_active", "Client connections of the HTTP(S) frontends open now.", nil, nil),
		accepted:  prometheus.NewDesc("spillway_connections_accepted_total", "Client connections the HTTP(S) frontends have accepted.", nil, nil),
		inflight:  prometheus.NewDesc("spillway_requests_in_flight", "Requests a frontend is serving now (received, response not finished).", []string{"frontend"}, nil),
		parked:    prometheus.NewDesc("spillway_connections_parked", "Client connections of a frontend's HTTP/1.1 loop parked now: idle, waiting for a request without a goroutine (spillway.parkIdleConnections).", []string{"frontend"}, nil),
	}
}

// buildLabels returns the version, Go version and revision of bi (nil:
// unknown version, this toolchain, no revision).
func buildLabels(bi *debug.BuildInfo) []string {
	version, goVersion, revision := "unknown", runtime.Version(), ""
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, st := range bi.Settings {
			if st.Key == "vcs.revision" {
				revision = st.Value
			}
		}
	}
	return []string{version, goVersion, revision}
}

// Describe implements prometheus.Collector.
func (m *runMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.build
	ch <- m.active
	ch <- m.accepted
	ch <- m.inflight
	ch <- m.parked
}

// Collect implements prometheus.Collector.
func (m *runMetrics) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(m.build, prometheus.GaugeValue, 1, m.buildVals...)
	conns := m.s.front.conns
	ch <- prometheus.MustNewConstMetric(m.active, prometheus.GaugeValue, float64(conns.Active()))
	ch <- prometheus.MustNewConstMetric(m.accepted, prometheus.CounterValue, float64(conns.Accepted()))
	m.s.front.each(func(name string, f *frontend) {
		ch <- prometheus.MustNewConstMetric(m.inflight, prometheus.GaugeValue, float64(f.inflight.Load()), name)
		if p, ok := f.srv.(interface{ Parked() int }); ok {
			ch <- prometheus.MustNewConstMetric(m.parked, prometheus.GaugeValue, float64(p.Parked()), name)
		}
	})
}
