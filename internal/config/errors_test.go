package config

import (
	"errors"
	"testing"
)

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		e    FieldError
		want string
	}{
		{FieldError{File: "a.yaml", Line: 3, Path: "regions[0].latitude", Msg: "91 is out of range", Fix: "use a value between -90 and 90"},
			"a.yaml:3: regions[0].latitude: 91 is out of range (fix: use a value between -90 and 90)"},
		{FieldError{File: "a.yaml", Path: "regions[0]", Msg: "bad"}, "a.yaml: regions[0]: bad"},
		{FieldError{Line: 7, Msg: "bad", Fix: "fix it"}, "line 7: bad (fix: fix it)"},
		{FieldError{Msg: "bad"}, "bad"},
		{FieldError{File: "a.yaml", Line: 3, Column: 7, Path: "regions[r]", Msg: "bad"}, "a.yaml:3:7: regions[r]: bad"},
		{FieldError{Line: 7, Column: 2, Msg: "bad"}, "line 7, column 2: bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorsUnwrap(t *testing.T) {
	first := &FieldError{File: "a.yaml", Line: 1, Msg: "one"}
	second := &FieldError{File: "a.yaml", Line: 2, Msg: "two"}
	var err error = Errors{first, second}
	if got, want := err.Error(), "a.yaml:1: one\na.yaml:2: two"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, second) {
		t.Errorf("errors.Is does not find the second error")
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe != first {
		t.Errorf("errors.As = %v, want the first error", fe)
	}
}

func TestValidateWithoutPositions(t *testing.T) {
	scaler := 0.05
	cfg := &Config{
		File:                  "built-in",
		NetworkEndpointGroups: []NetworkEndpointGroup{{Name: "neg", Zone: "us-east1-b", DefaultPort: 80, Endpoints: []NetworkEndpoint{{IPAddress: "10.0.0.1"}}}},
		BackendServices: []BackendService{{Name: "bs", Backends: []Backend{
			{Group: "neg", CapacityScaler: &scaler},
		}}},
	}
	want := "built-in: backendServices[bs].backends[neg].capacityScaler: 0.05 is out of range (fix: use 0 to drain the backend, or a value between 0.1 and 1.0)"
	err := cfg.Validate()
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
	cfg.BackendServices[0].Backends[0].CapacityScaler = nil
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

// TestNamedPaths: an index in a field path becomes the element's name
// where it has one that no sibling shares and that cannot be taken for
// an index; the rest of a path that does not match the configuration is
// kept as written.
func TestNamedPaths(t *testing.T) {
	c := &Config{
		BackendServices: []BackendService{
			{Name: "bs-web", Backends: []Backend{{Group: "projects/p/zones/z/instanceGroups/mig-a"}, {Group: "mig-b"}, {Group: "mig-b"}}},
			{Name: "42"},
			{Name: ""},
		},
		HealthChecks: []HealthCheck{{Name: "hc"}, {Name: "hc"}},
		URLMaps:      []URLMap{{Name: "um", PathMatchers: []PathMatcher{{Name: "pm", RouteRules: []HTTPRouteRule{{Priority: 10}, {Priority: 20}}}}}},
		Regions:      []Region{{Name: "r", RTTMs: map[string]float64{"us-east1": 1}}},
	}
	n := newNamer(c)
	for in, want := range map[string]string{
		"backendServices[0].backends[0].capacityScaler":    "backendServices[bs-web].backends[mig-a].capacityScaler",
		"backendServices[0].backends[1]":                   "backendServices[bs-web].backends[1]", // mig-b twice
		"backendServices[1].name":                          "backendServices[1].name",             // "42" reads as an index
		"backendServices[2].name":                          "backendServices[2].name",             // no name
		"backendServices[7].name":                          "backendServices[7].name",             // past the end
		"healthChecks[1].name":                             "healthChecks[1].name",                // hc twice
		"urlMaps[0].pathMatchers[0].routeRules[1].service": "urlMaps[um].pathMatchers[pm].routeRules[priority=20].service",
		"regions[0].rttMs.us-east1":                        "regions[r].rttMs.us-east1",
		"regions[0].rttMs.mars.x[0]":                       "regions[r].rttMs.mars.x[0]", // no such key
		"backendServices[0].outlierDetection.interval":     "backendServices[bs-web].outlierDetection.interval",
		"": "",
	} {
		if got := n.path(in); got != want {
			t.Errorf("path(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRepeatedMistakeGrouped: the same message and fix on the same field
// of several elements is one error listing the other places; the same
// message on different fields, or at one path twice, is not.
func TestRepeatedMistakeGrouped(t *testing.T) {
	es := Errors{
		{Line: 3, Path: "backendServices[0].backends[0].balancingMode", Msg: "bad", Fix: "f"},
		{Line: 5, Path: "backendServices[0].backends[1].balancingMode", Msg: "bad", Fix: "f"},
		{Line: 9, Path: "backendServices[1].backends[0].balancingMode", Msg: "bad", Fix: "f"},
		{Line: 11, Path: "backendServices[1].backends[0].maxRate", Msg: "bad", Fix: "f"},
		{Line: 12, Path: "backendServices[1].backends[0].maxRate", Msg: "bad", Fix: "f"},
		{Line: 13, Path: "backendServices[2].backends[0].balancingMode", Msg: "worse", Fix: "f"},
	}
	got := sortAndCap(es)
	if len(got) != 4 || len(got[0].Also) != 2 || got[0].Also[1].Line != 9 || len(got[1].Also) != 0 || len(got[2].Also) != 0 {
		t.Fatalf("grouped into %v", got)
	}
	want := "line 3: backendServices[0].backends[0].balancingMode: bad (fix: f); the same in 2 more places: backendServices[0].backends[1].balancingMode (line 5), backendServices[1].backends[0].balancingMode (line 9)"
	if got[0].Error() != want {
		t.Errorf("Error() = %q, want %q", got[0].Error(), want)
	}
}
