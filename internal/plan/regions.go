package plan

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/spillwaylb/spillway/internal/config"
)

// distances builds the proximity matrix: round-trip time in ms between
// regions. An explicit rttMs entry (given on either region) wins; else the
// built-in table of Google Cloud regions (KnownRTT: measured, or
// estimated); else the fibre estimate (FibreRTTMs) from coordinates (the
// regions list's, else the built-in location); else +Inf, and the tie is
// broken by region name wherever the matrix is used.
func distances(names []string, regions []config.Region) [][]float64 {
	rtt := rttFunc(regions)
	d := make([][]float64, len(names))
	for i, a := range names {
		d[i] = make([]float64, len(names))
		for j, b := range names {
			d[i][j] = rtt(a, b)
		}
	}
	return d
}

// rttFunc returns the proximity metric of distances for any two region
// names, given the regions list.
func rttFunc(regions []config.Region) func(a, b string) float64 {
	byName := map[string]*config.Region{}
	for i := range regions {
		byName[regions[i].Name] = &regions[i]
	}
	coords := func(n string) (lat, lon float64, ok bool) {
		if r := byName[n]; r != nil && r.Latitude != nil && r.Longitude != nil {
			return *r.Latitude, *r.Longitude, true
		}
		return KnownRegionLocation(n)
	}
	return func(a, b string) float64 {
		if a == b {
			return 0
		}
		if v := override(byName, a, b); v >= 0 {
			return v
		}
		if v, ok := KnownRTT(a, b); ok {
			return v
		}
		la, oa, ok1 := coords(a)
		lb, ob, ok2 := coords(b)
		if ok1 && ok2 {
			return FibreRTTMs(DistanceKm(la, oa, lb, ob))
		}
		return math.Inf(1)
	}
}

// override returns the rttMs given between a and b on either region, or
// -1.
func override(byName map[string]*config.Region, a, b string) float64 {
	if r := byName[a]; r != nil {
		if v, ok := r.RTTMs[b]; ok {
			return v
		}
	}
	if r := byName[b]; r != nil {
		if v, ok := r.RTTMs[a]; ok {
			return v
		}
	}
	return -1
}

// RTTMs returns the proximity metric between two regions by name: the
// plan's matrix when it knows both, else the same precedence computed on
// the spot (so a region outside the plan is still comparable).
func (p *Plan) RTTMs(a, b string) float64 {
	ia, oka := p.RegionIndex[a]
	ib, okb := p.RegionIndex[b]
	if oka && okb {
		return p.Distance[ia][ib]
	}
	return rttFunc(p.configRegions())(a, b)
}

func (p *Plan) configRegions() []config.Region {
	if p.Config == nil {
		return nil
	}
	return p.Config.Regions
}

// WithClientRegion returns a plan in which region has a RegionID, and the
// ID. When p knows region that is p itself. A built-in Google Cloud region
// p does not know (no backend, frontend or regions[] entry names it) is
// appended: the copy shares everything with p but Regions, RegionIndex and
// Distance, which gain one entry at the end, so every existing RegionID
// (groups', frontends') stays valid. The engine computes a split per
// region of the plan, so only the region asked for is added, never the
// whole built-in list. Any other name is an error with hints.
func (p *Plan) WithClientRegion(region string) (*Plan, int, error) {
	if id, ok := p.RegionIndex[region]; ok {
		return p, id, nil
	}
	if !config.BuiltinRegion(region) {
		return nil, -1, fmt.Errorf("unknown region %q (fix: %s)", region, config.RegionHint(region, p.Regions))
	}
	q := *p
	q.Regions = append(slices.Clone(p.Regions), region)
	q.RegionIndex = maps.Clone(p.RegionIndex)
	id := len(p.Regions)
	q.RegionIndex[region] = id
	rtt := rttFunc(p.configRegions())
	q.Distance = make([][]float64, len(q.Regions))
	for i := range p.Regions {
		q.Distance[i] = append(slices.Clone(p.Distance[i]), rtt(p.Regions[i], region))
	}
	q.Distance[id] = make([]float64, len(q.Regions))
	for j, r := range q.Regions {
		q.Distance[id][j] = rtt(region, r)
	}
	return &q, id, nil
}

// DistanceKm is the great-circle (haversine) distance in km between two
// points given in degrees.
func DistanceKm(lat1, lon1, lat2, lon2 float64) float64 {
	const r = 6371.0
	rad := math.Pi / 180
	dlat := (lat2 - lat1) * rad
	dlon := (lon2 - lon1) * rad
	a := math.Sin(dlat/2)*math.Sin(dlat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dlon/2)*math.Sin(dlon/2)
	return 2 * r * math.Asin(math.Sqrt(a))
}

// KnownRegionLocation returns the approximate location (the metro area) of
// a Google Cloud region, so proximity works without a regions list.
func KnownRegionLocation(region string) (lat, lon float64, ok bool) {
	switch region {
	case "us-central1":
		return 41.26, -95.86, true
	case "us-east1":
		return 33.20, -80.01, true
	case "us-east4":
		return 39.04, -77.49, true
	case "us-east5":
		return 39.96, -83.00, true
	case "us-south1":
		return 32.78, -96.80, true
	case "us-west1":
		return 45.59, -121.18, true
	case "us-west2":
		return 34.05, -118.24, true
	case "us-west3":
		return 40.76, -111.89, true
	case "us-west4":
		return 36.17, -115.14, true
	case "northamerica-northeast1":
		return 45.50, -73.57, true
	case "northamerica-northeast2":
		return 43.65, -79.38, true
	case "southamerica-east1":
		return -23.55, -46.63, true
	case "southamerica-west1":
		return -33.45, -70.67, true
	case "europe-west1":
		return 50.45, 3.82, true
	case "europe-west2":
		return 51.51, -0.13, true
	case "europe-west3":
		return 50.11, 8.68, true
	case "europe-west4":
		return 53.44, 6.83, true
	case "europe-west6":
		return 47.38, 8.54, true
	case "europe-west8":
		return 45.46, 9.19, true
	case "europe-west9":
		return 48.86, 2.35, true
	case "europe-west10":
		return 52.52, 13.40, true
	case "europe-west12":
		return 45.07, 7.69, true
	case "europe-north1":
		return 60.57, 27.20, true
	case "europe-central2":
		return 52.23, 21.01, true
	case "europe-southwest1":
		return 40.42, -3.70, true
	case "asia-east1":
		return 24.05, 120.52, true
	case "asia-east2":
		return 22.32, 114.17, true
	case "asia-northeast1":
		return 35.68, 139.69, true
	case "asia-northeast2":
		return 34.69, 135.50, true
	case "asia-northeast3":
		return 37.57, 126.98, true
	case "asia-south1":
		return 19.08, 72.88, true
	case "asia-south2":
		return 28.61, 77.21, true
	case "asia-southeast1":
		return 1.35, 103.82, true
	case "asia-southeast2":
		return -6.21, 106.85, true
	case "australia-southeast1":
		return -33.87, 151.21, true
	case "australia-southeast2":
		return -37.81, 144.96, true
	case "me-west1":
		return 32.09, 34.78, true
	case "me-central1":
		return 25.29, 51.53, true
	case "africa-south1":
		return -26.20, 28.05, true
	}
	return 0, 0, false
}
