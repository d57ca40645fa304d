//go:build linux

package globallab

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// lostTimes are the offsets of the backends-lost timeline's events.
type lostTimes struct {
	fail, forwarded, reload, withdrawn, recover, announced time.Duration
	// kept reports whether the prefix was still announced before the
	// reload, and forwardedTo the region answering then.
	kept        bool
	forwardedTo string
	// degrade is when Ashburn's edge was reloaded with a degraded
	// threshold, prepended when Frankfurt's router saw Ashburn's route
	// with the longer path (path), ashburnKept whether Ashburn's router
	// kept its own edge, and undegraded when Frankfurt's router saw the
	// unprepended path again after the backends came back.
	degrade, prepended, undegraded time.Duration
	path                           string
	ashburnKept                    bool
}

// The sites' indexes.
const ashburn, frankfurt, tokyo = 0, 1, 2

// backendsLost is rows (c3-c5): Tokyo's backends stop while its edge
// lives. With minHealthyCapacityPercent unset the edge keeps announcing
// (2/3 of what it reaches is healthy) and forwards Tokyo's clients to
// the nearest region with capacity; reloaded with the floor at 80% it
// withdraws and the clients go to Ashburn's edge; the backends' return
// brings the prefix back after the hold-down.
func (r *run) backendsLost(ctx context.Context) error {
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
		if err := r.degrade(ctx, t, &k); err != nil {
			return err
		}
		return r.tokyoBack(ctx, t, tokyo, &k)
	}
	_, answers, err := r.timeline(ctx, "c3-c5, e1-e2: Tokyo loses its backends, its edge lives; Ashburn degrades", script)
	if err != nil {
		return err
	}
	r.lostRows(answers, k)
	return nil
}

// degrade is rows e1-e2's first half, while Tokyo's edge is withdrawn
// and its clients are on Ashburn's: Ashburn's edge is reloaded with
// degraded.belowHealthyCapacityPercent 80, which its healthy share
// (Tokyo's backends down: 67%) is below, so it announces with its AS
// prepended. Frankfurt's router sees the longer path; Tokyo's router,
// which has no edge of its own, now prefers Frankfurt (shorter path)
// over Ashburn (nearer); Ashburn's own router keeps its edge.
func (r *run) degrade(ctx context.Context, t *tl, k *lostTimes) error {
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	if _, err := r.writeConfig(r.topo.sites[ashburn], "edge-degraded"); err != nil {
		return err
	}
	k.degrade = t.event(fmt.Sprintf("Ashburn edge reloaded with degraded below %d%%, prepend %d", degradedBelow, degradedPrepend))
	if err := r.reload(ashburn); err != nil {
		return err
	}
	want := pathLen(degradedPrepend)
	at, path, err := r.waitPath(ctx, frankfurt, func(n int) bool { return n == want }, 15*time.Second)
	if err != nil {
		return fmt.Errorf("Frankfurt's router never saw Ashburn's prepended path: %w (edge log: %s)", err, tail(r.edges[ashburn].Log))
	}
	k.path = path
	k.prepended = t.eventAt(at, "Frankfurt router: Ashburn's route has AS path "+path)
	at, err = r.waitRoute(ctx, tokyo, func(via string) bool { return via == "site_euw" }, 15*time.Second)
	if err != nil {
		return fmt.Errorf("Tokyo's router kept Ashburn's prepended route: %w", err)
	}
	t.eventAt(at, "Tokyo router: best via Frankfurt (shorter AS path)")
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	via, err := r.routers[ashburn].bestVia(ctx, AnycastAddr)
	k.ashburnKept = err == nil && via == "edge"
	return err
}

// pathLen is the length of the AS path with which a router sees another
// site's edge route: the site's AS, then the edge's, prepended extra
// times more.
func pathLen(extra int) int { return 2 + extra }

