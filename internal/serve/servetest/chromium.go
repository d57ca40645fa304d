package servetest

import (
	"os"
	"os/exec"
	"testing"
)

// ChromiumPath returns the path of a Chromium or Chrome binary, "" when
// none is installed.
func ChromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Chromium returns ChromiumPath, for the dashboard's tests in a real
// headless browser. The test skips without one, unless
// SPILLWAY_REQUIRE_CHROMIUM is set (CI sets it: there a missing browser
// is a failure, not a skip).
func Chromium(t testing.TB) string {
	t.Helper()
	if p := ChromiumPath(); p != "" {
		return p
	}
	if os.Getenv("SPILLWAY_REQUIRE_CHROMIUM") != "" {
		t.Fatal("no chromium binary found and SPILLWAY_REQUIRE_CHROMIUM is set (fix: apt-get install -y chromium)")
	}
	t.Skip("no chromium binary (apt-get install -y chromium)")
	return ""
}
