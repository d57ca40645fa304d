package serve

import (
	"context"

	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/probe"
)

// ProbeShare divides probing among a fleet's instances (package fleet's
// ProbeShare). With Options.ProbeShare set, the Server no longer hands
// its prober every target nor feeds its own probe results to its health
// state: it tells the share the plan's targets, gives the share its
// results, and probes and believes only what the share says (ProbeOnly,
// ObserveShared). Without it (standalone) nothing changes.
type ProbeShare interface {
	// SetTargets is told every target of the plan in force, at New and
	// on each reload, from the Server's loop. It must not block.
	SetTargets([]probe.SharedTarget)
	// Own receives each of this instance's probe results, from the probe
	// goroutines. It must be safe for concurrent use, return quickly and
	// not call back into the Server.
	Own(probe.Result)
}

// ProbeOnly sets the targets this instance probes (those the fleet gave
// it). It waits for removed targets' probes to stop, so it must not be
// called from ProbeShare.Own.
func (s *Server) ProbeOnly(targets []probe.Target) { s.probe.prober.Update(targets) }

// ObserveShared sets the health of target t's endpoints to the fleet's
// verdict for it (thresholds already applied by the instances probing
// it). It returns ctx's error if ctx ends first, nil once the verdict is
// queued (or the Server has stopped).
func (s *Server) ObserveShared(ctx context.Context, t probe.Target, healthy bool, detail string) error {
	select {
	case s.events <- event{probe: &probe.Result{Target: t, OK: healthy, Detail: detail, At: s.now()}, verdict: true}:
		return nil
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sharedTarget describes target t, first met as endpoint e's probe
// with check hc, for a ProbeShare: keyed by address and the check's
// name, placed in e's region.
func sharedTarget(p *plan.Plan, t probe.Target, e *plan.Endpoint, hc *plan.HealthCheck) probe.SharedTarget {
	st := probe.SharedTarget{Target: t, Key: t.Addr + "/" + hc.Name, Healthy: hc.HealthyThreshold, Unhealthy: hc.UnhealthyThreshold}
	if g := e.Group; g != nil && g.RegionID >= 0 && g.RegionID < len(p.Regions) {
		st.Region, st.Layered = p.Regions[g.RegionID], p.RegionalLayers[g.RegionID] != nil
	}
	return st
}
