package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
)

// Tolerances of the acceptance check (DESIGN §5, at 1,000 requests).
const (
	ZoneTolerance   = 4.0 // points per zone
	RegionTolerance = 4.5 // points per region (and for the 503 share)
)

// reference is one row of seed 000's published "Test results" table, in
// percent. They are the seed's numbers, used only to print beside the lab's
// and for the tolerance check, never as output.
type reference struct {
	primary, secondary float64
	// primaryZones and secondaryZones are a / b / c; nil when the seed
	// gives no per-zone numbers.
	primaryZones, secondaryZones []float64
	err503                       float64
}

// seedPrimary and seedSecondary are the seed's regions and zones.
func seedZones() (primary, secondary []string) {
	return []string{"us-south1-a", "us-south1-b", "us-south1-c"}, []string{"us-east4-a", "us-east4-b", "us-east4-c"}
}

// seedReference returns the seed's row for a config and failed zones, or
// nil when the seed did not test that combination.
func seedReference(cfg string, down []string) *reference {
	prim, _ := seedZones()
	k := len(down)
	if k > len(prim) || !slices.Equal(down, prim[:k]) {
		return nil
	}
	z := func(v ...float64) []float64 { return v }
	switch cfg {
	case "with-policy":
		return []*reference{
			{70.3, 29.7, z(23.4, 23.8, 23.1), z(10.0, 10.0, 9.7), 0.0},
			{68.9, 31.1, z(0.0, 34.0, 34.9), z(10.4, 10.4, 10.3), 0.0},
			{69.8, 30.1, z(0.0, 0.0, 69.8), z(9.8, 9.7, 10.6), 0.1},
			{0.0, 100.0, z(0, 0, 0), z(34.5, 32.6, 32.9), 0.0},
		}[k]
	case "no-policy":
		return []*reference{
			{69.5, 30.5, z(11.3, 31.8, 26.4), z(3.1, 4.3, 23.1), 0.0},
			{68.1, 31.9, z(0.0, 49.1, 19.0), z(2.6, 10.9, 18.4), 0.0},
			{45.3, 54.7, z(0.0, 0.0, 45.3), z(14.2, 9.6, 30.9), 0.0},
			{0.0, 100.0, z(0, 0, 0), z(31.8, 18.6, 49.6), 0.0},
		}[k]
	case "baseline":
		if k == 3 {
			return &reference{primary: 0, secondary: 30.0, err503: 70.0}
		}
	}
	return nil
}

// referenceFor returns the seed's row for r when r ran on the seed's
// topology.
func referenceFor(r *Result) *reference {
	prim, sec := seedZones()
	if r.Primary != "us-south1" || !slices.Equal(r.RegionZones["us-south1"], prim) || !slices.Equal(r.RegionZones["us-east4"], sec) || len(r.RegionZones) != 2 {
		return nil
	}
	return seedReference(r.Config, r.Down)
}

// Verdict compares a result with the seed: "match", "DIFF", or "" when
// the seed has no numbers for the row. Regions and the 503 share must be
// within RegionTolerance of the seed. Zones: under SPRAY_TO_REGION every
// zone within ZoneTolerance; under WATERFALL_BY_REGION (r.Proxies > 0) a
// zone's share is a draw, not a number to match (which zones a client's
// second-layer proxies favour), so dead zones must be empty and in each
// region the busiest zone's fraction must lie in the range
// WaterfallSpread gives the model, as the seed's own numbers do.
func Verdict(r *Result) string {
	ref := referenceFor(r)
	if ref == nil {
		return ""
	}
	prim, sec := seedZones()
	// The tolerances are for the seed's 1,000 requests; a smaller sample
	// has more noise, so they widen by √(1000/N) below that.
	scale := 1.0
	if r.Requests > 0 && r.Requests < 1000 {
		scale = math.Sqrt(1000 / float64(r.Requests))
	}
	regionTol, zoneTol := RegionTolerance*scale, ZoneTolerance*scale
	ok := within(r.Share(r.Regions["us-south1"]), ref.primary, regionTol) &&
		within(r.Share(r.Regions["us-east4"]), ref.secondary, regionTol) &&
		within(r.Share(r.Status["503"]), ref.err503, regionTol)
	for _, zs := range []struct {
		names []string
		want  []float64
	}{{prim, ref.primaryZones}, {sec, ref.secondaryZones}} {
		if zs.want == nil {
			continue
		}
		got := make([]int, len(zs.names))
		for i, z := range zs.names {
			got[i] = r.Zones[z]
		}
		if r.Proxies > 0 {
			ok = ok && spreadOK(r, zs.names, got, r.Proxies, zoneTol) && anyClientOK(r, zs.names, got)
			continue
		}
		for i := range zs.names {
			ok = ok && within(r.Share(got[i]), zs.want[i], zoneTol)
		}
	}
	if ok {
		return "match"
	}
	return "DIFF"
}

