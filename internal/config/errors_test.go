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
	want := "built-in: backendServices[0].backends[0].capacityScaler: 0.05 is out of range (fix: use 0 to drain the backend, or a value between 0.1 and 1.0)"
	err := cfg.Validate()
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
	cfg.BackendServices[0].Backends[0].CapacityScaler = nil
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}
