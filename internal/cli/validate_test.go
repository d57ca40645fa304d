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
