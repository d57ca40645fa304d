package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const routingExample = "../../examples/routing/config.yaml"

func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestValidateRoutingExample runs the routing example's golden tests[]
// through the command line.
func TestValidateRoutingExample(t *testing.T) {
	code, out, errOut := runMain(t, "validate", "--config", routingExample)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "65 URL map tests passed") {
		t.Errorf("stdout does not report 65 passed tests:\n%s", out)
	}
}

// TestValidateReportsFailingTest breaks one expectation of a copy of the
// routing example and checks that validate fails and names the test.
func TestValidateReportsFailingTest(t *testing.T) {
	data, err := os.ReadFile(routingExample)
	if err != nil {
		t.Fatal(err)
	}
	const right = "expectedOutputUrl: http://v2.api.internal/users\n"
	const wrong = "expectedOutputUrl: http://v2.api.internal/people\n"
	if bytes.Count(data, []byte(right)) != 1 {
		t.Fatalf("%s: want exactly one %q to break", routingExample, right)
	}
	path := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(path, bytes.Replace(data, []byte(right), []byte(wrong), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, "validate", "--config", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"FAIL urlMaps[routing-map].tests[",
		"host=api.example.com",
		"path=/v2/users",
		"want url http://v2.api.internal/people",
		"got url http://v2.api.internal/users",
		"1 of 65 URL map tests failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "FAIL "); n != 1 {
		t.Errorf("%d FAIL lines, want 1:\n%s", n, out)
	}
}

// TestNothingServedWarned: an empty config is valid, but validate and
// serve say that it serves nothing (serve runs, on its admin address
// only).
func TestNothingServedWarned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(path, []byte("# nothing yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, "validate", "--config", path)
	if code != 0 || !strings.Contains(out, "warning: "+path+": frontends: nothing is served") || !strings.Contains(out, "valid") {
		t.Errorf("validate: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 0, valid, with the nothing-served warning", code, out, errOut)
	}
	_, logs := startServe(t, "--config", path, "--watch", "0")
	waitFor(t, "the nothing-served warning", func() bool {
		return strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "frontends: nothing is served")
	}, logs)
}

// TestValidateExplainsSyntaxError: validate shows a YAML mistake at its
// line and column, under the source line.
func TestValidateExplainsSyntaxError(t *testing.T) {
	data, err := os.ReadFile("../../examples/seed-70-30/baseline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines[21] = " zone: us-south1-b\n" // one space short
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, "validate", "--config", path)
	want := path + ":22:2: invalid YAML: did not find expected key\n" +
		"   |\n" +
		"21 | - name: mig-us-south1-b\n" +
		"22 |  zone: us-south1-b\n" +
		"   |  ^^^^\n"
	if code != 1 || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "= fix: indent this line") {
		t.Errorf("validate: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 1 and stderr starting\n%s", code, out, errOut, want)
	}
}
