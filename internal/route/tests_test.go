package route

import (
	"os"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
)

func loadURLMap(t *testing.T, file string) *config.URLMap {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, file)
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	if len(cfg.URLMaps) != 1 {
		t.Fatalf("%s: %d url maps, want 1", file, len(cfg.URLMaps))
	}
	return &cfg.URLMaps[0]
}

func TestRunTestsTestdata(t *testing.T) {
	m := loadURLMap(t, "testdata/urlmap_tests.yaml")
	tab := mustCompile(t, m)
	if len(m.Tests) < 5 {
		t.Fatalf("testdata has %d tests, want at least 5", len(m.Tests))
	}
	for _, f := range tab.RunTests(m.Tests) {
		t.Errorf("%s", f)
	}
}

func TestRunTestsReportsFailures(t *testing.T) {
	m := loadURLMap(t, "testdata/urlmap_tests.yaml")
	tab := mustCompile(t, m)
	wrong := []config.URLMapTest{
		{Host: "www.example.com", Path: "/checkout", Service: "projects/P/global/backendServices/web-v2"},
		{Host: "www.example.com", Path: "/api/v1/x", Service: "api", ExpectedOutputURL: "http://api.internal/v1/x"},
		{Host: "example.com", Path: "/", ExpectedRedirectResponseCode: 302},
		{Host: "example.com", Path: "/", Service: "web-v1"},
		{Host: "www.example.com", Path: "/", ExpectedRedirectResponseCode: 301},
	}
	fails := tab.RunTests(append(append([]config.URLMapTest{}, m.Tests...), wrong...))
	if len(fails) != len(wrong) {
		for _, f := range fails {
			t.Log(f)
		}
		t.Fatalf("%d failures, want %d", len(fails), len(wrong))
	}
	want := []struct{ want, got string }{
		{"service web-v2", "service web-v1, url http://www.example.com/checkout (urlMaps[web-map].pathMatchers[web].routeRules[priority=10])"},
		{"url http://api.internal/v1/x", "url http://api.internal/x"},
		{"redirect 302", "redirect 301 to https://www.example.com/ (urlMaps[web-map].pathMatchers[to-www].default)"},
		{"service web-v1", "redirect 301 to https://www.example.com/ (urlMaps[web-map].pathMatchers[to-www].default)"},
		{"redirect 301", "service web-v1, url http://www.example.com/ (urlMaps[web-map].pathMatchers[web].routeRules[priority=10])"},
	}
	for i, f := range fails {
		if f.Index != len(m.Tests)+i || f.Want != want[i].want || f.Got != want[i].got {
			t.Errorf("failure %d = %+v, want index %d, want %q, got %q", i, f, len(m.Tests)+i, want[i].want, want[i].got)
		}
	}
	s := fails[0].String()
	for _, part := range []string{"host=www.example.com", "path=/checkout", "want service web-v2", "got service web-v1"} {
		if !strings.Contains(s, part) {
			t.Errorf("String() = %q, missing %q", s, part)
		}
	}
}
