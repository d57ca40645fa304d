package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
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
	f.Add([]byte(serverlessConfig))
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

// FuzzLocateSyntaxError checks that locating a YAML syntax error never
// panics and always names a place in the file: a line of it, and a
// column on that line or just past its end.
func FuzzLocateSyntaxError(f *testing.F) {
	for _, name := range []string{"indent-after-comments.yaml", "indent-deeper.yaml", "missing-comma.json", "tab.yaml", "value-with-colon.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "errors", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a: [b,\n  'c''d', \"e\\\"f\n"))
	f.Add([]byte("a: |\n  [x\nb: {c: [d}\n"))
	f.Add([]byte("a: &x !t [b]\n- c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := yamlError(data)
		if err == nil {
			return
		}
		line, col := locateSyntaxError(data, err)
		lines := strings.Split(string(data), "\n")
		if line < 1 || line > len(lines) {
			t.Fatalf("line %d of a file of %d lines (%v)", line, len(lines), err)
		}
		if n := utf8.RuneCountInString(lines[line-1]); col < 1 || col > n+1 {
			t.Fatalf("column %d on line %d of %d characters (%v)", col, line, n, err)
		}
		if _, err := Parse(data, "fuzz.yaml"); err == nil {
			t.Fatalf("Parse accepts what yaml.v3 rejects: %v", yamlError(data))
		}
	})
}
