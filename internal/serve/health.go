package serve

import (
	"context"
	"crypto/sha256"
	"os"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
)

// HealthReport is the get-health view: per backend service, backend and
// endpoint, like `gcloud compute backend-services get-health`, plus
// Spillway's drain state and traffic shares.
type HealthReport struct {
	Version  uint64          `json:"version"`
	Time     time.Time       `json:"time"`
	Services []ServiceHealth `json:"backendServices"`
	// Fleet is the instance's standing with the fleet's shared config
	// (spillway serve --fleet): revision in force, stale or not. Absent
	// when standalone.
	Fleet *control.FleetStatus `json:"fleet,omitempty"`
}

// ServiceHealth is one backend service.
type ServiceHealth struct {
	Name      string          `json:"name"`
	Algorithm string          `json:"loadBalancingAlgorithm"`
	AutoDrain bool            `json:"autoCapacityDrain"`
	Threshold int             `json:"failoverHealthThreshold"`
	Backends  []BackendHealth `json:"backends"`
	// Frontends is the split as each HTTP(S) frontend's clients see it:
	// the engine's shares for the frontend's region (Backends[].Share is
	// for clients without a region) beside the split its requests
	// actually took.
	Frontends []FrontendSplit `json:"frontends,omitempty"`
}

// FrontendSplit is a service's split seen from one frontend.
type FrontendSplit struct {
	Frontend string `json:"frontend"`
	// ClientRegion is the frontend's region, "" when it has none (its
	// clients are then clients without a region).
	ClientRegion string `json:"clientRegion"`
	// MeasuredRequests is how many of the frontend's requests reached a
	// backend of the service since the process started; the measured
	// shares are over them.
	MeasuredRequests uint64 `json:"measuredRequests"`
	// OfferedRate is the offered rate (requests per second) the split is
	// computed for: the service's clients in ClientRegion, through every
	// frontend of the region, as last measured (the control state keeps
	// it within 5%). In fleet mode it is the fleet's: this instance's
	// own plus the other instances' published rates.
	OfferedRate float64      `json:"offeredRate"`
	Backends    []SplitShare `json:"backends"`
}

// SplitShare is one backend's computed and measured share.
type SplitShare struct {
	Group string `json:"group"`
	Zone  string `json:"zone"`
	// Share is the engine's share for the frontend's region, 0-1.
	Share float64 `json:"share"`
	// MeasuredShare is the fraction of MeasuredRequests the backend got.
	MeasuredShare float64 `json:"measuredShare"`
}

// BackendHealth is one backend (group) of a service.
type BackendHealth struct {
	Group        string  `json:"group"`
	Zone         string  `json:"zone"`
	Region       string  `json:"region"`
	Preference   string  `json:"preference"`
	Healthy      int     `json:"healthy"`
	Members      int     `json:"members"`
	Drained      bool    `json:"drained"`
	DrainBlocked bool    `json:"drainBlocked"`
	Share        float64 `json:"share"` // of the service's traffic (no client region)
	// Why explains the state in words.
	Why       string           `json:"why,omitempty"`
	Endpoints []EndpointHealth `json:"healthStatus"`
}

