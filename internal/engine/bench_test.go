package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/route"
)

// BenchmarkPickSeed is one full decision on the seed's config: URL-map
// match and weighted service pick, then tier/region/zone/endpoint.
func BenchmarkPickSeed(b *testing.B) {
	c, err := config.Load(filepath.Join("..", "..", "examples", "seed-70-30", "with-policy.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		b.Fatal(err)
	}
	st := control.New(p)
	v := engine.NewView(st)
	tbl, err := route.Compile(p.URLMaps["um-global-alb"].Config)
	if err != nil {
		b.Fatal(err)
	}
	req := &route.Request{Host: "example.com", Path: "/", Method: "GET"}
	region := p.RegionIndex["us-south1"]
	b.ReportAllocs()
	for b.Loop() {
		// The draws the proxy makes (Weyl sequences, one atomic add each).
		a := tbl.Match(req)
		_, i := a.PickService(a.NextDraw())
		svc := p.ServiceByName[a.Services[i].Name]
		d := v.Pick(svc.ID, region, v.NextDraw(svc.ID, region))
		if d.Endpoint == nil {
			b.Fatal("no endpoint")
		}
	}
}
