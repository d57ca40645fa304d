//go:build linux

package globallab

import (
	"context"
	"fmt"
	"time"
)

// lostTimes are the offsets of the backends-lost timeline's events.
type lostTimes struct {
	fail, forwarded, reload, withdrawn, recover, announced time.Duration
	// kept reports whether the prefix was still announced before the
	// reload, and forwardedTo the region answering then.
	kept        bool
	forwardedTo string
}

// backendsLost is rows (c3-c5): Tokyo's backends stop while its edge
// lives. With minHealthyCapacityPercent unset the edge keeps announcing
// (2/3 of what it reaches is healthy) and forwards Tokyo's clients to
// the nearest region with capacity; reloaded with the floor at 80% it
// withdraws and the clients go to Ashburn's edge; the backends' return
// brings the prefix back after the hold-down.
func (r *run) backendsLost(ctx context.Context) error {
	const tokyo = 2
	s := r.topo.sites[tokyo]
	var k lostTimes
	script := func(ctx context.Context, t *tl) error {
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
		k.fail = t.event("Tokyo's backends stop (edge up)")
		for z := range zonesPerSite {
			if err := r.backends.StopListeners(s.Zone(z)); err != nil {
				return err
			}
		}
		at, region, err := r.waitForwarded(ctx, tokyo, 15*time.Second)
		if err != nil {
			return err
		}
		k.forwarded, k.forwardedTo = t.eventAt(at, "Tokyo edge forwards to "+region), region
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
		via, err := r.routers[tokyo].bestVia(ctx, AnycastAddr)
		if err != nil {
			return err
		}
		k.kept = via == "edge"
		if _, err := r.writeConfig(s, "edge-floor"); err != nil {
			return err
		}
		k.reload = t.event(fmt.Sprintf("Tokyo edge reloaded with minHealthyCapacityPercent %d", withdrawFloor))
		if err := r.reload(tokyo); err != nil {
			return err
		}
		at2, err := r.waitRoute(ctx, tokyo, func(via string) bool { return via != "edge" && via != "" }, 15*time.Second)
		if err != nil {
			return fmt.Errorf("the Tokyo edge did not withdraw: %w (edge log: %s)", err, tail(r.edges[tokyo].Log))
		}
		via, _ = r.routers[tokyo].bestVia(ctx, AnycastAddr)
		k.withdrawn = t.eventAt(at2, "Tokyo router: edge withdrew, best via "+r.siteVia(tokyo, via))
		return r.tokyoBack(ctx, t, tokyo, &k)
	}
	_, answers, err := r.timeline(ctx, "c3-c5: Tokyo loses its backends, its edge lives", script)
	if err != nil {
		return err
	}
	r.lostRows(answers, k)
	return nil
}

// tokyoBack brings site i's backends back and waits for its prefix.
func (r *run) tokyoBack(ctx context.Context, t *tl, i int, k *lostTimes) error {
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	k.recover = t.event("Tokyo's backends back")
	s := r.topo.sites[i]
	for z := range zonesPerSite {
		if err := r.backends.Recover(ctx, s.Zone(z)); err != nil {
			return err
		}
	}
	at, err := r.waitRoute(ctx, i, func(via string) bool { return via == "edge" }, 30*time.Second)
	if err != nil {
		return fmt.Errorf("the Tokyo edge did not announce again: %w (edge log: %s)", err, tail(r.edges[i].Log))
	}
	k.announced = t.eventAt(at, "Tokyo router: edge route back")
	return sleep(ctx, 2*time.Second)
}

// waitForwarded polls through site i's client until the site's own
// edge answers from another region, and returns when and which region.
func (r *run) waitForwarded(ctx context.Context, i int, limit time.Duration) (time.Time, string, error) {
	s, c := r.topo.sites[i], r.clients[i]
	deadline := time.Now().Add(limit)
	for {
		a := get(ctx, c.fresh, anycastURL())
		if a.OK() && a.Edge == s.Key && a.Region() != s.Region {
			return time.Now(), a.Region(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, "", fmt.Errorf("the %s edge does not forward elsewhere after %s: last answer status %d edge %q zone %q %v", s.City, limit, a.Status, a.Edge, a.Zone, a.Err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return time.Time{}, "", err
		}
	}
}

// lostRows adds rows c3-c5 from the backends-lost timeline.
func (r *run) lostRows(answers [][]answer, k lostTimes) {
	tokyo := answers[2]
	end := time.Duration(1 << 62)
	fwd, fwdOK := settled(tokyo, k.fail, k.reload, func(a answer) bool { return a.OK() && a.Edge == "ane" && a.Region() == "us-east4" })
	move, moved := settled(tokyo, k.reload, k.recover, viaEdge("use"))
	back, returned := settled(tokyo, k.recover, end, viaEdge("ane"))
	r.rep.add(Row{
		ID:       "c3",
		What:     "Tokyo loses its backends, edge up, minHealthyCapacityPercent unset",
		Expected: "prefix kept; Tokyo edge forwards onward to us-east4 (nearest by RTT)",
		Measured: fmt.Sprintf("prefix kept: %v; via the Tokyo edge from %s after %.1fs, %d failed", k.kept, k.forwardedTo, fwd.Seconds(), failed(tokyo, k.fail, k.reload)),
		Verdict:  verdict(k.kept && fwdOK),
		Numbers:  map[string]float64{"forwardedAfterS": fwd.Seconds(), "failed": float64(failed(tokyo, k.fail, k.reload))},
	})
	r.rep.add(Row{
		ID:       "c4",
		What:     fmt.Sprintf("the same, reloaded with minHealthyCapacityPercent %d", withdrawFloor),
		Expected: "withdrawn (8 of 12 endpoints healthy: 67%); Tokyo clients → Ashburn",
		Measured: fmt.Sprintf("withdrawn %.1fs after the reload; Tokyo clients on Ashburn after %.1fs, %d failed", (k.withdrawn - k.reload).Seconds(), move.Seconds(), failed(tokyo, k.reload, k.recover)),
		Verdict:  verdict(moved),
		Numbers:  map[string]float64{"withdrawnAfterS": (k.withdrawn - k.reload).Seconds(), "movedAfterS": move.Seconds(), "failed": float64(failed(tokyo, k.reload, k.recover))},
	})
	r.rep.add(Row{
		ID:       "c5",
		What:     "Tokyo's backends back",
		Expected: fmt.Sprintf("announced after the %ds hold-down; Tokyo clients → Tokyo", holdDownSec),
		Measured: fmt.Sprintf("announced after %.1fs; Tokyo clients back after %.1fs, %d failed", (k.announced - k.recover).Seconds(), back.Seconds(), failed(tokyo, k.recover, end)),
		Verdict:  verdict(returned && k.announced-k.recover >= holdDownSec*time.Second),
		Numbers:  map[string]float64{"announcedAfterS": (k.announced - k.recover).Seconds(), "backAfterS": back.Seconds(), "failed": float64(failed(tokyo, k.recover, end))},
	})
}
