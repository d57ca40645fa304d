package serve

import (
	"time"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/plan"
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
	// ended at at, of length window (rates of zero are left out), from
	// the Server's loop at the end of every window. It must not block;
	// the Server does not touch rates afterwards.
	Publish(at time.Time, window time.Duration, rates control.DemandRates)
	// Remote returns the sum of the other live instances' offered rates,
	// read from the Server's loop once per window. It must not block,
	// and neither side may modify the map it returns. Names the plan does
	// not know are ignored.
	Remote() control.DemandRates
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
	if sh != nil {
		sh.Publish(now, p.DemandWindow, local)
	}
	if changed {
		s.publish(p, nil)
	}
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
