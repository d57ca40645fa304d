package route

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
)

func TestActions(t *testing.T) {
	m := &config.URLMap{
		Name:           "um",
		DefaultService: bs + "web-v1",
		HostRules:      []config.HostRule{{Hosts: []string{"www.example.com"}, PathMatcher: "web"}},
		PathMatchers:   []config.PathMatcher{canaryMatcher()},
	}
	tab, err := Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	weighted := 0
	for _, a := range tab.Actions() {
		got = append(got, a.Source)
		if len(a.Services) > 1 {
			weighted++
			if a.Services[0].Weight != 950 || a.Services[1].Weight != 50 {
				t.Errorf("weighted action %s: weights %d/%d, want 950/50", a.Source, a.Services[0].Weight, a.Services[1].Weight)
			}
		}
	}
	// The URL map's default, the path matcher's default and its two route
	// rules, once each.
	if len(got) != 4 || weighted != 1 {
		t.Fatalf("Actions() = %q (%d weighted), want 4 actions, 1 weighted", got, weighted)
	}
	seen := map[string]bool{}
	for _, s := range got {
		if seen[s] {
			t.Errorf("action %s listed twice", s)
		}
		seen[s] = true
	}
}
