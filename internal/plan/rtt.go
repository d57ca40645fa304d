package plan

import "math"

// Inter-region round-trip times of Google Cloud regions, in milliseconds.
//
// Measured pairs: BigBitBus, "What is your ping, Google Cloud and Amazon
// AWS?" (2018-05-07, heat map "Google Cloud Inter-region Ping Latency
// (ms)"): ping between VMs in one zone of each of 14 regions, the average
// of 30 pings per direction. The 91 pairs below are the mean of the two
// directions (they differ by at most 17 ms, europe-west4 ↔ us-west1),
// transcribed by hand from the published figure and checked twice. They
// are 2018 routes: asia-south1 then reached Europe and South America
// eastwards (~350-390 ms); give regions[].rttMs where you know better.
//
// Every other pair of built-in regions (the 25 regions not measured, 650
// pairs) is estimated from locations with a fibre model:
//
//	fibre(d) = 2 · d · 1.5 / 200 + 2   (ms; d = great-circle km)
//
// light in fibre covers ~200 km/ms, 1.5 is the path stretch and 2 ms the
// fixed cost; the pair (1.5, 2) minimises the mean relative error over
// the 91 measured pairs, where it is off by 15 ms in the median, 126 ms
// at the 90th percentile and 254 ms at worst (asia-south1 ↔
// southamerica-east1): great circles miss how backbones actually run
// (asia-northeast1 ↔ europe-west1: 9,500 km, 145 ms by the model, 228 ms
// measured, more than to us-east1 at 11,300 km). So a region
// within 1,500 km of a measured one (its anchor: all the US, Canadian,
// European and Asian regions; not me-*, australia-*, africa-south1,
// southamerica-west1) takes its anchor's measured RTT, corrected by the
// fibre time of the change in great-circle distance:
//
//	rtt(a, b) ≈ measured(A, B) + 2 · 1.5 / 200 · (d(a, b) − d(A, B))
//
// never below 2 · d(a, b) / 200 (light in fibre on the great circle).
// Calibrated by leaving each measured region out in turn and estimating
// its pairs through its nearest other measured region (84 pairs within
// 1,500 km): off by 4.8 ms in the median, 21 ms at the 90th percentile
// and 43 ms at worst. Pairs whose anchors coincide, or with a region that
// has none, use fibre(d) directly.
var measuredRTT = []struct {
	a, b string
	ms   float64
}{
	{"asia-east1", "asia-northeast1", 34.5},
	{"asia-east1", "asia-south1", 109},
	{"asia-east1", "asia-southeast1", 49.5},
	{"asia-east1", "europe-west1", 272.5},
	{"asia-east1", "europe-west2", 251},
	{"asia-east1", "europe-west3", 259},
	{"asia-east1", "europe-west4", 276},
	{"asia-east1", "northamerica-northeast1", 181},
	{"asia-east1", "southamerica-east1", 288},
	{"asia-east1", "us-central1", 152},
	{"asia-east1", "us-east1", 185},
	{"asia-east1", "us-east4", 175},
	{"asia-east1", "us-west1", 118},
	{"asia-northeast1", "asia-south1", 126.5},
	{"asia-northeast1", "asia-southeast1", 67},
	{"asia-northeast1", "europe-west1", 228},
	{"asia-northeast1", "europe-west2", 222},
	{"asia-northeast1", "europe-west3", 232},
	{"asia-northeast1", "europe-west4", 230.5},
	{"asia-northeast1", "northamerica-northeast1", 156},
	{"asia-northeast1", "southamerica-east1", 265},
	{"asia-northeast1", "us-central1", 125},
	{"asia-northeast1", "us-east1", 160},
	{"asia-northeast1", "us-east4", 148},
	{"asia-northeast1", "us-west1", 91.5},
	{"asia-south1", "asia-southeast1", 60},
	{"asia-south1", "europe-west1", 349.5},
	{"asia-south1", "europe-west2", 343.5},
	{"asia-south1", "europe-west3", 354},
	{"asia-south1", "europe-west4", 353.5},
	{"asia-south1", "northamerica-northeast1", 273.5},
	{"asia-south1", "southamerica-east1", 386.5},
	{"asia-south1", "us-central1", 245},
	{"asia-south1", "us-east1", 282},
	{"asia-south1", "us-east4", 269},
	{"asia-south1", "us-west1", 214.5},
	{"asia-southeast1", "europe-west1", 300},
	{"asia-southeast1", "europe-west2", 283},
	{"asia-southeast1", "europe-west3", 295},
	{"asia-southeast1", "europe-west4", 307},
	{"asia-southeast1", "northamerica-northeast1", 215},
	{"asia-southeast1", "southamerica-east1", 326},
	{"asia-southeast1", "us-central1", 186.5},
	{"asia-southeast1", "us-east1", 222},
	{"asia-southeast1", "us-east4", 210.5},
	{"asia-southeast1", "us-west1", 157},
	{"europe-west1", "europe-west2", 6},
	{"europe-west1", "europe-west3", 8},
	{"europe-west1", "europe-west4", 7},
	{"europe-west1", "northamerica-northeast1", 88},
	{"europe-west1", "southamerica-east1", 209},
	{"europe-west1", "us-central1", 113.5},
	{"europe-west1", "us-east1", 93},
	{"europe-west1", "us-east4", 81},
	{"europe-west1", "us-west1", 179.5},
	{"europe-west2", "europe-west3", 12},
	{"europe-west2", "europe-west4", 10},
	{"europe-west2", "northamerica-northeast1", 86},
	{"europe-west2", "southamerica-east1", 203},
	{"europe-west2", "us-central1", 100},
	{"europe-west2", "us-east1", 86},
	{"europe-west2", "us-east4", 76},
	{"europe-west2", "us-west1", 132.5},
	{"europe-west3", "europe-west4", 7},
	{"europe-west3", "northamerica-northeast1", 92},
	{"europe-west3", "southamerica-east1", 214},
	{"europe-west3", "us-central1", 110},
	{"europe-west3", "us-east1", 98},
	{"europe-west3", "us-east4", 86},
	{"europe-west3", "us-west1", 143},
	{"europe-west4", "northamerica-northeast1", 94.5},
	{"europe-west4", "southamerica-east1", 212},
	{"europe-west4", "us-central1", 106.5},
	{"europe-west4", "us-east1", 98},
	{"europe-west4", "us-east4", 84},
	{"europe-west4", "us-west1", 172.5},
	{"northamerica-northeast1", "southamerica-east1", 142},
	{"northamerica-northeast1", "us-central1", 32},
	{"northamerica-northeast1", "us-east1", 25},
	{"northamerica-northeast1", "us-east4", 14},
	{"northamerica-northeast1", "us-west1", 65},
	{"southamerica-east1", "us-central1", 144},
	{"southamerica-east1", "us-east1", 117},
	{"southamerica-east1", "us-east4", 129},
	{"southamerica-east1", "us-west1", 171},
	{"us-central1", "us-east1", 36},
	{"us-central1", "us-east4", 25},
	{"us-central1", "us-west1", 35.5},
	{"us-east1", "us-east4", 12},
	{"us-east1", "us-west1", 81},
	{"us-east4", "us-west1", 58},
}

