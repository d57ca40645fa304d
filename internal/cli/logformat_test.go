package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/serve/report"
)

// --log-format json writes one JSON object a line; an unknown format is
// refused before serving.
func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "json", slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("frontend listening", "frontend", "fe")
	var v map[string]any
	if err := json.Unmarshal(buf.Bytes(), &v); err != nil || v["msg"] != "frontend listening" || v["frontend"] != "fe" {
		t.Errorf("json log line %q: %v %v", buf.String(), v, err)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfgFile, []byte(adminTestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runMain(t, "serve", "--config", cfgFile, "--watch", "0", "--log-format", "xml")
	if code == 0 || !strings.Contains(errOut, "--log-format") {
		t.Errorf("--log-format xml: exit %d, stderr %q", code, errOut)
	}
}

// get-health prints, per frontend, the split its region gets and the
// split its requests took.
func TestPrintHealthFrontendSplit(t *testing.T) {
	r := &report.Health{Services: []report.Service{{
		Name: "bs", Algorithm: "WATERFALL_BY_REGION", Threshold: 70,
		Frontends: []report.FrontendSplit{
			{Frontend: "fe", ClientRegion: "us-east1", MeasuredRequests: 200, Backends: []report.SplitShare{
				{Group: "neg-b", Zone: "us-east1-b", Share: 0.5, MeasuredShare: 0.53},
				{Group: "neg-c", Zone: "us-east1-c", Share: 0.5, MeasuredShare: 0.47},
			}},
			{Frontend: "fe-noregion", Backends: []report.SplitShare{{Group: "neg-b", Zone: "us-east1-b", Share: 1}}},
		},
	}}}
	var out bytes.Buffer
	PrintHealth(&out, r)
	for _, want := range []string{
		"seen from frontend fe (client region us-east1; measured over 200 requests)",
		"neg-b                  us-east1-b      50.0%     53.0%",
		"seen from frontend fe-noregion (client region none; measured over 0 requests)",
		"neg-b                  us-east1-b     100.0%         -",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("get-health output lacks %q:\n%s", want, out.String())
		}
	}
}
