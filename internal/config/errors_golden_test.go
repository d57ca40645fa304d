package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/errors/*.golden")

// TestErrorGolden: each file in testdata/errors fails to load with the
// errors in its .golden file, one-line (Error, for logs and the admin
// API) and explained (Explain, for validate and serve at a terminal: the
// source line and a caret under the column). The files show a YAML
// mistake found on its own line and column (not on the line where the
// enclosing mapping starts), a mistake repeated in six backends reported
// once with its other places, and paths with names, not indexes.
// go test ./internal/config -run TestErrorGolden -update rewrites them.
func TestErrorGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "errors", "*.*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden") {
			continue
		}
		n++
		t.Run(filepath.Base(in), func(t *testing.T) {
			_, err := Load(in)
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("Load(%s) = %v, want configuration errors", in, err)
			}
			got := "Error():\n" + err.Error() + "\n\nExplain():\n" + Explain(err)
			golden := strings.TrimSuffix(in, filepath.Ext(in)) + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/config -run TestErrorGolden -update)", err)
			}
			if got != string(want) {
				t.Errorf("errors of %s:\n%s\nwant (%s):\n%s", in, got, golden, want)
			}
		})
	}
	if n < 8 {
		t.Errorf("%d inputs in testdata/errors, want the 8 or more cases", n)
	}
}

// TestSyntaxErrorPosition: a YAML syntax error is reported at the line
// and column of the mistake. yaml.v3 names the line where the enclosing
// collection starts, which for a file that opens with comments is not
// the mistake's (line 3 for an indentation mistake on line 22).
func TestSyntaxErrorPosition(t *testing.T) {
	seed, err := os.ReadFile(filepath.Join("..", "..", "examples", "seed-70-30", "baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(seed), "\n")
	if !strings.HasPrefix(lines[21], "  zone: ") || !strings.HasPrefix(lines[0], "#") {
		t.Fatalf("the seed's line 22 is %q; the cases below expect a zone under a comment header", lines[21])
	}
	withLine22 := func(s string) string {
		l := append([]string(nil), lines...)
		l[21] = s
		return strings.Join(l, "")
	}
	tests := []struct {
		name      string
		yaml      string
		line, col int
	}{
		{"indented one less", withLine22(" zone: us-south1-b\n"), 22, 2},
		{"indented one more", withLine22("   zone: us-south1-b\n"), 22, 4},
		{"indented two more", withLine22("    zone: us-south1-b\n"), 22, 5},
		{"tab", withLine22("\tzone: us-south1-b\n"), 22, 1},
		{"value with a colon", withLine22("  zone: us-south1-b: a\n"), 22, 20},
		// YAML reads on over the line break; the next key is where it fails.
		{"unclosed bracket", withLine22("  zone: [us-south1-b\n"), 23, 3},
		{"top level, no comment", "regions:\n- name: a\n  latitude: 1\n longitude: 2\n", 4, 2},
		{"second document", "regions: []\n---\nregions: [\n", 3, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yaml")
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse = %v, want a FieldError", err)
			}
			if fe.Line != tt.line || fe.Column != tt.col {
				t.Errorf("Parse = %v; want it at line %d, column %d", err, tt.line, tt.col)
			}
		})
	}
}