// waitPath polls site i's router until ok(the length of the AS path of
// Ashburn's edge route as it learned it from Ashburn's router), and
// returns when and the path.
func (r *run) waitPath(ctx context.Context, i int, ok func(n int) bool, limit time.Duration) (time.Time, string, error) {
	deadline := time.Now().Add(limit)
	for {
		path, err := r.routers[i].asPath(ctx, AnycastAddr, "site_"+r.topo.sites[ashburn].Key)
		if err == nil && ok(len(strings.Fields(path))) {
			return time.Now(), path, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, path, fmt.Errorf("AS path %q after %s (%v)", path, limit, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return time.Time{}, "", err
		}
	}
}

// tokyoBack brings site i's backends back and waits for its prefix, and
// for Ashburn's prepend to go after its hold-down.
func (r *run) tokyoBack(ctx context.Context, t *tl, i int, k *lostTimes) error {
	k.recover = t.event("Tokyo's backends back")
	s := r.topo.sites[i]
	for z := range zonesPerSite {
		if err := r.backends.Recover(ctx, s.Zone(z)); err != nil {
			return err
		}
	}
	err := both(func() error {
		at, err := r.waitRoute(ctx, i, func(via string) bool { return via == "edge" }, 30*time.Second)
		if err != nil {
			return fmt.Errorf("the Tokyo edge did not announce again: %w (edge log: %s)", err, tail(r.edges[i].Log))
		}
		k.announced = t.eventAt(at, "Tokyo router: edge route back")
		return nil
	}, func() error {
		at, path, err := r.waitPath(ctx, frankfurt, func(n int) bool { return n == pathLen(0) }, 30*time.Second)
		if err != nil {
			return fmt.Errorf("Ashburn's route stays prepended: %w (edge log: %s)", err, tail(r.edges[ashburn].Log))
		}
		k.undegraded = t.eventAt(at, "Frankfurt router: Ashburn's route has AS path "+path)
		return nil
	})
	if err != nil {
		return err
	}
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

// lostRows adds rows c3-c5 and e1-e2 from the backends-lost timeline.
func (r *run) lostRows(answers [][]answer, k lostTimes) {
	tk := answers[tokyo]
	end := time.Duration(1 << 62)
	fwd, fwdOK := settled(tk, k.fail, k.reload, func(a answer) bool { return a.OK() && a.Edge == "ane" && a.Region() == "us-east4" })
	move, moved := settled(tk, k.reload, k.degrade, viaEdge("use"))
	back, returned := settled(tk, k.recover, end, viaEdge("ane"))
	r.rep.add(Row{
		ID:       "c3",
		What:     "Tokyo loses its backends, edge up, minHealthyCapacityPercent unset",
		Expected: "prefix kept; Tokyo edge forwards onward to us-east4 (nearest by RTT)",
		Measured: fmt.Sprintf("prefix kept: %v; via the Tokyo edge from %s after %.1fs, %d failed", k.kept, k.forwardedTo, fwd.Seconds(), failed(tk, k.fail, k.reload)),
		Verdict:  verdict(k.kept && fwdOK),
		Numbers:  map[string]float64{"forwardedAfterS": fwd.Seconds(), "failed": float64(failed(tk, k.fail, k.reload))},
	})
	r.rep.add(Row{
		ID:       "c4",
		What:     fmt.Sprintf("the same, reloaded with minHealthyCapacityPercent %d", withdrawFloor),
		Expected: "withdrawn (8 of 12 endpoints healthy: 67%); Tokyo clients → Ashburn",
		Measured: fmt.Sprintf("withdrawn %.1fs after the reload; Tokyo clients on Ashburn after %.1fs, %d failed", (k.withdrawn - k.reload).Seconds(), move.Seconds(), failed(tk, k.reload, k.degrade)),
		Verdict:  verdict(moved),
		Numbers:  map[string]float64{"withdrawnAfterS": (k.withdrawn - k.reload).Seconds(), "movedAfterS": move.Seconds(), "failed": float64(failed(tk, k.reload, k.degrade))},
	})
	r.rep.add(Row{
		ID:       "c5",
		What:     "Tokyo's backends back",
		Expected: fmt.Sprintf("announced after the %ds hold-down; Tokyo clients → Tokyo", holdDownSec),
		Measured: fmt.Sprintf("announced after %.1fs; Tokyo clients back after %.1fs, %d failed", (k.announced - k.recover).Seconds(), back.Seconds(), failed(tk, k.recover, end)),
		Verdict:  verdict(returned && k.announced-k.recover >= holdDownSec*time.Second),
		Numbers:  map[string]float64{"announcedAfterS": (k.announced - k.recover).Seconds(), "backAfterS": back.Seconds(), "failed": float64(failed(tk, k.recover, end))},
	})
	r.degradeRows(answers, k)
}

// degradeRows adds rows e1-e2: Ashburn's controlled anycast.
func (r *run) degradeRows(answers [][]answer, k lostTimes) {
	tk, as := answers[tokyo], answers[ashburn]
	away, awayOK := settled(tk, k.degrade, k.recover, viaEdge("euw"))
	stayed, sent := 0, 0
	for _, a := range as {
		if a.At >= k.degrade && a.At < k.recover {
			sent++
			if viaEdge("use")(a) {
				stayed++
			}
		}
	}
	prepended := len(strings.Fields(k.path)) == pathLen(degradedPrepend)
	r.rep.add(Row{
		ID:   "e1",
		What: fmt.Sprintf("controlled anycast: Ashburn's edge degraded below %d%% (67%% healthy), Tokyo's withdrawn", degradedBelow),
		Expected: fmt.Sprintf("Ashburn's route prepended %d times; Tokyo's router prefers Frankfurt (shorter AS path) to Ashburn (nearer); Ashburn's router keeps its own edge (local preference before AS path)",
			degradedPrepend),
		Measured: fmt.Sprintf("AS path %s at Frankfurt's router %.1fs after the reload; Tokyo clients on Frankfurt after %.1fs, %d failed; Ashburn clients %d of %d on Ashburn's edge",
			k.path, (k.prepended - k.degrade).Seconds(), away.Seconds(), failed(tk, k.degrade, k.recover), stayed, sent),
		Verdict: verdict(prepended && awayOK && k.ashburnKept && sent > 0 && stayed == sent),
		Numbers: map[string]float64{"prependedAfterS": (k.prepended - k.degrade).Seconds(), "tokyoMovedAfterS": away.Seconds(),
			"failedTokyo": float64(failed(tk, k.degrade, k.recover)), "ashburnStayed": float64(stayed), "ashburnSent": float64(sent)},
	})
	after := k.undegraded - k.recover
	r.rep.add(Row{
		ID:       "e2",
		What:     "Ashburn's healthy capacity back (hysteresis)",
		Expected: fmt.Sprintf("prepend gone after the %ds hold-down, not before", holdDownSec),
		Measured: fmt.Sprintf("AS path back to %d ASes %.1fs after the backends came back; Ashburn clients %d failed in the whole timeline", pathLen(0), after.Seconds(), failed(as, 0, time.Duration(1<<62))),
		Verdict:  verdict(after >= holdDownSec*time.Second && failed(as, 0, time.Duration(1<<62)) == 0),
		Numbers:  map[string]float64{"unprependedAfterS": after.Seconds()},
	})
}