// EndpointHealth is one endpoint.
type EndpointHealth struct {
	Instance    string    `json:"instance,omitempty"`
	IPAddress   string    `json:"ipAddress"`
	HealthState string    `json:"healthState"` // HEALTHY, UNHEALTHY, UNKNOWN
	Ejected     bool      `json:"ejected,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	Since       time.Time `json:"since,omitzero"`
}

func buildHealth(st *control.State, v *engine.View, now time.Time) *HealthReport {
	p := st.Plan()
	r := &HealthReport{Version: st.Version(), Time: now}
	for _, svc := range p.Services {
		sh := ServiceHealth{Name: svc.Name, Algorithm: svc.Algorithm.String(), AutoDrain: svc.AutoDrain, Threshold: int(svc.FailoverThreshold*100 + 0.5)}
		split := v.Split(svc.ID, -1)
		for _, b := range svc.Backends {
			bs := v.Backend(svc.ID, b.Index)
			bh := BackendHealth{
				Group: b.Group.Name, Zone: b.Group.Zone, Region: b.Group.Region, Preference: "DEFAULT",
				Healthy: bs.Healthy, Members: bs.Members, Drained: bs.Drained, DrainBlocked: bs.DrainBlocked,
			}
			if b.Preferred {
				bh.Preference = "PREFERRED"
			}
			for _, s := range split.Shares {
				if s.Backend == b.Index {
					bh.Share = s.Fraction
				}
			}
			switch {
			case bs.Drained:
				bh.Why = "auto-capacity drain: fewer than 25% of members healthy; returns after 35% are healthy for the undrain hold"
			case bs.DrainBlocked:
				bh.Why = "drain blocked: below 25% healthy, but 50% of the service's backends are already drained"
			case b.ZeroCapacity():
				bh.Why = "zero capacity (capacityScaler 0 or no members)"
			case bs.Healthy == 0:
				bh.Why = "no healthy endpoint"
			}
			for _, e := range b.Endpoints {
				hs := st.Health(e.ID)
				eh := EndpointHealth{Instance: e.Instance, IPAddress: e.Addr, HealthState: "UNKNOWN", Ejected: st.Ejected(e.ID), Detail: hs.Detail, Since: hs.Since}
				if hs.Known() {
					eh.HealthState = "UNHEALTHY"
					if hs.Healthy() {
						eh.HealthState = "HEALTHY"
					}
				}
				bh.Endpoints = append(bh.Endpoints, eh)
			}
			sh.Backends = append(sh.Backends, bh)
		}
		for _, f := range p.Frontends {
			if f.Protocol != "HTTP" && f.Protocol != "HTTPS" {
				continue
			}
			fsplit := FrontendSplit{Frontend: f.Name, ClientRegion: f.Region, OfferedRate: st.Demand(svc.ID, f.RegionID)}
			rsplit := v.Split(svc.ID, f.RegionID)
			for _, b := range svc.Backends {
				ss := SplitShare{Group: b.Group.Name, Zone: b.Group.Zone}
				for _, s := range rsplit.Shares {
					if s.Backend == b.Index {
						ss.Share = s.Fraction
					}
				}
				fsplit.Backends = append(fsplit.Backends, ss)
			}
			sh.Frontends = append(sh.Frontends, fsplit)
		}
		r.Services = append(r.Services, sh)
	}
	return r
}

// watch polls the config file and reloads it when its content differs
// from the config in force, and reloads the TLS files of HTTPS frontends
// when they change. Polling (not inotify) is deliberate: it survives
// editors and tools that replace files, and the files are small.
func (s *Server) watch(ctx context.Context) {
	every := s.opts.WatchInterval
	if every == 0 {
		every = time.Second
	}
	var last watchState
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.opts.ConfigPath != "" {
			s.checkConfigFile(ctx, &last)
		}
		s.checkTLSFiles()
	}
}

// watchState is what the watcher last looked at: the file's bytes and the
// config in force then. The file is parsed again only when either changed.
type watchState struct {
	file, inForce [32]byte
}

// checkConfigFile reloads the config file when its content is not the
// config in force. A file that is rejected is not retried until it, or the
// config in force, changes.
func (s *Server) checkConfigFile(ctx context.Context, last *watchState) {
	b, err := os.ReadFile(s.opts.ConfigPath)
	if err != nil {
		return // being replaced, or gone: keep serving, look again later
	}
	cur := watchState{file: sha256.Sum256(b), inForce: *s.inForce.Load()}
	if cur == *last {
		return
	}
	*last = cur
	cfg, err := config.Parse(b, s.opts.ConfigPath)
	if err == nil {
		var sum [32]byte
		if sum, err = configSum(cfg); err == nil && sum == cur.inForce {
			return
		}
	}
	if err == nil {
		err = s.Reload(ctx, cfg)
	} else {
		s.metrics.reloadFailures.Add(1)
	}
	if err != nil {
		s.log.Error("config changed but was rejected; the old config keeps serving", "file", s.opts.ConfigPath, "err", err)
	}
}

// withMeasured returns a copy of r with the measured shares filled in
// from the request counters (r itself is shared and never modified).
func (s *Server) withMeasured(r *HealthReport) *HealthReport {
	if r == nil {
		return nil
	}
	counts := s.reqMetrics.backendCounts()
	out := *r
	out.Fleet = s.FleetStatus()
	out.Services = append([]ServiceHealth(nil), r.Services...)
	for i := range out.Services {
		svc := &out.Services[i]
		svc.Frontends = append([]FrontendSplit(nil), svc.Frontends...)
		for j := range svc.Frontends {
			f := &svc.Frontends[j]
			f.Backends = append([]SplitShare(nil), f.Backends...)
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
