package control

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// The bounds of a Summary (Bound): what one instance publishes stays
// under MaxSummaryBytes of JSON whatever its config, so a fleet's
// summaries never make etcd's values large.
const (
	MaxSummaryServices  = 64
	MaxSummarySplits    = 16
	MaxSummarySplitSvcs = 8
	MaxSummaryGroups    = 128
	MaxSummaryDown      = 128
	// MaxSummaryName bounds every name and address in a summary (a
	// longer one is cut).
	MaxSummaryName = 64
	// MaxSummaryBytes bounds a summary's JSON: the bounds above keep a
	// summary well under it; the fleet refuses to publish one over it.
	MaxSummaryBytes = 64 << 10
)

// Summary is what one fleet instance publishes about itself (package
// fleet's SummaryShare) for the fleet-wide view of every instance's
// dashboard (docs/operations.md,
// "Fleet view"): its config, its request rates and weighted splits over
// the dashboard's last 10 s, and its health view as a list of the
// endpoints its health checks find down. Bound keeps it small.
type Summary struct {
	Instance string    `json:"instance"`
	Region   string    `json:"region,omitempty"`
	At       time.Time `json:"at"`
	Version  string    `json:"version,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	// ConfigHash is the dashboard's config hash (12 hex digits of the
	// config in force, before the runtime overlay); ConfigRevision the
	// fleet's revision in force (0: the --config file); Stale that the
	// instance lost etcd.
	ConfigHash     string `json:"configHash"`
	ConfigRevision int64  `json:"configRevision,omitempty"`
	Stale          bool   `json:"stale,omitempty"`
	// ActiveConnections are the client connections open now.
	ActiveConnections int64 `json:"activeConnections"`
	// Rate is the instance's requests per second over every backend
	// service, ErrorRate the share answered 5xx.
	Rate      float64          `json:"rate"`
	ErrorRate float64          `json:"errorRate"`
	Services  []SummaryService `json:"services,omitempty"`
	Splits    []SummarySplit   `json:"splits,omitempty"`
	Groups    []SummaryGroup   `json:"groups,omitempty"`
	// Truncated says that Bound cut lists: the instance's health view
	// may be incomplete, so it is not counted as seeing anything up.
	Truncated bool `json:"truncated,omitempty"`
}

// SummaryService is one backend service's request rate and 5xx share.
type SummaryService struct {
	Name      string  `json:"name"`
	Rate      float64 `json:"rate"`
	ErrorRate float64 `json:"errorRate"`
}

// SummarySplit is one weighted split of a frontend's URL map, measured
// on this instance (Measured false: no request in the window).
type SummarySplit struct {
	Frontend string            `json:"frontend"`
	Source   string            `json:"source"`
	Measured bool              `json:"measured"`
	Services []SummaryWeighted `json:"services"`
}

// SummaryWeighted is one service of a split: configured and measured
// shares.
type SummaryWeighted struct {
	Service    string  `json:"service"`
	Configured float64 `json:"configured"`
	Measured   float64 `json:"measured"`
}

// SummaryGroup is one instance or endpoint group as one instance's
// health checks see it: how many endpoints, how many healthy, and the
// addresses of those found down (UNHEALTHY; never probed counts as up,
// as it serves).
type SummaryGroup struct {
	Name    string   `json:"name"`
	Zone    string   `json:"zone,omitempty"`
	Members int      `json:"members"`
	Healthy int      `json:"healthy"`
	Down    []string `json:"down,omitempty"`
}

// Bound cuts s to the summary bounds, setting Truncated when it cut a
// list (names are cut silently: they only label).
func Bound(s Summary) Summary {
	cut := func(v string) string {
		if len(v) > MaxSummaryName {
			return v[:MaxSummaryName]
		}
		return v
	}
	s.Instance, s.Region, s.Version, s.ConfigHash = cut(s.Instance), cut(s.Region), cut(s.Version), cut(s.ConfigHash)
	if len(s.Services) > MaxSummaryServices {
		s.Services, s.Truncated = s.Services[:MaxSummaryServices], true
	}
	s.Services = slices.Clone(s.Services)
	for i := range s.Services {
		s.Services[i].Name = cut(s.Services[i].Name)
	}
	if len(s.Splits) > MaxSummarySplits {
		s.Splits, s.Truncated = s.Splits[:MaxSummarySplits], true
	}
	s.Splits = slices.Clone(s.Splits)
	for i := range s.Splits {
		sp := &s.Splits[i]
		sp.Frontend, sp.Source = cut(sp.Frontend), cut(sp.Source)
		sp.Services = slices.Clone(sp.Services[:min(len(sp.Services), MaxSummarySplitSvcs)])
		for j := range sp.Services {
			sp.Services[j].Service = cut(sp.Services[j].Service)
		}
	}
	if len(s.Groups) > MaxSummaryGroups {
		s.Groups, s.Truncated = s.Groups[:MaxSummaryGroups], true
	}
	s.Groups = slices.Clone(s.Groups)
	down := 0
	for i := range s.Groups {
		g := &s.Groups[i]
		g.Name, g.Zone = cut(g.Name), cut(g.Zone)
		keep := max(0, min(len(g.Down), MaxSummaryDown-down))
		if keep < len(g.Down) {
			s.Truncated = true
		}
		g.Down = slices.Clone(g.Down[:keep])
		for j := range g.Down {
			g.Down[j] = cut(g.Down[j])
		}
		down += keep
	}
	return s
}

// SummaryChanged reports whether b says something a reader of the fleet
// view would want that a does not: another config, staleness or health
// view, another set of services or splits, or a rate, error share,
// measured share or connection count that moved past its noise (see
// rateMoved). Times alone are no change.
func SummaryChanged(a, b Summary) bool {
	if a.Instance != b.Instance || a.Region != b.Region || a.Version != b.Version || !a.Started.Equal(b.Started) ||
		a.ConfigHash != b.ConfigHash || a.ConfigRevision != b.ConfigRevision || a.Stale != b.Stale || a.Truncated != b.Truncated {
		return true
	}
	if !slices.EqualFunc(a.Groups, b.Groups, func(x, y SummaryGroup) bool {
		return x.Name == y.Name && x.Zone == y.Zone && x.Members == y.Members && x.Healthy == y.Healthy && slices.Equal(x.Down, y.Down)
	}) {
		return true
	}
	return trafficChanged(a, b)
}

// trafficChanged reports whether b's rates, error shares, connections
// or measured splits moved past their noise from a's.
func trafficChanged(a, b Summary) bool {
	if rateMoved(a.Rate, b.Rate) || shareMoved(a.ErrorRate, b.ErrorRate) || countMoved(a.ActiveConnections, b.ActiveConnections) {
		return true
	}
	if !slices.EqualFunc(a.Services, b.Services, func(x, y SummaryService) bool {
		return x.Name == y.Name && !rateMoved(x.Rate, y.Rate) && !shareMoved(x.ErrorRate, y.ErrorRate)
	}) {
		return true
	}
	return !slices.EqualFunc(a.Splits, b.Splits, func(x, y SummarySplit) bool {
		return x.Frontend == y.Frontend && x.Source == y.Source && x.Measured == y.Measured &&
			slices.EqualFunc(x.Services, y.Services, func(p, q SummaryWeighted) bool {
				return p.Service == q.Service && p.Configured == q.Configured && !shareMoved(p.Measured, q.Measured)
			})
	})
}

// summaryWindowSec is the window the rates are measured over (the
// dashboard's 10 s).
const summaryWindowSec = 10

// rateMoved reports whether a rate moved by more than 10% and more than
// its counting noise over the window (3√(r/w), as fleet's demand share
// judges rates), or to or from zero.
func rateMoved(a, b float64) bool {
	if (a == 0) != (b == 0) {
		return true
	}
	d := math.Abs(b - a)
	return d > 0.1*max(a, b) && d > 3*math.Sqrt(max(a, b)/summaryWindowSec)
}

// shareMoved reports whether a share (0-1) moved by more than 5 points.
func shareMoved(a, b float64) bool { return math.Abs(b-a) > 0.05 }

// countMoved reports whether a count moved by more than a quarter and
// more than 5.
func countMoved(a, b int64) bool {
	d := math.Abs(float64(b - a))
	return d > 5 && d > 0.25*float64(max(a, b))
}

// FleetView is the fleet as one instance's dashboard shows it: every
// instance's summary, how many configs they run, and the endpoints their
// health views disagree on.
type FleetView struct {
	// Connected is false when this instance cannot read the fleet's
	// summaries now: the others are as last seen.
	Connected bool            `json:"connected"`
	Instances []FleetInstance `json:"instances"`
	// ConfigHashes is the number of different configs in force.
	ConfigHashes  int            `json:"configHashes"`
	Disagreements []Disagreement `json:"disagreements,omitempty"`
}

// FleetInstance is one instance of the view.
type FleetInstance struct {
	Summary
	// Self marks the instance serving the page; AgeSec is how long ago
	// the summary was published (a summary is published when it
	// changes, so an old one is unchanged since, not stale).
	Self   bool    `json:"self,omitempty"`
	AgeSec float64 `json:"ageSec"`
	// Down counts the endpoints the instance finds down.
	Down int `json:"down"`
}

// Disagreement is an endpoint some instances find down and others up.
type Disagreement struct {
	Group   string   `json:"group"`
	Address string   `json:"address"`
	Down    []string `json:"downOn"`
	Up      []string `json:"upOn"`
}

// NewFleetView builds the view from this instance's summary and the
// others' (peers; one named like self is ignored). An endpoint is up on
// an instance whose summary has the endpoint's group and does not list
// it as down; an instance whose summary was truncated, or that does not
// have the group, does not count either way.
func NewFleetView(self Summary, peers []Summary, connected bool, now time.Time) *FleetView {
	all := []Summary{self}
	for _, p := range peers {
		if p.Instance != self.Instance {
			all = append(all, p)
		}
	}
	slices.SortStableFunc(all[1:], func(a, b Summary) int { return cmp.Compare(a.Instance, b.Instance) })
	v := &FleetView{Connected: connected}
	hashes := map[string]bool{}
	for i, s := range all {
		fi := FleetInstance{Summary: s, Self: i == 0, AgeSec: max(0, now.Sub(s.At).Seconds())}
		for _, g := range s.Groups {
			fi.Down += len(g.Down)
		}
		v.Instances = append(v.Instances, fi)
		hashes[s.ConfigHash] = true
	}
	v.ConfigHashes = len(hashes)
	v.Disagreements = disagreements(all)
	return v
}

// disagreements lists the endpoints some summary has down and another,
// with the group and complete, has up, by group and address.
func disagreements(all []Summary) []Disagreement {
	type key struct{ group, addr string }
	downOn := map[key][]string{}
	groups := make([]map[string]map[string]bool, len(all)) // per summary: group → down addresses
	for i, s := range all {
		groups[i] = map[string]map[string]bool{}
		for _, g := range s.Groups {
			down := map[string]bool{}
			for _, a := range g.Down {
				down[a] = true
				downOn[key{g.Name, a}] = append(downOn[key{g.Name, a}], s.Instance)
			}
			groups[i][g.Name] = down
		}
	}
	var out []Disagreement
	for k, down := range downOn {
		var up []string
		for i, s := range all {
			g, ok := groups[i][k.group]
			if ok && !s.Truncated && !g[k.addr] {
				up = append(up, s.Instance)
			}
		}
		if len(up) > 0 {
			slices.Sort(down)
			slices.Sort(up)
			out = append(out, Disagreement{Group: k.group, Address: k.addr, Down: down, Up: up})
		}
	}
	slices.SortFunc(out, func(a, b Disagreement) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Address, b.Address))
	})
	return out
}
