package plan

import (
	"math"
	"sort"
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
)

// order returns the regions of names other than client, nearest first by
// the proximity matrix, ties by name (as the engine orders levels).
func order(client string, names []string, regions []config.Region) []string {
	sort.Strings(names)
	d := distances(names, regions)
	idx := map[string]int{}
	for i, n := range names {
		idx[n] = i
	}
	c := idx[client]
	var out []string
	for _, n := range names {
		if n != client {
			out = append(out, n)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		di, dj := d[c][idx[out[i]]], d[c][idx[out[j]]]
		if di != dj {
			return di < dj
		}
		return out[i] < out[j]
	})
	return out
}

func f(v float64) *float64 { return &v }

func TestProximityOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		client  string
		others  []string
		regions []config.Region
		want    []string
	}{
		{
			// Issue 12: by great-circle distance Tokyo is nearer Belgium
			// than South Carolina; by RTT it is not.
			name: "asia-northeast1 by RTT", client: "asia-northeast1",
			others: []string{"europe-west1", "us-east1", "us-west1"},
			want:   []string{"us-west1", "us-east1", "europe-west1"},
		},
		{
			name: "rttMs override beats the table", client: "asia-northeast1",
			others:  []string{"europe-west1", "us-east1", "us-west1"},
			regions: []config.Region{{Name: "europe-west1", RTTMs: map[string]float64{"asia-northeast1": 50}}},
			want:    []string{"europe-west1", "us-west1", "us-east1"},
		},
		{
			name: "override given on the client's side", client: "asia-northeast1",
			others:  []string{"europe-west1", "us-east1", "us-west1"},
			regions: []config.Region{{Name: "asia-northeast1", RTTMs: map[string]float64{"us-east1": 10}}},
			want:    []string{"us-east1", "us-west1", "europe-west1"},
		},
		{
			name: "coordinates-only custom regions", client: "lisbon",
			others: []string{"oslo", "madrid", "nowhere"},
			regions: []config.Region{
				{Name: "lisbon", Latitude: f(38.72), Longitude: f(-9.14)},
				{Name: "madrid", Latitude: f(40.42), Longitude: f(-3.70)},
				{Name: "oslo", Latitude: f(59.91), Longitude: f(10.75)},
				{Name: "nowhere"},
			},
			want: []string{"madrid", "oslo", "nowhere"},
		},
		{
			name: "custom region near built-in ones", client: "lisbon",
			others:  []string{"europe-north1", "europe-southwest1", "us-east1"},
			regions: []config.Region{{Name: "lisbon", Latitude: f(38.72), Longitude: f(-9.14)}},
			want:    []string{"europe-southwest1", "europe-north1", "us-east1"},
		},
		{
			// europe-north1 has no measured pair: its estimate borrows
			// the measured RTTs of its nearest measured region
			// (europe-west4), not the great circle (7,800 km from Tokyo).
			name: "asia-northeast1 to an estimated European region", client: "asia-northeast1",
			others: []string{"europe-north1", "us-east1", "us-west1"},
			want:   []string{"us-west1", "us-east1", "europe-north1"},
		},
		{
			name: "europe-north1 client", client: "europe-north1",
			others: []string{"us-east4", "us-south1", "europe-west4"},
			want:   []string{"europe-west4", "us-east4", "us-south1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := order(tc.client, append([]string{tc.client}, tc.others...), tc.regions)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestDistancesAreMilliseconds(t *testing.T) {
	names := []string{"asia-northeast1", "us-west1"}
	d := distances(names, nil)
	// 2018 measurement: 91 and 92 ms one way and the other.
	if got := d[0][1]; got < 80 || got > 100 || d[1][0] != got {
		t.Errorf("asia-northeast1 ↔ us-west1 = %v, %v; want ~92 ms both ways", got, d[1][0])
	}
	d = distances([]string{"a", "b"}, []config.Region{{Name: "a"}, {Name: "b"}})
	if !math.IsInf(d[0][1], 1) {
		t.Errorf("unknown pair = %v, want +Inf", d[0][1])
	}
}

func TestKnownRTT(t *testing.T) {
	all := config.BuiltinRegions()
	for _, r := range all {
		if _, _, ok := KnownRegionLocation(r); !ok {
			t.Errorf("built-in region %s has no location", r)
		}
	}
	seen := map[regionPair]bool{}
	for _, e := range measuredRTT {
		if !config.BuiltinRegion(e.a) || !config.BuiltinRegion(e.b) || e.a >= e.b || seen[regionPair{e.a, e.b}] {
			t.Errorf("measured pair %s, %s: want two built-in regions in order, once", e.a, e.b)
		}
		seen[regionPair{e.a, e.b}] = true
	}
	if len(measuredRTT) != 91 {
		t.Errorf("%d measured pairs, want 91 (14 regions)", len(measuredRTT))
	}
	for _, a := range all {
		for _, b := range all {
			ab, ok1 := KnownRTT(a, b)
			ba, ok2 := KnownRTT(b, a)
			if !ok1 || !ok2 || ab != ba || math.IsInf(ab, 0) || math.IsNaN(ab) || (a != b && ab <= 0) || (a == b && ab != 0) {
				t.Errorf("KnownRTT(%s, %s) = %v, %v; reverse %v, %v", a, b, ab, ok1, ba, ok2)
			}
		}
	}
	for _, tc := range []struct {
		a, b   string
		lo, hi float64
	}{
		{"asia-northeast1", "us-west1", 91.5, 91.5}, // measured
		{"us-west1", "asia-northeast1", 91.5, 91.5}, // symmetric
		{"europe-north1", "europe-west4", 20, 30},   // same anchor: fibre
		{"asia-northeast2", "us-west2", 95, 120},    // both anchored
		{"europe-north1", "asia-northeast1", 200, 240},
		{"australia-southeast1", "us-west1", 150, 200}, // no anchor: fibre
	} {
		if got, ok := KnownRTT(tc.a, tc.b); !ok || got < tc.lo || got > tc.hi {
			t.Errorf("KnownRTT(%s, %s) = %v, %v; want %v..%v", tc.a, tc.b, got, ok, tc.lo, tc.hi)
		}
	}
	if _, ok := KnownRTT("us-east1", "mars-1"); ok {
		t.Error("KnownRTT with an unknown region: ok")
	}
}

func TestWithClientRegion(t *testing.T) {
	names := []string{"us-east4", "us-south1"}
	p := &Plan{Regions: names, RegionIndex: map[string]int{"us-east4": 0, "us-south1": 1}, Distance: distances(names, nil)}
	if q, id, err := p.WithClientRegion("us-south1"); err != nil || q != p || id != 1 {
		t.Errorf("known region: %p %d %v, want p, 1, nil", q, id, err)
	}
	q, id, err := p.WithClientRegion("europe-north1")
	if err != nil || id != 2 || len(q.Regions) != 3 || q.Regions[2] != "europe-north1" || q.RegionIndex["europe-north1"] != 2 {
		t.Fatalf("europe-north1: %v %d %v", q.Regions, id, err)
	}
	if len(p.Regions) != 2 || len(p.Distance) != 2 || len(p.Distance[0]) != 2 || len(p.RegionIndex) != 2 {
		t.Error("WithClientRegion changed p")
	}
	want := distances(q.Regions, nil)
	for i := range want {
		for j := range want[i] {
			if q.Distance[i][j] != want[i][j] {
				t.Errorf("Distance[%d][%d] = %v, want %v", i, j, q.Distance[i][j], want[i][j])
			}
		}
	}
	if q.Distance[2][0] >= q.Distance[2][1] {
		t.Errorf("from europe-north1: us-east4 %v ms, us-south1 %v ms; want us-east4 nearer", q.Distance[2][0], q.Distance[2][1])
	}
	_, _, err = p.WithClientRegion("europe-nort1")
	const msg = `unknown region "europe-nort1" (fix: did you mean "europe-north1"? use a region of this config (us-east4, us-south1) or a built-in Google Cloud region such as europe-north1, europe-west1, europe-west10, or add it to regions[] with a latitude and longitude or rttMs)`
	if err == nil || err.Error() != msg {
		t.Errorf("got %v\nwant %s", err, msg)
	}
}
