package cli

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/validate/*.golden")

// TestValidateAdviceGolden: validate's advice on seed 000's configs, with
// and without a stated load (--rate), against golden outputs.
func TestValidateAdviceGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"baseline", []string{"--config", "../../examples/seed-70-30/baseline.yaml"}},
		{"baseline-rate-1500", []string{"--config", "../../examples/seed-70-30/baseline.yaml", "--rate", "1500"}},
		{"with-policy-rate-1000", []string{"--config", "../../examples/seed-70-30/with-policy.yaml", "--rate", "1000"}},
		{"with-policy-rate-1500", []string{"--config", "../../examples/seed-70-30/with-policy.yaml", "--rate", "1500"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			code, out, errOut := runMain(t, append([]string{"validate"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			path := filepath.Join("testdata", "validate", tt.golden+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/cli -run TestValidateAdviceGolden -update)", err)
			}
			if out != string(want) {
				t.Errorf("stdout differs from %s:\n got:\n%s\nwant:\n%s", path, out, want)
			}
		})
	}
}

// TestValidateRateRefused: a negative --rate is a usage error.
func TestValidateRateRefused(t *testing.T) {
	code, _, errOut := runMain(t, "validate", "--config", "../../examples/seed-70-30/baseline.yaml", "--rate", "-5")
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, errOut)
	}
}
