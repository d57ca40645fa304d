package plan

import (
	"math"

	"github.com/spillwaylb/spillway/internal/config"
)

// distances builds the proximity matrix. Explicit rttMs entries win; else
// great-circle distance between coordinates (from the regions list, or
// the built-in table of Google Cloud region locations); else +Inf, and the
// tie is broken by region name wherever the matrix is used.
func distances(names []string, regions []config.Region) [][]float64 {
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
	d := make([][]float64, len(names))
	for i, a := range names {
		d[i] = make([]float64, len(names))
		for j, b := range names {
			switch {
			case i == j:
				d[i][j] = 0
			case rtt(byName, a, b) >= 0:
				d[i][j] = rtt(byName, a, b)
			default:
				la, oa, ok1 := coords(a)
				lb, ob, ok2 := coords(b)
				if ok1 && ok2 {
					d[i][j] = DistanceKm(la, oa, lb, ob)
				} else {
					d[i][j] = math.Inf(1)
				}
			}
		}
	}
	return d
}

func rtt(byName map[string]*config.Region, a, b string) float64 {
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