// spreadOK judges one region's zones under WATERFALL_BY_REGION: its dead
// zones (r.Down) within tol of 0, and the busiest live zone's fraction of
// the region within WaterfallSpread's range, widened by two standard
// deviations of the sample (√(m(1-m)/n) for n requests in the region).
func spreadOK(r *Result, zones []string, counts []int, proxies int, tol float64) bool {
	total, most, live := 0, 0, 0
	for i, z := range zones {
		total += counts[i]
		if slices.Contains(r.Down, z) {
			if !within(r.Share(counts[i]), 0, tol) {
				return false
			}
			continue
		}
		live++
		most = max(most, counts[i])
	}
	if total == 0 || live < 2 {
		return true
	}
	m := float64(most) / float64(total)
	lo, hi := WaterfallSpread(live, len(zones)-live, proxies)
	noise := 2 * math.Sqrt(m*(1-m)/float64(total))
	return m >= lo-noise-1e-9 && m <= hi+noise+1e-9
}

// anyClientOK reports whether each zone's share lies in the p1-p99
// range of the simulated clients (r.AnyClient; true without one),
// widened by two standard deviations of r's sample.
func anyClientOK(r *Result, zones []string, counts []int) bool {
	if r.AnyClient == nil || r.Requests == 0 {
		return true
	}
	for i, z := range zones {
		zr, ok := r.AnyClient[z]
		if !ok {
			continue
		}
		s := r.Share(counts[i])
		noise := 200 * math.Sqrt(s/100*(1-s/100)/float64(r.Requests))
		if s < zr.P1-noise-1e-9 || s > zr.P99+noise+1e-9 {
			return false
		}
	}
	return true
}

// WaterfallSpread returns the central 99% range of the busiest zone's
// fraction of its region that one client sees under WATERFALL_BY_REGION,
// for a region of live+dead zones of equal capacity (Spread gives the
// whole distribution).
func WaterfallSpread(live, dead, proxies int) (lo, hi float64) {
	acc := 0.0
	lo, hi = -1, 1
	for _, o := range Spread(live, dead, proxies) {
		acc += o.P
		if lo < 0 && acc > 0.005 {
			lo = o.Busiest
		}
		if acc >= 0.995-1e-12 {
			hi = o.Busiest
			break
		}
	}
	return lo, hi
}

// Outcome is one value of the busiest zone's fraction and its probability.
type Outcome struct{ Busiest, P float64 }

// Spread is the distribution of the busiest zone's fraction of its region
// for one client under WATERFALL_BY_REGION, in a region of live+dead zones
// of equal capacity: the client's proxies are each homed in a zone with
// equal probability, a proxy homed in a live zone keeps its traffic there,
// and one homed in a dead zone spreads it evenly over the live zones
// (docs/semantics.md §2.4). Exact, by enumerating how the proxies fall
// into zones; sorted by Busiest.
func Spread(live, dead, proxies int) []Outcome {
	n := live + dead
	var outs []Outcome
	counts := make([]int, n)
	var walk func(zone, left int, p float64)
	walk = func(zone, left int, p float64) {
		if zone == n-1 {
			counts[zone] = left
			p *= math.Pow(1/float64(n), float64(left)) / factorial(left)
			d := 0
			for z := live; z < n; z++ {
				d += counts[z]
			}
			most := 0
			for z := 0; z < live; z++ {
				most = max(most, counts[z])
			}
			outs = append(outs, Outcome{(float64(most) + float64(d)/float64(live)) / float64(proxies), p})
			return
		}
		for k := 0; k <= left; k++ {
			counts[zone] = k
			walk(zone+1, left-k, p*math.Pow(1/float64(n), float64(k))/factorial(k))
		}
	}
	walk(0, proxies, factorial(proxies))
	sort.Slice(outs, func(i, j int) bool { return outs[i].Busiest < outs[j].Busiest })
	return outs
}

