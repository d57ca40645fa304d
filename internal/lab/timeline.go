package lab

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// TimelineEvent fails (Down) or recovers zones at an offset from the
// start of the load: `spillway simulate --at OFFSET:down=LIST` in the lab.
type TimelineEvent struct {
	At   time.Duration
	Down bool
	// Targets are zones or regions (a region stands for its zones).
	Targets []string
}

// TimelineOptions configure RunTimeline.
type TimelineOptions struct {
	// Config runs (default: seed 000's with-policy).
	Config *Config
	// Rate (requests per second, default 200) and Duration (default 10 s)
	// of the load; Step is the width of a timeline bucket (default
	// Duration/10).
	Rate     float64
	Duration time.Duration
	Step     time.Duration
	// Events fail and recover zones during the load.
	Events []TimelineEvent
	// FailMode is how zones fail (default FailListeners: connections
	// refused, simulate's --fail-as refused).
	FailMode FailMode
	// Interval is every health check's interval (default 200 ms).
	Interval time.Duration
	// Concurrency is the number of client connections (default 8).
	Concurrency int
}

func (o *TimelineOptions) defaults() error {
	if o.Config == nil {
		cs, err := SeedConfigs([]string{"with-policy"})
		if err != nil {
			return err
		}
		o.Config = &cs[0]
	}
	if o.Rate <= 0 {
		o.Rate = 200
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Step <= 0 {
		o.Step = o.Duration / 10
	}
	if o.FailMode == 0 {
		o.FailMode = FailListeners
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	return nil
}

// TimelineBucket is one step of a lab timeline: the requests sent in it
// and their answers.
type TimelineBucket struct {
	Start    time.Duration  `json:"start"`
	Requests int            `json:"requests"`
	Zones    map[string]int `json:"zones"`
	Status   map[string]int `json:"status"`
}

// Timeline is what RunTimeline measured.
type Timeline struct {
	Config   string           `json:"config"`
	Requests int              `json:"requests"`
	Status   map[string]int   `json:"status"`
	Buckets  []TimelineBucket `json:"timeline"`
}

// Failed counts the requests sent in [from, to) that were not answered
// 200.
func (tl *Timeline) Failed(from, to time.Duration) int {
	n := 0
	for _, b := range tl.Buckets {
		if b.Start >= from && b.Start < to {
			n += b.Requests - b.Status["200"]
		}
	}
	return n
}

// RunTimeline runs one config under load for o.Duration with real
// backends and a real server, failing and recovering zones at the events'
// offsets, and counts each request's answer in the step it was sent in:
// the lab's side of `spillway simulate --rate R --duration D --at ...`.
func RunTimeline(ctx context.Context, o TimelineOptions) (*Timeline, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	lo := &Options{Interval: o.Interval, Rate: o.Rate, Concurrency: o.Concurrency, FailMode: o.FailMode}
	if err := lo.defaults(); err != nil {
		return nil, err
	}
	set, cleanup, err := newSettings(o.Interval)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	p, fe, err := compile(*o.Config, set)
	if err != nil {
		return nil, err
	}
	zones := regionZones(p)
	bs, err := StartBackends(ctx, p)
	if err != nil {
		return nil, err
	}
	defer bs.Close()
	servers, stop, err := startStandalone(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("lab timeline: %w", err)
	}
	defer stop()
	urls, err := frontendURLs(servers, fe.Name)
	if err != nil {
		return nil, fmt.Errorf("lab timeline: %w", err)
	}
	if _, err := failAndConverge(ctx, servers, bs, nil, lo, "timeline"); err != nil {
		return nil, err
	}
	st := startStream(ctx, lo, urls)
	start := time.Now()
	evErr := play(ctx, bs, o, zones, start)
	if err := sleep(ctx, time.Until(start.Add(o.Duration))); err != nil && evErr == nil {
		evErr = err
	}
	samples := st.stop()
	if evErr != nil {
		return nil, evErr
	}
	return bucketSamples(o, samples, start), nil
}

// play applies the events at their offsets from start.
func play(ctx context.Context, bs *Backends, o TimelineOptions, zones map[string][]string, start time.Time) error {
	evs := slices.Clone(o.Events)
	slices.SortStableFunc(evs, func(a, b TimelineEvent) int { return int(a.At - b.At) })
	for _, ev := range evs {
		if err := sleep(ctx, time.Until(start.Add(ev.At))); err != nil {
			return err
		}
		var list []string
		for _, t := range ev.Targets {
			if zs, ok := zones[t]; ok {
				list = append(list, zs...)
			} else {
				list = append(list, t)
			}
		}
		var err error
		if ev.Down {
			err = failZones(bs, o.FailMode, list)
		} else {
			for _, z := range list {
				if err = bs.Recover(ctx, z); err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("lab timeline: event at %s: %w", ev.At, err)
		}
	}
	return nil
}

// bucketSamples counts the samples sent in [start, start+Duration) by step.
func bucketSamples(o TimelineOptions, samples []sample, start time.Time) *Timeline {
	tl := &Timeline{Config: o.Config.Name, Status: map[string]int{}}
	n := int((o.Duration + o.Step - 1) / o.Step)
	for i := range n {
		tl.Buckets = append(tl.Buckets, TimelineBucket{Start: time.Duration(i) * o.Step, Zones: map[string]int{}, Status: map[string]int{}})
	}
	for _, s := range samples {
		off := s.at.Sub(start)
		if off < 0 || off >= o.Duration {
			continue
		}
		b := &tl.Buckets[int(off/o.Step)]
		b.Requests++
		b.Status[s.code]++
		if s.zone != "" {
			b.Zones[s.zone]++
		}
		tl.Requests++
		tl.Status[s.code]++
	}
	return tl
}

// WriteTimelineTable prints a timeline: per step, each zone's share of
// the requests sent in it, and the shares answered 503 and without an
// HTTP answer.
func WriteTimelineTable(w io.Writer, tl *Timeline) error {
	zones := map[string]bool{}
	for _, b := range tl.Buckets {
		for z := range b.Zones {
			zones[z] = true
		}
	}
	zl := slices.Sorted(maps.Keys(zones))
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %d requests, %d answered 503, %d without an answer\n\n%-8s", tl.Config, tl.Requests, tl.Status["503"], tl.Status["error"], "T+")
	for _, z := range zl {
		fmt.Fprintf(&sb, " %12s", z)
	}
	fmt.Fprintf(&sb, " %7s %7s\n", "503", "error")
	for _, b := range tl.Buckets {
		fmt.Fprintf(&sb, "%-8s", b.Start)
		for _, z := range zl {
			fmt.Fprintf(&sb, " %11.1f%%", pctOf(b.Zones[z], b.Requests))
		}
		fmt.Fprintf(&sb, " %6.1f%% %6.1f%%\n", pctOf(b.Status["503"], b.Requests), pctOf(b.Status["error"], b.Requests))
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func pctOf(n, total int) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(n) / float64(total)
}
