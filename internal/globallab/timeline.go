//go:build linux

package globallab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// timelineStep is the width of a timeline window.
const timelineStep = time.Second

// tl is a running timeline: the script's events, timed from its start.
type tl struct {
	r      *run
	start  time.Time
	mu     sync.Mutex
	events []Event
}

// event records what happened now and returns its offset.
func (t *tl) event(what string) time.Duration { return t.eventAt(time.Now(), what) }

// eventAt records what happened at and returns its offset.
func (t *tl) eventAt(at time.Time, what string) time.Duration {
	off := at.Sub(t.start)
	t.mu.Lock()
	t.events = append(t.events, Event{At: off, What: what})
	t.mu.Unlock()
	return off
}

// timeline runs script while every geography's clients send SiteRate
// rps, each request on a new connection, to the anycast address; it
// returns the windows and each geography's answers.
func (r *run) timeline(ctx context.Context, name string, script func(context.Context, *tl) error) (Timeline, [][]answer, error) {
	t := &tl{r: r, start: time.Now()}
	stop := make(chan struct{})
	answers := make([][]answer, len(r.clients))
	var wg sync.WaitGroup
	for i, c := range r.clients {
		wg.Go(func() {
			answers[i] = paced(ctx, r.o.SiteRate, stop, 2*time.Minute, func(ctx context.Context) answer {
				return get(ctx, c.fresh, anycastURL())
			})
		})
	}
	err := script(ctx, t)
	close(stop)
	loaded := time.Since(t.start)
	wg.Wait()
	slices.SortFunc(t.events, func(a, b Event) int { return int(a.At - b.At) })
	out := Timeline{Name: name, Step: timelineStep, Events: t.events}
	for i, as := range answers {
		key := r.topo.sites[i].Key
		for _, a := range as {
			w := int(a.At / timelineStep)
			if time.Duration(w+1)*timelineStep > loaded {
				continue // the last window is not whole
			}
			for len(out.Windows) <= w {
				out.Windows = append(out.Windows, map[string]*Counts{})
			}
			c := out.Windows[w][key]
			if c == nil {
				c = &Counts{ByEdge: map[string]int{}}
				out.Windows[w][key] = c
			}
			if a.OK() {
				c.ByEdge[a.Edge]++
			} else {
				c.Failed++
			}
		}
	}
	r.rep.Timelines = append(r.rep.Timelines, out)
	return out, answers, err
}

// settled returns how long after from the answers in [from, to) settle
// into pred: the offset of the earliest t from which every answer sent
// before to satisfies pred. false when the last one does not (or there
// is none). Requests sent within requestTimeout of to are left out:
// they may still be in flight when the next event changes the route
// under them.
func settled(as []answer, from, to time.Duration, pred func(answer) bool) (time.Duration, bool) {
	t, ok := from, false
	to -= requestTimeout
	for _, a := range as {
		if a.At < from || a.At >= to {
			continue
		}
		if pred(a) {
			if !ok {
				t, ok = a.At, true
			}
		} else {
			ok = false
		}
	}
	return t - from, ok
}

// failed counts the failed answers sent in [from, to).
func failed(as []answer, from, to time.Duration) int {
	n := 0
	for _, a := range as {
		if a.At >= from && a.At < to && !a.OK() {
			n++
		}
	}
	return n
}

// viaEdge is a predicate: answered through site key's edge.
func viaEdge(key string) func(answer) bool {
	return func(a answer) bool { return a.OK() && a.Edge == key }
}

// siteVia names the site a router's best route leads to ("edge": its
// own).
func (r *run) siteVia(i int, via string) string {
	if via == "edge" {
		return r.topo.sites[i].City + "'s own edge"
	}
	return cityOf(strings.TrimPrefix(via, "site_"))
}

// waitDNS polls the GSLB with ECS ecs until it answers want, and
// returns when.
func (r *run) waitDNS(ctx context.Context, ecs, want string, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		got, err := r.clients[1].query(ctx, r.topo.sites[1].DNSAddr(), GSLBName, ecs)
		if err == nil && slices.Equal(got, []string{want}) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the GSLB still answers %v (%v) for ECS %s after %s, want %s", got, err, ecs, limit, want)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
}

// both runs a and b at once and returns the first error.
func both(a, b func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- b() }()
	errA := a()
	errB := <-errc
	if errA != nil {
		return errA
	}
	return errB
}

// killTimes are the offsets of the site-kill timeline's events.
type killTimes struct {
	kill, withdrawn, dnsAway, recover, announced, dnsBack time.Duration
}

