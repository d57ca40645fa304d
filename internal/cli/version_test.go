package cli

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestBuildVersionFormats checks the version line and JSON for the build
// information of a 'go build' in a dirty git checkout, of 'go install
// ...@v0.3.1' (a module version, no VCS settings) and of a binary without
// build information.
func TestBuildVersionFormats(t *testing.T) {
	checkout := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/spillwaylb/spillway", Version: "v0.0.0-20261201164104-2ab6c3d6cedb+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "2ab6c3d6cedb90a9cc8dc5c669e228ebc057a65a"},
			{Key: "vcs.time", Value: "2026-12-01T16:41:04Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	installed := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/spillwaylb/spillway", Version: "v0.3.1", Sum: "h1:x"},
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		line string
		json string
	}{
		{"checkout", checkout,
			"spillway v0.0.0-20261201164104-2ab6c3d6cedb+dirty (commit 2ab6c3d6cedb90a9cc8dc5c669e228ebc057a65a 2026-12-01T16:41:04Z, modified) go1.26.8 linux/arm64",
			`{"version":"v0.0.0-20261201164104-2ab6c3d6cedb+dirty","commit":"2ab6c3d6cedb90a9cc8dc5c669e228ebc057a65a","commitTime":"2026-12-01T16:41:04Z","modified":true,"go":"go1.26.8","platform":"linux/arm64"}`},
		{"installed", installed,
			"spillway v0.3.1 go1.26.8 linux/arm64",
			`{"version":"v0.3.1","go":"go1.26.8","platform":"linux/arm64"}`},
		{"no build info", nil,
			"spillway unknown " + runtime.Version() + " linux/arm64",
			`{"version":"unknown","go":"` + runtime.Version() + `","platform":"linux/arm64"}`},
	} {
		v := buildVersion(tc.bi, "linux", "arm64")
		if got := v.String(); got != tc.line {
			t.Errorf("%s: line\n got %s\nwant %s", tc.name, got, tc.line)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.json {
			t.Errorf("%s: JSON\n got %s\nwant %s", tc.name, b, tc.json)
		}
	}
}

// TestVersionCommand runs 'spillway version' and '--version --json' in the
// test binary, whose build information is real but not a release's: it
// checks the shape, the toolchain and the platform.
func TestVersionCommand(t *testing.T) {
	code, out, errOut := runMain(t, "version")
	if code != 0 || !strings.HasPrefix(out, "spillway ") || !strings.HasSuffix(out, " "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n") {
		t.Errorf("version: exit %d\nstdout: %q\nstderr: %q", code, out, errOut)
	}
	code, out, errOut = runMain(t, "--version", "--json")
	var v BuildVersion
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Version == "" || v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("--version --json: exit %d, err %v\nstdout: %q\nstderr: %q", code, err, out, errOut)
	}
	if code, _, _ := runMain(t, "version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d, want 2", code)
	}
}
