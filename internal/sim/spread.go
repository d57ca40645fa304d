package sim

import (
	"fmt"
	"slices"

	"github.com/spillwaylb/spillway/internal/plan"
)

// ZoneRange is the spread of one zone's (or region's) share of the
// requests over many clients, in percent: under WATERFALL_BY_REGION a
// single client's zones are a draw of its second-layer proxies
// (docs/semantics.md §2.4), so one client's number is one sample of it.
type ZoneRange struct {
	P1  float64 `json:"p1"`
	P5  float64 `json:"p5"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// DefaultSpreadClients is how many client addresses ClientSpread draws.
const DefaultSpreadClients = 200

// spreadClient is the i-th client address of a spread: 198.18.0.0/15
// (RFC 2544's benchmarking range), the same every run.
func spreadClient(i int) string { return fmt.Sprintf("198.18.%d.%d", i/250, i%250+1) }

// UsesWaterfallByRegion reports whether a backend service of p splits
// its regions by WATERFALL_BY_REGION, where one client's zones are a draw.
func UsesWaterfallByRegion(p *plan.Plan) bool {
	for _, s := range p.Services {
		if s.Algorithm == plan.WaterfallByRegion {
			return true
		}
	}
	return false
}

// ClientSpread runs o in count mode (its Down, o.Requests per client,
// default 1,000) once for each of n client addresses (198.18.x.y,
// deterministic) and returns each zone's and region's share range over
// them. Events and rate mode are left out: the spread is of the state
// after convergence. A regional group's zone is named as its region
// (plan.Group.ZoneOrRegion): that key's range is the region's when the
// two agree for every client, and is left out when they do not (a region
// with zonal groups too), rather than mixing the two.
func ClientSpread(p *plan.Plan, o Options, n int) (map[string]ZoneRange, error) {
	if n <= 0 {
		n = DefaultSpreadClients
	}
	o.Rate, o.Duration, o.Events = 0, 0, nil
	if o.Requests <= 0 {
		o.Requests = 1000
	}
	shares := map[string][]float64{}
	ambiguous := map[string]bool{}
	for i := range n {
		o.ClientIP = spreadClient(i)
		r, err := Run(p, o)
		if err != nil {
			return nil, err
		}
		addShares(shares, ambiguous, r)
	}
	out := map[string]ZoneRange{}
	for k, v := range shares {
		if ambiguous[k] {
			continue
		}
		slices.Sort(v)
		q := func(f float64) float64 { return v[min(len(v)-1, int(f*float64(len(v))))] }
		out[k] = ZoneRange{P1: q(0.01), P5: q(0.05), P50: q(0.5), P95: q(0.95), P99: q(0.99)}
	}
	return out, nil
}

// addShares adds one run's zone and region shares to shares, one sample
// per key; a key that is both a zone and a region with different counts
// is marked ambiguous.
func addShares(shares map[string][]float64, ambiguous map[string]bool, r *Result) {
	for k, c := range r.Zones {
		shares[k] = append(shares[k], 100*float64(c)/float64(r.Requests))
	}
	for k, c := range r.Regions {
		if zc, ok := r.Zones[k]; ok {
			if zc != c {
				ambiguous[k] = true
			}
			continue
		}
		shares[k] = append(shares[k], 100*float64(c)/float64(r.Requests))
	}
}
