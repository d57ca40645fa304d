package engine_test

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/engine"
)

// TestPickInRegionStaysInRegion: a regional layer's picks stay in its
// region, in the proportions the region's own split gives its zones,
// also when the waterfall from that region spills elsewhere.
func TestPickInRegionStaysInRegion(t *testing.T) {
	p, st := build(t, "  loadBalancingAlgorithm: SPRAY_TO_REGION\n",
		group{zone: "us-east1-b", members: 3}, group{zone: "us-east1-c", members: 1},
		group{zone: "europe-west1-b", members: 2})
	east, eu := p.RegionIndex["us-east1"], p.RegionIndex["europe-west1"]
	v := engine.NewView(st)
	counts := map[string]int{}
	const n = 4000
	for i := range n {
		d := v.PickInRegion(0, east, uint64(i)*0x9e3779b97f4a7c15, 0, false)
		if d.Status != 0 {
			t.Fatalf("status %d: %s", d.Status, d.Reason)
		}
		counts[d.Backend.Group.Zone]++
	}
	if counts["europe-west1-b"] != 0 {
		t.Fatalf("a pick left the region: %v", counts)
	}
	// SPRAY_TO_REGION by capacity: 300 vs 100 rps.
	if f := float64(counts["us-east1-b"]) / n; f < 0.70 || f > 0.80 {
		t.Errorf("us-east1-b got %.2f of the region's picks, want 0.75: %v", f, counts)
	}
	// The region is unhealthy: the split of its own clients spills to
	// Europe; the regional layer still serves from what is left there
	// (the one healthy endpoint in us-east1-c), never from Europe.
	setHealthy(p, st, 0, 0, t0)
	v = engine.NewView(st)
	for i := range 100 {
		d := v.PickInRegion(0, east, uint64(i)*0x9e3779b97f4a7c15, 0, false)
		if d.Status != 0 || d.Backend.Group.Zone != "us-east1-c" {
			t.Fatalf("pick %d: %+v", i, d)
		}
	}
	setHealthy(p, st, 1, 0, t0)
	v = engine.NewView(st)
	if d := v.PickInRegion(0, east, 1, 0, false); d.Status != 503 || d.Reason == "" {
		t.Fatalf("no healthy backend in region: %+v", d)
	}
	if d := v.PickInRegion(0, eu, 1, 0, false); d.Status != 0 || d.Backend.Group.Zone != "europe-west1-b" {
		t.Fatalf("europe: %+v", d)
	}
	if d := v.PickInRegion(0, -1, 1, 0, false); d.Status != 503 {
		t.Fatalf("region -1: %+v", d)
	}
}

// TestPickExceptInRegion: a retry in the regional layer goes to another
// endpoint of the region, then to another zone of it, never out of it.
func TestPickExceptInRegion(t *testing.T) {
	p, st := build(t, "", group{zone: "us-east1-b", members: 2}, group{zone: "us-east1-c", members: 1}, group{zone: "europe-west1-b", members: 2})
	east := p.RegionIndex["us-east1"]
	v := engine.NewView(st)
	for i := range 200 {
		u := uint64(i) * 0x9e3779b97f4a7c15
		d := v.PickInRegion(0, east, u, 0, false)
		r := v.PickExceptInRegion(0, east, u, d.Endpoint)
		if r.Status != 0 || r.Endpoint == d.Endpoint || r.Backend.Group.RegionID != east {
			t.Fatalf("retry after %s: %+v", d.Endpoint.Addr, r)
		}
	}
}

// TestPickAvoiding: an edge avoiding a region goes to the next region in
// the failover order; avoiding every region is a 503.
func TestPickAvoiding(t *testing.T) {
	p, st := build(t, "", group{zone: "us-east1-b", members: 2}, group{zone: "us-west1-a", members: 2}, group{zone: "europe-west1-b", members: 2})
	east, west, eu := p.RegionIndex["us-east1"], p.RegionIndex["us-west1"], p.RegionIndex["europe-west1"]
	v := engine.NewView(st)
	c := engine.Client{Region: east}
	avoid := make([]bool, len(p.Regions))
	if d := v.PickAvoiding(0, c, 1, 0, false, avoid); d.Status != 0 || d.Backend.Group.RegionID != east {
		t.Fatalf("nothing avoided: %+v", d)
	}
	avoid[east] = true
	if d := v.PickAvoiding(0, c, 1, 0, false, avoid); d.Status != 0 || d.Backend.Group.RegionID != west {
		t.Fatalf("us-east1 avoided, want the nearest other region us-west1: %+v", d)
	}
	avoid[west] = true
	if d := v.PickAvoiding(0, c, 1, 0, false, avoid); d.Status != 0 || d.Backend.Group.RegionID != eu {
		t.Fatalf("want europe-west1: %+v", d)
	}
	avoid[eu] = true
	if d := v.PickAvoiding(0, c, 1, 0, false, avoid); d.Status != 503 {
		t.Fatalf("every region avoided: %+v", d)
	}
}

func BenchmarkPickInRegion(b *testing.B) {
	p, st := build(b, "", group{zone: "us-east1-b", members: 10}, group{zone: "us-east1-c", members: 10})
	v := engine.NewView(st)
	r := p.RegionIndex["us-east1"]
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		v.PickInRegion(0, r, uint64(i)*0x9e3779b97f4a7c15, 0, false)
	}
}
