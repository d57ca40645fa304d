package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

const versionHelp = `
Usage: spillway version [--json]

Print the build's version, read from the Go build information embedded in the
binary (nothing is stamped by hand):

  version   the main module's version: v0.x.y when installed with
            'go install github.com/spillwaylb/spillway/cmd/spillway@v0.x.y',
            a pseudo-version or (devel) when built from a checkout
  commit    the VCS revision, its time, and "modified" when the work tree had
            uncommitted changes (only when built with 'go build' in a git
            checkout; 'go install ...@version' and 'go run' record none)
  go        the Go toolchain, and the GOOS/GOARCH the binary is for

'spillway --version' is the same as 'spillway version'.

Example:
  spillway version
  spillway version --json
`

// BuildVersion is what 'spillway version' reports.
type BuildVersion struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	CommitAt  string `json:"commitTime,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go"`
	Platform  string `json:"platform"`
}

// buildVersion extracts the version from a binary's build information; bi
// may be nil (a binary built without module support), in which case only the
// toolchain and platform are known.
func buildVersion(bi *debug.BuildInfo, goos, goarch string) BuildVersion {
	v := BuildVersion{Version: "unknown", GoVersion: runtime.Version(), Platform: goos + "/" + goarch}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitAt = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String formats v as the one-line output of 'spillway version'.
func (v BuildVersion) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "spillway %s", v.Version)
	if v.Commit != "" {
		fmt.Fprintf(&b, " (commit %s", v.Commit)
		if v.CommitAt != "" {
			fmt.Fprintf(&b, " %s", v.CommitAt)
		}
		if v.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " %s %s", v.GoVersion, v.Platform)
	return b.String()
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", versionHelp, stderr)
	asJSON := fs.Bool("json", false, "print the version as a JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	v := buildVersion(bi, runtime.GOOS, runtime.GOARCH)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := fmt.Fprintln(stdout, v)
	return err
}
