package route

import (
	"fmt"
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
)

// fiftyRules is a URL map whose path matcher has 50 route rules, each a
// prefix plus a header match.
func fiftyRules() *config.URLMap {
	pm := config.PathMatcher{Name: "pm", DefaultService: "svc-default"}
	for i := 1; i <= 50; i++ {
		pm.RouteRules = append(pm.RouteRules, config.HTTPRouteRule{
			Priority: i,
			MatchRules: []config.HTTPRouteRuleMatch{{
				PrefixMatch:   fmt.Sprintf("/api/v%d/", i),
				HeaderMatches: []config.HTTPHeaderMatch{{HeaderName: "x-tenant", ExactMatch: ptr(fmt.Sprintf("t%d", i))}},
			}},
			Service: fmt.Sprintf("svc-%d", i),
		})
	}
	return &config.URLMap{
		Name:           "bench",
		DefaultService: "svc-default",
		HostRules:      []config.HostRule{{Hosts: []string{"api.example.com"}, PathMatcher: "pm"}},
		PathMatchers:   []config.PathMatcher{pm},
	}
}

func BenchmarkMatch50Rules(b *testing.B) {
	tab := mustCompile(b, fiftyRules())
	h := map[string]string{"X-Tenant": "t40"}
	r := &Request{Host: "api.example.com", Path: "/api/v40/items", Method: "GET", Header: func(n string) (string, bool) { v, ok := h[n]; return v, ok }}
	if a := tab.Match(r); a.Services[0].Name != "svc-40" {
		b.Fatalf("matched %s", a.Source)
	}
	b.ReportAllocs()
	for b.Loop() {
		tab.Match(r)
	}
}

func BenchmarkMatchCanary(b *testing.B) {
	tab := mustCompile(b, goldenURLMap())
	r := &Request{Host: "www.example.com", Path: "/cart", Method: "GET", Header: headers(map[string]string{"x-canary": "never"})}
	b.ReportAllocs()
	var u uint64
	for b.Loop() {
		u += 0x9e3779b97f4a7c15
		tab.Match(r).PickService(u)
	}
}

func BenchmarkMatchPathRules(b *testing.B) {
	tab := mustCompile(b, goldenURLMap())
	r := &Request{Host: "Static.Example.com:443", Path: "/images/hd/a.png", Method: "GET"}
	b.ReportAllocs()
	for b.Loop() {
		tab.Match(r)
	}
}

// BenchmarkNormalizePath is the per-request normalisation: an already
// normal path (must not allocate) and one that needs work.
func BenchmarkNormalizePath(b *testing.B) {
	for _, p := range []string{"/api/v40/items", "/public/./a/../%7Esecret//x"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n, _ := NormalizePath(p, PathOptions{})
				MatchPath(n, PathOptions{})
			}
		})
	}
}
