package serve

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwaylb/spillway/internal/proxy"
)

// layerMetrics collects an edge's view of the regional layers it
// forwards to (proxy.Layers): requests by region and outcome, and each
// regional endpoint's connections and standing. The labels are bounded
// by the config: regions and regionalLayer endpoints, and a fixed set of
// outcomes.
type layerMetrics struct {
	ls                                *proxy.Layers
	requests, conns, opened, setAside *prometheus.Desc
}

func newLayerMetrics(ls *proxy.Layers) *layerMetrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("spillway_regional_layer_"+name, help, labels, nil)
	}
	return &layerMetrics{ls: ls,
		requests: d("requests_total", "Attempts an EDGE frontend sent to a region's regional layer, by outcome: the answer's status class (1xx-5xx), connect_failure, timeout, error, cancelled (the client left), or layer_down (every endpoint of the region's regional layer was set aside).", "region", "outcome"),
		conns:    d("connections", "HTTP/2 connections open from this edge to a regional-layer endpoint.", "region", "endpoint"),
		opened:   d("connections_opened_total", "HTTP/2 connections this edge opened to a regional-layer endpoint.", "region", "endpoint"),
		setAside: d("endpoint_set_aside", "1 while this edge sends a regional-layer endpoint nothing (its health check failed, or a connection to it could not be opened), else 0.", "region", "endpoint"),
	}
}

func (m *layerMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.requests, m.conns, m.opened, m.setAside} {
		ch <- d
	}
}

func (m *layerMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, st := range m.ls.Stats() {
		byOutcome := map[string]uint64{}
		if st.Down > 0 {
			byOutcome["layer_down"] = st.Down
		}
		for _, e := range st.Endpoints {
			for o, n := range e.Requests {
				byOutcome[o] += n
			}
			set := 0.0
			if e.SetAside {
				set = 1
			}
			ch <- prometheus.MustNewConstMetric(m.conns, prometheus.GaugeValue, float64(e.Connections), st.Region, e.Address)
			ch <- prometheus.MustNewConstMetric(m.opened, prometheus.CounterValue, float64(e.Dialled), st.Region, e.Address)
			ch <- prometheus.MustNewConstMetric(m.setAside, prometheus.GaugeValue, set, st.Region, e.Address)
		}
		for o, n := range byOutcome {
			ch <- prometheus.MustNewConstMetric(m.requests, prometheus.CounterValue, float64(n), st.Region, o)
		}
	}
}
