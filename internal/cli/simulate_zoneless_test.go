package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/serve/report"
)

// simulate reports zone-less groups (serverless NEGs) under their own
// region, with the region as their zone, against golden outputs (issue
// 24: the winticket table showed an empty zone under asia-northeast1 and
// no request anywhere although Osaka served them all).
func TestSimulateZonelessGolden(t *testing.T) {
	winticket := filepath.Join("..", "..", "examples", "winticket", "config.yaml")
	mixed := filepath.Join("..", "sim", "testdata", "zoneless-mixed.yaml")
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"winticket-steady", []string{"--config", winticket}},
		{"winticket-osaka-down", []string{"--config", winticket, "--down", "neg-osaka"}},
		{"zoneless-mixed-one-client", []string{"--config", mixed, "--client-ip", "198.51.100.7", "--spread-clients", "20"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			code, out, errOut := runMain(t, append([]string{"simulate"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			path := filepath.Join("testdata", "simulate", tt.golden+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/cli -run TestSimulateZonelessGolden -update)", err)
			}
			if out != string(want) {
				t.Errorf("simulate %s differs from %s:\n%s", strings.Join(tt.args, " "), path, out)
			}
		})
	}
}

// get-health names a regional group's zone by its region, in the backend
// table and in the per-frontend split, as simulate and the lab do.
func TestPrintHealthZoneless(t *testing.T) {
	r := &report.Health{Services: []report.Service{{
		Name: "bs-default", Algorithm: "WATERFALL_BY_REGION", Threshold: 70,
		Backends: []report.Backend{
			{Group: "neg-osaka", Region: "asia-northeast2", Preference: "DEFAULT", Healthy: 1, Members: 1, Share: 1},
			{Group: "mig-a", Zone: "us-east1-b", Region: "us-east1", Preference: "DEFAULT", Healthy: 1, Members: 1},
		},
		Frontends: []report.FrontendSplit{{Frontend: "fe", ClientRegion: "asia-northeast2", Backends: []report.SplitShare{
			{Group: "neg-osaka", Share: 1},
			{Group: "mig-a", Zone: "us-east1-b"},
		}}},
	}}}
	var out bytes.Buffer
	PrintHealth(&out, r)
	for _, want := range []string{
		"  neg-osaka              asia-northeast2 DEFAULT",
		"  mig-a                  us-east1-b     DEFAULT",
		"    neg-osaka              asia-northeast2 100.0%",
		"    mig-a                  us-east1-b       0.0%",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("get-health output lacks %q:\n%s", want, out.String())
		}
	}
}