func factorial(k int) float64 {
	f := 1.0
	for i := 2; i <= k; i++ {
		f *= float64(i)
	}
	return f
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol+1e-9 }

// WriteJSON prints {"scenarios": [...]} with counts.
func WriteJSON(w io.Writer, rep *Report) error {
	out := struct {
		Scenarios []Result `json:"scenarios"`
	}{Scenarios: make([]Result, len(rep.Scenarios))}
	for i, r := range rep.Scenarios {
		if r.Down == nil {
			r.Down = []string{}
		}
		out.Scenarios[i] = r
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("lab: encode report: %w", err)
	}
	return nil
}

// WriteTable prints the results beside the seed's published numbers.
func WriteTable(w io.Writer, rep *Report) error {
	mode := "health checks fail (mode 1)"
	if rep.FailMode == FailListeners {
		mode = "listeners stop (mode 2)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Spillway lab: %d HTTPS requests per scenario after convergence · %s · probes every %s · %.0f rps\n\n",
		rep.Requests, mode, rep.Interval, rep.Rate)
	if rep.Fleet != "" {
		b.WriteString(rep.Fleet + "\n\n")
	}
	t := newScenarioTable(rep)
	for i := range rep.Scenarios {
		t.add(&rep.Scenarios[i])
	}
	t.render(&b)
	if len(t.others) > 0 {
		b.WriteString("\nother answers: " + strings.Join(t.others, "; ") + "\n")
	}
	if !rep.Brief {
		b.WriteString(tableLegend)
	}
	if rep.Elapsed > 0 {
		fmt.Fprintf(&b, "\n%d scenarios in %.1fs\n", len(rep.Scenarios), rep.Elapsed.Seconds())
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("lab: write report: %w", err)
	}
	return nil
}

// tableLegend explains WriteTable's columns and verdicts.
const tableLegend = `
Shares are of each scenario's requests; a region's zones are in brackets.
"seed" rows are the seed's published numbers (1,000 requests each on Google
Cloud). match: every zone within ±4 points, every region and the 503 share
within ±4.5 points of the seed (at 1,000 requests; widened by √(1000/N)
for fewer); DIFF: outside. Under WATERFALL_BY_REGION (no-policy, baseline)
one client's zones are a draw, not a number to match: the lab's client is
bound to its own second-layer proxies, each favouring a zone, as the seed's
client was. Those rows match when dead zones are empty and each region's
busiest zone carries a fraction of it inside the central 99% of what
spillway.secondLayerProxies proxies give (8 proxies, three zones: 0.375 to
0.875), widened by sampling noise; the seed's own six region splits all
fall inside (docs/semantics.md §2.4). Their "any client p1-p99" rows give
each zone's range over 200 simulated client addresses in the same
scenario (spillway simulate --client-ip shows p5-p95); each of the lab's
zones must also lie in its range, widened by sampling noise.
`

// scenarioTable is WriteTable's table: the columns are config,
// scenario, one per region (primary first), 503 and the verdict; each
// scenario has a row, followed by the seed's when it published one.
type scenarioTable struct {
	rep     *Report
	regions []string
	rows    [][]string
	seps    []bool   // per row: a blank line before it (a new config)
	others  []string // statuses other than 200 and 503, per scenario
	prevCfg string
}

// newScenarioTable returns the table with its header row.
func newScenarioTable(rep *Report) *scenarioTable {
	t := &scenarioTable{rep: rep}
	for _, r := range rep.Scenarios {
		for _, reg := range r.RegionOrder {
			if !slices.Contains(t.regions, reg) {
				t.regions = append(t.regions, reg)
			}
		}
	}
	header := []string{"CONFIG", "SCENARIO"}
	for _, reg := range t.regions {
		header = append(header, fmt.Sprintf("%s (%s)", reg, strings.Join(zoneSuffixes(reg, t.zonesOf(reg)), " / ")))
	}
	header = append(header, "503", "")
	t.rows = [][]string{header}
	t.seps = []bool{false}
	return t
}

// zonesOf returns the zones of region reg in the first scenario that
// has them.
func (t *scenarioTable) zonesOf(reg string) []string {
	for _, r := range t.rep.Scenarios {
		if zs := r.RegionZones[reg]; zs != nil {
			return zs
		}
	}
	return nil
}

