package dashboard

import (
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// Summary returns this instance's summary for the fleet view (package
// fleet publishes it): the header's facts, every service's request rate
// and 5xx share and every weighted split over the last 10 s, and the
// endpoints the health checks find down.
func (d *Dashboard) Summary() control.Summary {
	st, h := d.localState()
	return summarize(st, h)
}

// summarize builds the summary from this instance's page data and the
// health report it was built from.
func summarize(st *DashState, h *report.Health) control.Summary {
	s := control.Summary{At: st.Time, Groups: report.SummaryGroups(h)}
	if st.Info != nil {
		s.Instance, s.Version, s.Started = st.Info.Instance, st.Info.Version, st.Info.Started
		s.ConfigHash, s.ActiveConnections = st.Info.ConfigHash, st.Info.ActiveConnections
	}
	if st.Fleet != nil {
		s.Instance, s.Region, s.ConfigRevision, s.Stale = st.Fleet.Instance, st.Fleet.Region, st.Fleet.Revision, st.Fleet.Stale
	}
	var errs float64
	for _, ds := range st.Services {
		s.Services = append(s.Services, control.SummaryService{Name: ds.Name, Rate: ds.WindowRate, ErrorRate: ds.WindowErrorRate})
		s.Rate += ds.WindowRate
		errs += ds.WindowRate * ds.WindowErrorRate
	}
	if s.Rate > 0 {
		s.ErrorRate = errs / s.Rate
	}
	for _, f := range st.Frontends {
		for _, sp := range f.Splits {
			ss := control.SummarySplit{Frontend: f.Name, Source: sp.Source, Measured: sp.Measured}
			for _, w := range sp.Services {
				ss.Services = append(ss.Services, control.SummaryWeighted{Service: w.Service, Configured: w.Configured, Measured: w.Measured})
			}
			s.Splits = append(s.Splits, ss)
		}
	}
	return s
}