// The fibre model (see above).
const (
	fibreKmPerMs = 200.0 // light in fibre
	pathStretch  = 1.5
	fixedRTTMs   = 2.0
	// anchorKm is how far a region may be from the measured region whose
	// RTTs it borrows.
	anchorKm = 1500.0
)

type regionPair struct{ a, b string }

var (
	measured = func() map[regionPair]float64 {
		m := make(map[regionPair]float64, 2*len(measuredRTT))
		for _, e := range measuredRTT {
			m[regionPair{e.a, e.b}] = e.ms
			m[regionPair{e.b, e.a}] = e.ms
		}
		return m
	}()
	measuredRegions = func() []string {
		seen := map[string]bool{}
		var l []string
		for _, e := range measuredRTT {
			for _, r := range []string{e.a, e.b} {
				if !seen[r] {
					seen[r] = true
					l = append(l, r)
				}
			}
		}
		return l
	}()
)

// FibreRTTMs estimates the round-trip time in ms over d km of great
// circle: 2 · d · 1.5 / 200 + 2.
func FibreRTTMs(km float64) float64 { return 2*km*pathStretch/fibreKmPerMs + fixedRTTMs }

// KnownRTT returns the approximate round-trip time in ms between two
// built-in Google Cloud regions: measured (2018) where the pair was, else
// estimated (see measuredRTT). It is symmetric; ok is false unless both
// are built-in regions.
func KnownRTT(a, b string) (ms float64, ok bool) {
	la, oa, ok1 := KnownRegionLocation(a)
	lb, ob, ok2 := KnownRegionLocation(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	if a == b {
		return 0, true
	}
	if v, ok := measured[regionPair{a, b}]; ok {
		return v, true
	}
	d := DistanceKm(la, oa, lb, ob)
	A, B := anchor(a), anchor(b)
	if A == "" || B == "" || A == B {
		return FibreRTTMs(d), true
	}
	est := measured[regionPair{A, B}] + 2*pathStretch/fibreKmPerMs*(d-knownDistanceKm(A, B))
	return math.Max(est, 2*d/fibreKmPerMs), true
}

// anchor returns r if its RTTs were measured, else the nearest measured
// region within anchorKm, else "".
func anchor(r string) string {
	best, bestD := "", anchorKm
	for _, m := range measuredRegions {
		if m == r {
			return r
		}
		if d := knownDistanceKm(r, m); d <= bestD {
			best, bestD = m, d
		}
	}
	return best
}

func knownDistanceKm(a, b string) float64 {
	la, oa, _ := KnownRegionLocation(a)
	lb, ob, _ := KnownRegionLocation(b)
	return DistanceKm(la, oa, lb, ob)
}
