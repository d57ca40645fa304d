package dashboard

import (
	"cmp"
	"slices"

	"github.com/spillwaylb/spillway/internal/plan"
)

// CDNCounts are a CDN-enabled backend's cumulative cache lookups: hits
// (fresh, stale or revalidated answers from the cache) and misses (the
// lookups that went to the origin). Bypassed requests are neither.
type CDNCounts struct {
	Hits, Misses uint64
}

// DashCDN is one CDN-enabled backend service or bucket on the dashboard.
type DashCDN struct {
	Backend string `json:"backend"`
	// Kind is "service" or "bucket".
	Kind string `json:"kind"`
	// HitRatio is hits / (hits + misses) over the last 10 s (-1: no
	// lookup); Lookups the lookups per second over it.
	HitRatio float64 `json:"hitRatio"`
	Lookups  float64 `json:"lookups"`
	// Hits and Misses are the counts since start.
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
	// Series is the hit ratio per step, oldest first (-1: no lookup in
	// that step).
	Series []float64 `json:"series"`
}

// cdnViews returns every CDN-enabled backend of p (services first, then
// buckets, each by name) with its hit ratio from the samples.
func cdnViews(samples []dashSample, p *plan.Plan) []DashCDN {
	var out []DashCDN
	for name, s := range p.ServiceByName {
		if s.CDN != nil {
			out = append(out, DashCDN{Backend: name, Kind: "service"})
		}
	}
	for name, b := range p.Buckets {
		if b.CDN != nil {
			out = append(out, DashCDN{Backend: name, Kind: "bucket"})
		}
	}
	slices.SortFunc(out, func(a, b DashCDN) int {
		if a.Kind != b.Kind {
			return cmp.Compare(b.Kind, a.Kind) // "service" before "bucket"
		}
		return cmp.Compare(a.Backend, b.Backend)
	})
	for i := range out {
		fillCDN(&out[i], samples)
	}
	return out
}

// fillCDN sets v's ratio, rate, totals and series from the samples.
func fillCDN(v *DashCDN, samples []dashSample) {
	v.HitRatio = -1
	if len(samples) == 0 {
		return
	}
	last := samples[len(samples)-1]
	v.Hits, v.Misses = last.cdn[v.Backend].Hits, last.cdn[v.Backend].Misses
	first := samples[max(0, len(samples)-1-dashShareWindow)]
	h, m := cdnDelta(first, last, v.Backend)
	if dt := last.at.Sub(first.at).Seconds(); dt > 0 {
		v.Lookups = float64(h+m) / dt
	}
	v.HitRatio = ratio(h, m)
	v.Series = make([]float64, 0, len(samples))
	for k := 1; k < len(samples); k++ {
		v.Series = append(v.Series, ratio(cdnDelta(samples[k-1], samples[k], v.Backend)))
	}
}

// cdnDelta returns the hits and misses of backend between samples a and
// b.
func cdnDelta(a, b dashSample, backend string) (hits, misses uint64) {
	x, y := a.cdn[backend], b.cdn[backend]
	return delta(x.Hits, y.Hits), delta(x.Misses, y.Misses)
}

// ratio is hits / (hits + misses), -1 when both are 0.
func ratio(hits, misses uint64) float64 {
	if hits+misses == 0 {
		return -1
	}
	return float64(hits) / float64(hits+misses)
}
