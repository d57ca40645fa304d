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
	l, ok := regionLocations[region]
	return l.lat, l.lon, ok
}

// regionLocations are the metro areas of the Google Cloud regions
// (KnownRegionLocation), in degrees. Read only.
var regionLocations = map[string]struct{ lat, lon float64 }{
	"us-central1":             {41.26, -95.86},
	"us-east1":                {33.20, -80.01},
	"us-east4":                {39.04, -77.49},
	"us-east5":                {39.96, -83.00},
	"us-south1":               {32.78, -96.80},
	"us-west1":                {45.59, -121.18},
	"us-west2":                {34.05, -118.24},
	"us-west3":                {40.76, -111.89},
	"us-west4":                {36.17, -115.14},
	"northamerica-northeast1": {45.50, -73.57},
	"northamerica-northeast2": {43.65, -79.38},
	"southamerica-east1":      {-23.55, -46.63},
	"southamerica-west1":      {-33.45, -70.67},
	"europe-west1":            {50.45, 3.82},
	"europe-west2":            {51.51, -0.13},
	"europe-west3":            {50.11, 8.68},
	"europe-west4":            {53.44, 6.83},
	"europe-west6":            {47.38, 8.54},
	"europe-west8":            {45.46, 9.19},
	"europe-west9":            {48.86, 2.35},
	"europe-west10":           {52.52, 13.40},
	"europe-west12":           {45.07, 7.69},
	"europe-north1":           {60.57, 27.20},
	"europe-central2":         {52.23, 21.01},
	"europe-southwest1":       {40.42, -3.70},
	"asia-east1":              {24.05, 120.52},
	"asia-east2":              {22.32, 114.17},
	"asia-northeast1":         {35.68, 139.69},
	"asia-northeast2":         {34.69, 135.50},
	"asia-northeast3":         {37.57, 126.98},
	"asia-south1":             {19.08, 72.88},
	"asia-south2":             {28.61, 77.21},
	"asia-southeast1":         {1.35, 103.82},
	"asia-southeast2":         {-6.21, 106.85},
	"australia-southeast1":    {-33.87, 151.21},
	"australia-southeast2":    {-37.81, 144.96},
	"me-west1":                {32.09, 34.78},
	"me-central1":             {25.29, 51.53},
	"africa-south1":           {-26.20, 28.05},
}