// add appends r's row, the seed's row for r if there is one, and r's
// other statuses.
func (t *scenarioTable) add(r *Result) {
	cfgCell := r.Config
	if r.Config == t.prevCfg {
		cfgCell = ""
	}
	t.seps = append(t.seps, r.Config != t.prevCfg && t.prevCfg != "")
	t.prevCfg = r.Config
	row := []string{cfgCell, ScenarioName(r.Down)}
	for _, reg := range t.regions {
		zs := t.zonesOf(reg)
		vals := make([]float64, len(zs))
		for j, z := range zs {
			vals[j] = r.Share(r.Zones[z])
		}
		row = append(row, regionCell(r.Share(r.Regions[reg]), vals))
	}
	row = append(row, fmt.Sprintf("%.1f%%", r.Share(r.Status["503"])), Verdict(r))
	t.rows = append(t.rows, row)
	if ref := referenceFor(r); ref != nil {
		seed := []string{"", "  seed"}
		for _, reg := range t.regions {
			switch reg {
			case "us-south1":
				seed = append(seed, regionCell(ref.primary, ref.primaryZones))
			case "us-east4":
				seed = append(seed, regionCell(ref.secondary, ref.secondaryZones))
			}
		}
		seed = append(seed, fmt.Sprintf("%.1f%%", ref.err503), "")
		t.rows = append(t.rows, seed)
		t.seps = append(t.seps, false)
	}
	if r.AnyClient != nil {
		t.rows = append(t.rows, t.anyClientRow(r))
		t.seps = append(t.seps, false)
	}
	var codes []string
	for code, n := range r.Status {
		if code != "200" && code != "503" && n > 0 {
			codes = append(codes, fmt.Sprintf("%s×%d", code, n))
		}
	}
	if len(codes) > 0 {
		sort.Strings(codes)
		t.others = append(t.others, fmt.Sprintf("%s / %s: %s", r.Config, ScenarioName(r.Down), strings.Join(codes, ", ")))
	}
}

// anyClientRow is the row of r's client spread: each zone's p1-p99 over
// the simulated clients, the range the verdict judges r's zones by.
func (t *scenarioTable) anyClientRow(r *Result) []string {
	row := []string{"", "  any client p1-p99"}
	for _, reg := range t.regions {
		zs := t.zonesOf(reg)
		parts := make([]string, len(zs))
		for j, z := range zs {
			zr := r.AnyClient[z]
			parts[j] = fmt.Sprintf("%.0f-%.0f", zr.P1, zr.P99)
		}
		rr := r.AnyClient[reg]
		row = append(row, fmt.Sprintf("%.0f%% (%s)", rr.P50, strings.Join(parts, " / ")))
	}
	return append(row, "", "")
}

// render writes the rows in aligned columns: numbers right-aligned,
// names left-aligned, three spaces apart.
func (t *scenarioTable) render(b *strings.Builder) {
	widths := make([]int, len(t.rows[0]))
	for _, row := range t.rows {
		for j, c := range row {
			widths[j] = max(widths[j], len([]rune(c)))
		}
	}
	for i, row := range t.rows {
		if t.seps[i] {
			b.WriteString("\n")
		}
		var line strings.Builder
		for j, c := range row {
			pad := widths[j] - len([]rune(c))
			if j >= 2 && j < len(row)-1 { // numbers: right-aligned
				line.WriteString(strings.Repeat(" ", pad) + c)
			} else {
				line.WriteString(c + strings.Repeat(" ", pad))
			}
			if j < len(row)-1 {
				line.WriteString("   ")
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

func regionCell(total float64, zones []float64) string {
	if zones == nil {
		return fmt.Sprintf("%.1f%%", total)
	}
	parts := make([]string, len(zones))
	for i, v := range zones {
		parts[i] = fmt.Sprintf("%4.1f", v)
	}
	return fmt.Sprintf("%5.1f%% (%s)", total, strings.Join(parts, " / "))
}

// zoneSuffixes turns us-south1-a, us-south1-b into a, b.
func zoneSuffixes(region string, zones []string) []string {
	out := make([]string, len(zones))
	for i, z := range zones {
		out[i] = strings.TrimPrefix(z, region+"-")
	}
	return out
}