// siteKill is rows (c1, c2, d4): Frankfurt loses power under load; its
// router withdraws the anycast prefix when the edge's BGP hold timer
// runs out, European clients go to Ashburn and the GSLB answers Berlin
// with Ashburn; then the power comes back and both return.
func (r *run) siteKill(ctx context.Context) error {
	const eu = 1
	sites := r.topo.sites
	var k killTimes
	script := func(ctx context.Context, t *tl) error {
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
		k.kill = t.event("Frankfurt loses power (links down, edge and regional killed)")
		if err := r.killSite(ctx, eu); err != nil {
			return err
		}
		err := both(func() error {
			at, err := r.waitRoute(ctx, eu, func(via string) bool { return via != "edge" && via != "" }, 15*time.Second)
			if err == nil {
				via, _ := r.routers[eu].bestVia(ctx, AnycastAddr)
				k.withdrawn = t.eventAt(at, "Frankfurt router: edge route gone, best via "+r.siteVia(eu, via))
			}
			return err
		}, func() error {
			at, err := r.waitDNS(ctx, BerlinNet, sites[0].EdgeUnicast(), 15*time.Second)
			if err == nil {
				k.dnsAway = t.eventAt(at, "GSLB: Berlin → Ashburn")
			}
			return err
		})
		if err != nil {
			return err
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
		k.recover = t.event("Frankfurt power back (links up, servers start)")
		if err := r.restoreSite(ctx, eu); err != nil {
			return err
		}
		return r.waitBack(ctx, t, eu, &k)
	}
	_, answers, err := r.timeline(ctx, "c1-c2: Frankfurt dies and comes back", script)
	if err != nil {
		return err
	}
	r.killRows(answers, k)
	return nil
}

// waitBack waits for site i's prefix and the GSLB's Berlin answer to
// return, then for the traffic to settle.
func (r *run) waitBack(ctx context.Context, t *tl, i int, k *killTimes) error {
	err := both(func() error {
		at, err := r.waitRoute(ctx, i, func(via string) bool { return via == "edge" }, 30*time.Second)
		if err != nil {
			return fmt.Errorf("prefix not announced again: %w (edge log: %s)", err, tail(r.edges[i].Log))
		}
		k.announced = t.eventAt(at, "Frankfurt router: edge route back")
		return nil
	}, func() error {
		at, err := r.waitDNS(ctx, BerlinNet, r.topo.sites[i].EdgeUnicast(), 30*time.Second)
		if err == nil {
			k.dnsBack = t.eventAt(at, "GSLB: Berlin → Frankfurt")
		}
		return err
	})
	if err != nil {
		return err
	}
	return sleep(ctx, 2*time.Second)
}

// killRows adds rows c1, c2 and d4 from the site-kill timeline.
func (r *run) killRows(answers [][]answer, k killTimes) {
	eu := answers[1]
	end := time.Duration(1 << 62)
	move, moved := settled(eu, k.kill, k.recover, viaEdge("use"))
	back, returned := settled(eu, k.recover, end, viaEdge("euw"))
	others := failed(answers[0], 0, end) + failed(answers[2], 0, end)
	r.rep.add(Row{
		ID:       "c1",
		What:     "Frankfurt loses power under load (BGP hold time 3 s)",
		Expected: "withdrawn ≤ 3 s + polling; Frankfurt clients → Ashburn; Ashburn, Tokyo clients: 0 failed",
		Measured: fmt.Sprintf("withdrawn after %.1fs; Frankfurt clients on Ashburn after %.1fs, %d failed; others %d failed",
			(k.withdrawn - k.kill).Seconds(), move.Seconds(), failed(eu, k.kill, k.recover), others),
		Verdict: verdict(moved && k.withdrawn-k.kill <= 5*time.Second && others == 0),
		Numbers: map[string]float64{"withdrawnAfterS": (k.withdrawn - k.kill).Seconds(), "movedAfterS": move.Seconds(),
			"failedFrankfurt": float64(failed(eu, k.kill, k.recover)), "failedOthers": float64(others)},
	})
	r.rep.add(Row{
		ID:       "c2",
		What:     "Frankfurt's power back (failback)",
		Expected: "announced at the new edge's first good probes (a first announcement has no hold-down); Frankfurt clients → Frankfurt",
		Measured: fmt.Sprintf("announced after %.1fs; Frankfurt clients back after %.1fs, %d failed", (k.announced - k.recover).Seconds(), back.Seconds(), failed(eu, k.recover, end)),
		Verdict:  verdict(returned),
		Numbers:  map[string]float64{"announcedAfterS": (k.announced - k.recover).Seconds(), "backAfterS": back.Seconds(), "failedFailback": float64(failed(eu, k.recover, end))},
	})
	r.rep.add(Row{
		ID:       "d4",
		What:     "GSLB: Berlin while Frankfurt is down, and after",
		Expected: "Ashburn (next by RTT from europe-west10), then Frankfurt again",
		Measured: fmt.Sprintf("Ashburn %.1fs after the power loss; Frankfurt %.1fs after power-on", (k.dnsAway - k.kill).Seconds(), (k.dnsBack - k.recover).Seconds()),
		Verdict:  Pass,
		Numbers:  map[string]float64{"dnsAwayAfterS": (k.dnsAway - k.kill).Seconds(), "dnsBackAfterS": (k.dnsBack - k.recover).Seconds()},
	})
}
