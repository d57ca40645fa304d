package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spillwaylb/spillway/internal/lab"
)

// runTimeline runs spillway lab's timeline mode (--at) on the first
// config.
func (c *labCmd) runTimeline(ctx context.Context, configs []lab.Config, stdout, stderr io.Writer) error {
	if len(configs) != 1 && (c.set["only"] || c.set["config"]) {
		fmt.Fprintln(stderr, "spillway lab: --at runs one config: give --only with one name, or --config")
		return errUsage
	}
	if c.fleet {
		fmt.Fprintln(stderr, "spillway lab: --at runs one server; it cannot be combined with --fleet")
		return errUsage
	}
	evs, err := parseEvents(c.at)
	if err != nil {
		return err
	}
	cfg := configs[0]
	if !c.set["only"] && !c.set["config"] {
		cs, err := lab.SeedConfigs([]string{"with-policy"})
		if err != nil {
			return err
		}
		cfg = cs[0]
	}
	mode := lab.FailListeners
	if c.set["fail-mode"] {
		mode = lab.FailMode(c.failMode)
	}
	o := lab.TimelineOptions{Config: &cfg, Rate: c.rate, Duration: c.duration, Step: c.step, FailMode: mode, Interval: c.interval}
	for _, ev := range evs {
		o.Events = append(o.Events, lab.TimelineEvent{At: ev.At, Down: ev.Down, Targets: ev.Targets})
	}
	fmt.Fprintf(stderr, "%s: %.0f rps for %s...\n", cfg.Name, o.Rate, o.Duration)
	tl, err := lab.RunTimeline(ctx, o)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(stdout, tl)
	}
	return lab.WriteTimelineTable(stdout, tl)
}
