package sim_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spillwaylb/spillway/internal/sim"
)

// Zone-less groups (serverless and internet NEGs are regional) count under
// their own region, with the region as their zone, as the lab places them
// (issue 24: every request counted nowhere, and the empty zone was printed
// under the first region's name).
func TestZonelessGroupsCountUnderTheirRegion(t *testing.T) {
	winticket := filepath.Join("..", "..", "examples", "winticket", "config.yaml")
	mixed := filepath.Join("testdata", "zoneless-mixed.yaml")
	for _, tc := range []struct {
		name   string
		config string
		o      sim.Options
		want   map[string]int // zone (or regional group's region) → requests
	}{
		{"winticket steady: Osaka serves", winticket, sim.Options{},
			map[string]int{"asia-northeast2": 1000, "asia-northeast1": 0}},
		{"winticket Osaka down: Tokyo serves", winticket, sim.Options{Down: []string{"neg-osaka"}},
			map[string]int{"asia-northeast2": 0, "asia-northeast1": 1000}},
		{"winticket from Tokyo", winticket, sim.Options{ClientRegion: "asia-northeast1"},
			map[string]int{"asia-northeast2": 0, "asia-northeast1": 1000}},
		{"zonal and regional groups in one region", mixed, sim.Options{},
			map[string]int{"asia-northeast1-a": 500, "asia-northeast1": 500, "asia-northeast2": 0}},
		{"regional group of a region down by name", mixed, sim.Options{Down: []string{"asia-northeast1"}},
			map[string]int{"asia-northeast1-a": 0, "asia-northeast1": 0, "asia-northeast2": 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Requests, tc.o.Seed = 1000, 1
			r, err := sim.Run(load(t, tc.config), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			zones := slices.Sorted(func(yield func(string) bool) {
				for z := range tc.want {
					if !yield(z) {
						return
					}
				}
			})
			if !slices.Equal(r.ZoneOrder, zones) {
				t.Errorf("zones %q, want %q (no empty zone)", r.ZoneOrder, zones)
			}
			for z, n := range tc.want {
				if r.Zones[z] != n {
					t.Errorf("zone %s: %d requests, want %d (all zones %v)", z, r.Zones[z], n, r.Zones)
				}
			}
			served := 0
			for _, n := range r.Zones {
				served += n
			}
			regions := 0
			for _, n := range r.Regions {
				regions += n
			}
			if served != r.Status["200"] || regions != served {
				t.Errorf("zones count %d, regions %d, want both the %d answered (zones %v, regions %v)", served, regions, r.Status["200"], r.Zones, r.Regions)
			}
			for _, s := range r.Services {
				for _, b := range s.Backends {
					if b.Zone == "" {
						t.Errorf("service %s group %s: empty zone, want its region", s.Name, b.Group)
					}
				}
			}
		})
	}
}

// A regional group's zone is named as its region: the client spread gives
// that key the region's range when the two agree, and leaves it out when
// the region has zonal groups too (it mixed both counts into one range).
func TestClientSpreadZonelessKeys(t *testing.T) {
	for _, tc := range []struct {
		config  string
		want    map[string]float64 // key → its P5 and P95
		without string             // an ambiguous key, left out
	}{
		{filepath.Join("..", "..", "examples", "winticket", "config.yaml"),
			map[string]float64{"asia-northeast2": 100, "asia-northeast1": 0}, ""},
		{filepath.Join("testdata", "zoneless-mixed.yaml"),
			map[string]float64{"asia-northeast1-a": 50, "asia-northeast2": 0}, "asia-northeast1"},
	} {
		spread, err := sim.ClientSpread(load(t, tc.config), sim.Options{Requests: 400, Seed: 1}, 20)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.want {
			if zr, ok := spread[k]; !ok || math.Abs(zr.P5-v) > 2 || math.Abs(zr.P95-v) > 2 {
				t.Errorf("%s: %s spread %+v (present %v), want %.0f%% (±2, the URL map's weighted draw) for every client", tc.config, k, zr, ok, v)
			}
		}
		if zr, ok := spread[tc.without]; tc.without != "" && ok {
			t.Errorf("%s: %s is a zone and a region with different shares, got one range %+v", tc.config, tc.without, zr)
		}
	}
}
