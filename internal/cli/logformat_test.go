package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
