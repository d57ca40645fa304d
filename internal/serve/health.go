package serve

import (
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// withMeasured returns a copy of r with the measured shares filled in
// from the request counters (r itself is shared and never modified).
func (s *Server) withMeasured(r *report.Health) *report.Health {
	if r == nil {
		return nil
	}
	counts := s.reqMetrics.backendCounts()
	out := *r
	out.Fleet = s.FleetStatus()
	out.Overlay = s.Overlay()
	if snap := s.snap.Load(); snap != nil {
		out.SslCertificates = s.front.certificates(snap.Plan)
	}
	out.RegionalLayers = regionalLayers(s.layers.Stats())
	out.Services = append([]report.Service(nil), r.Services...)
	for i := range out.Services {
		svc := &out.Services[i]
		svc.Frontends = append([]report.FrontendSplit(nil), svc.Frontends...)
		for j := range svc.Frontends {
			f := &svc.Frontends[j]
			f.Backends = append([]report.SplitShare(nil), f.Backends...)
			var total uint64
			for _, b := range f.Backends {
				total += counts[seriesKey{f.Frontend, svc.Name, b.Group, b.Zone}]
			}
			f.MeasuredRequests = total
			if total == 0 {
				continue
			}
			for k := range f.Backends {
				b := &f.Backends[k]
				b.MeasuredShare = float64(counts[seriesKey{f.Frontend, svc.Name, b.Group, b.Zone}]) / float64(total)
			}
		}
	}
	return &out
}

// regionalLayers is the get-health view of an edge's regional layers.
func regionalLayers(stats []proxy.LayerStats) []report.RegionalLayer {
	var out []report.RegionalLayer
	for _, st := range stats {
		rl := report.RegionalLayer{Region: st.Region}
		for _, e := range st.Endpoints {
			re := report.RegionalEndpoint{Address: e.Address, State: "SERVING", Connections: e.Connections, Checked: e.Checked, Detail: e.Detail}
			if e.SetAside {
				re.State = "SET_ASIDE"
			}
			rl.Endpoints = append(rl.Endpoints, re)
		}
		out = append(out, rl)
	}
	return out
}
