package dashboard

import (
	"slices"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/cdnpolicy"
	"github.com/spillwaylb/spillway/internal/plan"
)

// The hit ratio is hits over hits and misses, per step and over the last
// 10 s, for every CDN-enabled service and bucket (services first), and
// "no lookup" (-1) where there were none.
func TestCDNViews(t *testing.T) {
	t0 := time.Unix(0, 0)
	on := &cdnpolicy.Policy{}
	p := &plan.Plan{
		ServiceByName: map[string]*plan.Service{"web": {Name: "web", CDN: on}, "api": {Name: "api"}, "img": {Name: "img", CDN: on}},
		Buckets:       map[string]*plan.Bucket{"static": {Name: "static", CDN: on}, "raw": {Name: "raw"}},
	}
	samples := []dashSample{
		{at: t0, cdn: map[string]CDNCounts{"web": {}}},
		{at: t0.Add(time.Second), cdn: map[string]CDNCounts{"web": {Hits: 3, Misses: 1}}},
		{at: t0.Add(2 * time.Second), cdn: map[string]CDNCounts{"web": {Hits: 3, Misses: 1}, "static": {Hits: 9, Misses: 1}}},
		{at: t0.Add(3 * time.Second), cdn: map[string]CDNCounts{"web": {Hits: 12, Misses: 4}, "static": {Hits: 9, Misses: 1}}},
	}
	got := cdnViews(samples, p)
	var names []string
	for _, v := range got {
		names = append(names, v.Kind+" "+v.Backend)
	}
	if want := []string{"service img", "service web", "bucket static"}; !slices.Equal(names, want) {
		t.Fatalf("rows %q, want %q", names, want)
	}
	img, web, static := got[0], got[1], got[2]
	if img.HitRatio != -1 || img.Lookups != 0 {
		t.Errorf("img without lookups: %+v", img)
	}
	if web.HitRatio != 0.75 || web.Lookups != 16.0/3 || web.Hits != 12 || web.Misses != 4 || !slices.Equal(web.Series, []float64{0.75, -1, 0.75}) {
		t.Errorf("web: %+v, want ratio 0.75, 16 lookups in 3 s, series [0.75 -1 0.75]", web)
	}
	if static.HitRatio != 0.9 || !slices.Equal(static.Series, []float64{-1, 0.9, -1}) {
		t.Errorf("static: %+v, want ratio 0.9, series [-1 0.9 -1]", static)
	}
}
