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
func BenchmarkPickSeed(b *testing.B) { benchPickSeed(b, "with-policy", false) }

// BenchmarkPickSeedClient is the proxy's decision on the seed's no-policy
// config (WATERFALL_BY_REGION): the client's address hashed, then a pick
// through the client's second-layer proxies.
func BenchmarkPickSeedClient(b *testing.B) { benchPickSeed(b, "no-policy", true) }

func benchPickSeed(b *testing.B, cfg string, client bool) {
	c, err := config.Load(filepath.Join("..", "..", "examples", "seed-70-30", cfg+".yaml"))
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
		var d engine.Decision
		if client {
			cl := engine.Client{Region: region, Addr: engine.HashKey("203.0.113.7"), HasAddr: true}
			d = v.PickClient(svc.ID, cl, v.NextDraw(svc.ID, region), 0, false)
		} else {
			d = v.Pick(svc.ID, region, v.NextDraw(svc.ID, region))
		}
		if d.Endpoint == nil {
			b.Fatal("no endpoint")
		}
	}
}
