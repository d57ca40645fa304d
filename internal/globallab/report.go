//go:build linux

package globallab

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdicts.
const (
	Pass = "ok"
	Fail = "FAIL"
	Info = "info" // a measurement with nothing to compare it with
)

// Report is a run's outcome: the table's rows and the timelines.
type Report struct {
	Rows      []Row      `json:"rows"`
	Timelines []Timeline `json:"timelines"`
	// Elapsed is the run's wall time, set-up and clean-up included.
	Elapsed time.Duration `json:"-"`
	// ElapsedSeconds is Elapsed, for JSON.
	ElapsedSeconds float64 `json:"elapsedSeconds"`
}

// Row is one line of the table.
type Row struct {
	ID       string `json:"id"` // a1, b1, c1, ...
	What     string `json:"what"`
	Expected string `json:"expected"`
	Measured string `json:"measured"`
	Verdict  string `json:"verdict"`
	// Numbers holds the row's measurements for scripts (milliseconds,
	// counts, shares).
	Numbers map[string]float64 `json:"numbers,omitempty"`
}

// Timeline is a scenario's requests per window, by client geography.
// Durations (Step, Event.At) are nanoseconds in JSON.
type Timeline struct {
	Name   string        `json:"name"`
	Step   time.Duration `json:"step"`
	Events []Event       `json:"events"`
	// Windows[w][geo] counts the requests sent in window w by the
	// clients of geo (a site key).
	Windows []map[string]*Counts `json:"windows"`
}

// Event is something the lab did or saw during a timeline, at an offset
// from its start.
type Event struct {
	At   time.Duration `json:"at"`
	What string        `json:"what"`
}

// Counts are one window's requests from one geography: answered by each
// edge (site key), and failed.
type Counts struct {
	ByEdge map[string]int `json:"byEdge"`
	Failed int            `json:"failed"`
}

func (r *Report) add(row Row) { r.Rows = append(r.Rows, row) }

// Failed reports whether any row failed.
func (r *Report) Failed() bool {
	for _, row := range r.Rows {
		if row.Verdict == Fail {
			return true
		}
	}
	return false
}

// WriteJSON writes the report as JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the table, then each timeline.
func WriteTable(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "spillway lab --global: three sites in network namespaces, BGP anycast, two proxy layers, a GSLB (%.0fs)\n\n", r.ElapsedSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tWHAT\tEXPECTED\tMEASURED\tVERDICT")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.ID, row.What, row.Expected, row.Measured, row.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range r.Timelines {
		writeTimeline(w, t)
	}
	return nil
}

// writeTimeline prints one timeline: a line per window with each
// geography's answers by edge and failures, and the events in it.
func writeTimeline(w io.Writer, t Timeline) {
	fmt.Fprintf(w, "\n%s (per %s; per client geography: answers by edge site, x = failed)\n", t.Name, t.Step)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	sites := Sites()
	hdr := []string{"t"}
	for _, s := range sites {
		hdr = append(hdr, s.City+" clients")
	}
	fmt.Fprintln(tw, strings.Join(append(hdr, "events"), "\t"))
	for i, win := range t.Windows {
		start := time.Duration(i) * t.Step
		cols := []string{fmt.Sprintf("%4.1fs", start.Seconds())}
		for _, s := range sites {
			cols = append(cols, win[s.Key].String())
		}
		var evs []string
		for _, e := range t.Events {
			if e.At >= start && e.At < start+t.Step {
				evs = append(evs, fmt.Sprintf("%.2fs %s", e.At.Seconds(), e.What))
			}
		}
		fmt.Fprintln(tw, strings.Join(append(cols, strings.Join(evs, "; ")), "\t"))
	}
	tw.Flush()
}

// String is e.g. "euw 8 use 2 x1".
func (c *Counts) String() string {
	if c == nil {
		return "-"
	}
	var parts []string
	for _, s := range Sites() {
		if n := c.ByEdge[s.Key]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s.Key, n))
		}
	}
	if c.Failed > 0 {
		parts = append(parts, fmt.Sprintf("x%d", c.Failed))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func verdict(ok bool) string {
	if ok {
		return Pass
	}
	return Fail
}
