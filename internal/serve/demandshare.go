package serve

import (
	"math"
	"time"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
)

// DemandShare counts RATE capacity against a fleet's demand rather than
// this instance's alone (package fleet's DemandShare). With
// Options.DemandShare set, every demand window the Server hands the
// share the rates it measured itself (Publish) and sets its control
// state's demand for each (service, client region) to its own rate plus
// Remote's: the other instances' offered rate. Without it (standalone)
// the demand is the instance's own, as before.
type DemandShare interface {
	// Publish receives this instance's offered rates for the window that
	// ended at at, of length window (rates of zero are left out), and
	// the loads it measured of UTILIZATION backends (measureLoad), from
	// the Server's loop at the end of every window. It must not block;
	// the Server does not touch rates or load afterwards.
	Publish(at time.Time, window time.Duration, rates control.DemandRates, load control.LoadRates)
	// Remote returns the sum of the other live instances' offered rates,
	// read from the Server's loop once per window. It must not block,
	// and neither side may modify the map it returns. Names the plan does
	// not know are ignored.
	Remote() control.DemandRates
	// RemoteLoad returns the other live instances' loads combined
	// (control.LoadRates.Add), under the same rules as Remote.
	RemoteLoad() control.LoadRates
}

// measureDemand ends a demand window: it reads (and resets) the demand
// counters, hands this instance's rates to the DemandShare if any, and
// sets the control state's demand to them plus the share's remote
// rates. The engine then spills whatever is over capacity.
func (s *Server) measureDemand(p *plan.Plan) {
	snap := s.snap.Load()
	sh := s.opts.DemandShare
	var local, remote control.DemandRates
	if sh != nil {
		local, remote = control.DemandRates{}, sh.Remote()
	}
	changed := false
	secs := p.DemandWindow.Seconds()
	now := s.now()
	for id, svc := range p.Services {
		for r := -1; r < len(p.Regions); r++ {
			rps := float64(snap.Demand.Swap(id, r)) / secs
			if sh != nil {
				region := ""
				if r >= 0 {
					region = p.Regions[r]
				}
				if rps > 0 {
					local.Add(svc.Name, region, rps)
				}
				rps += remote[svc.Name][region]
			}
			if s.state.SetDemand(id, r, rps, now) {
				changed = true
			}
		}
	}
	var remoteLoad control.LoadRates
	if sh != nil {
		remoteLoad = sh.RemoteLoad()
	}
	load, loadChanged := s.measureLoad(p, snap.Loads, remoteLoad, now)
	if sh != nil {
		sh.Publish(now, p.DemandWindow, local, load)
	}
	if changed || loadChanged {
		s.publish(p, nil)
	}
}

// minLoadRPS is the least measured capacity: a backend that reported
// itself busy keeps a trickle of requests, whose reports can raise its
// capacity again once it is less busy.
const minLoadRPS = 1

// loadForget is how many demand windows without a report a measured
// capacity outlives: then the backend has its configured capacity again.
const loadForget = 30

// measureLoad ends a window of load reports (docs/global.md, "Capacity
// between the layers"). Each UTILIZATION backend's reports, this
// instance's (read and reset from loads) and the other instances'
// (remote), give its rate r and utilisation u; its measured capacity is
// then r × its target utilisation / u (at least minLoadRPS), the rate at
// which it would reach the target if utilisation grows with the rate,
// and the engine's waterfall spills what the demand offers above it. A
// window without reports leaves it as it was; loadForget of them in a
// row forget it. It returns this
// instance's own loads, for the fleet, and whether the control state
// changed.
func (s *Server) measureLoad(p *plan.Plan, loads *proxy.LoadReports, remote control.LoadRates, now time.Time) (control.LoadRates, bool) {
	local := control.LoadRates{}
	changed := false
	secs := p.DemandWindow.Seconds()
	for _, svc := range p.Services {
		for _, b := range svc.Backends {
			if b.Mode != "UTILIZATION" {
				continue
			}
			n, u := loads.Swap(svc.ID, b.Index)
			own := control.GroupLoad{RPS: float64(n) / secs, Utilization: u}
			local.Add(svc.Name, b.Group.Name, own)
			all := control.LoadRates{}
			all.Add(svc.Name, b.Group.Name, own)
			all.Add(svc.Name, b.Group.Name, remote[svc.Name][b.Group.Name])
			key := svc.Name + "\x00" + b.Group.Name
			g, ok := all[svc.Name][b.Group.Name]
			if !ok {
				// No report: the measured capacity stays as it was,
				// until none has come for loadForget windows.
				if seen, known := s.loadSeen[key]; known && now.Sub(seen) >= loadForget*p.DemandWindow {
					delete(s.loadSeen, key)
					changed = s.state.SetMeasuredCapacity(svc.ID, b.Index, 0, now) || changed
				}
				continue
			}
			if s.loadSeen == nil {
				s.loadSeen = map[string]time.Time{}
			}
			s.loadSeen[key] = now
			c := math.Inf(1) // nothing reported busy: the configured capacity
			if g.Utilization > 0 {
				c = max(g.RPS*b.TargetUtilization/g.Utilization, minLoadRPS)
			}
			if s.state.SetMeasuredCapacity(svc.ID, b.Index, c, now) {
				changed = true
			}
		}
	}
	return local, changed
}

// RateLimitShare counts the security policies' throttle and
// rate_based_ban rules across a fleet (package fleet's RateLimitShare):
// the Server's rate limits add Source's counts and bans, the other
// instances', to their own on every request, and the share calls the
// function given to Follow every interval for this instance's, to
// publish. Without it (standalone) each instance counts alone.
type RateLimitShare interface {
	// Source holds the other instances' counts and bans.
	Source() *armor.RemoteSource
	// Follow gives the share the function that exports this instance's
	// counts (armor.Set.Export), called from the share's goroutine.
	Follow(export func(now time.Time, instances int) armor.RateShare)
}

// exportRateLimits is this instance's rate limit counts for the fleet.
func (s *Server) exportRateLimits(now time.Time, instances int) armor.RateShare {
	snap := s.snap.Load()
	if snap == nil {
		return armor.RateShare{}
	}
	return snap.Armor.Export(now, instances)
}
