package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics, and that its results keep
// their contracts: a config and no error, or no config and 1..20 errors
// that all name the file.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "valid", "*.yaml"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(baseConfig))
	f.Add([]byte(smallJSON))
	f.Add([]byte("regions: [&a {name: r, <<: *a}]\n"))
	f.Add([]byte("x: &x [*x]\nregions: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err == nil {
			if cfg == nil || cfg.File != "fuzz.yaml" {
				t.Fatalf("Parse returned %v without an error", cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Parse accepted a config that Validate rejects: %v", err)
			}
			return
		}
		if cfg != nil {
			t.Fatalf("Parse returned a config and an error")
		}
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 || len(errs) > maxErrors {
			t.Fatalf("error %T with %d entries, want Errors with 1..%d", err, len(errs), maxErrors)
		}
		for _, e := range errs {
			if e.File != "fuzz.yaml" || e.Msg == "" {
				t.Fatalf("error without file or message: %+v", e)
			}
		}
	})
}
