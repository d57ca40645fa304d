package cli

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

const importFixtures = "../gcpimport/testdata"

// spillway import on the gcloud fixtures writes a config that validates,
// and says on stderr what it could not carry.
func TestImportCommand(t *testing.T) {
	dir := filepath.Join(importFixtures, "gcloud")
	out := filepath.Join(t.TempDir(), "spillway.yaml")
	args := []string{"import", "--out", out, "--frontend", "127.0.0.1:8080", "--region", "us-south1"}
	for _, z := range []string{"us-south1-a", "us-south1-b", "us-south1-c", "us-east4-a", "us-east4-b", "us-east4-c"} {
		args = append(args, "--endpoints", "mig-"+z+"@"+z+"="+filepath.Join(dir, "mig-"+z+".instances.json"))
	}
	for _, f := range []string{"url-map.yaml", "backend-services.yaml", "health-check.yaml", "service-lb-policy.yaml", "instance-groups.json", "instances.json"} {
		args = append(args, filepath.Join(dir, f))
	}
	code, stdout, stderr := runMain(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout with --out: %q", stdout)
	}
	for _, want := range []string{
		"not carried: " + filepath.Join(dir, "backend-services.yaml") + ": backendServices[bs-south-pref].securityPolicy: Cloud Armor policy armor-edge-default is not in the input, so it is not enforced",
		"wrote " + out + ": valid; 2 backend services, 18 endpoints; 1 not carried",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code, vout, verr := runMain(t, "validate", "--config", out); code != 0 {
		t.Errorf("validate: exit %d\n%s%s", code, vout, verr)
	}
}

// Flags may follow the files; the config goes to stdout without --out;
// every uncarried feature has its line on stderr.
func TestImportCommandReportsUncarried(t *testing.T) {
	dir := filepath.Join(importFixtures, "uncarried")
	code, stdout, stderr := runMain(t, "import", filepath.Join(dir, "url-map.yaml"), filepath.Join(dir, "backend-service.yaml"), filepath.Join(dir, "health-check.json"),
		"--endpoints", "neg-static-us-central1-b="+filepath.Join(dir, "neg-static-us-central1-b.json"))
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	for _, want := range []string{"compressionMode: Spillway does not support this field", "iap: Identity-Aware Proxy is on", "securityPolicy: Cloud Armor policy armor-owasp", "edgeSecurityPolicy: Cloud Armor policy edge-geo-block", "healthChecks[hc-static].logConfig: health check logging is on"} {
		if !strings.Contains(stderr, "not carried: ") || !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "name: bs-static") || !strings.Contains(stdout, "enableCDN: true") || !strings.Contains(stdout, "# frontends:") {
		t.Errorf("stdout is not the config with a frontend template:\n%s", stdout)
	}
}

func TestImportCommandUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"import"}, "give the files to import"},
		{[]string{"import", "--region", "us-south1", "x.yaml"}, "give --frontend too"},
		{[]string{"import", "--endpoints", "nofile", "x.yaml"}, "GROUP[@ZONE]=FILE"},
		{[]string{"import", "--serverless", "asia-northeast1", "x.yaml"}, "want REGION=URL"},
		{[]string{"import", "missing.yaml"}, "missing.yaml"},
	}
	for _, tt := range tests {
		code, _, stderr := runMain(t, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

// A config made of resources as gcloud describes them (output-only
// fields, disabled IAP, logging and CDN, a NEG's network and size) loads
// in validate and in a real server, which serves through it.
func TestExportShapedConfigServes(t *testing.T) {
	const file = "testdata/export-shaped.yaml"
	if code, out, errOut := runMain(t, "validate", "--config", file); code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
	}
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "from the backend") }), ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go backend.Serve(ln)
	t.Cleanup(func() { backend.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const ep = "{ipAddress: 127.0.0.1, port: 18080,"
	if strings.Count(string(data), ep) != 1 {
		t.Fatalf("%s: want one %q to point at the test backend", file, ep)
	}
	cfg, err := config.Parse([]byte(strings.Replace(string(data), ep, "{ipAddress: 127.0.0.1, port: "+port+",", 1)), file)
	if err != nil {
		t.Fatal(err)
	}
	s := servetest.Run(t, cfg, serve.Options{WatchInterval: -1})
	client := &http.Client{Timeout: 5 * time.Second}
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := client.Get("http://" + s.FrontendAddr("fe-http") + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if body = string(b); resp.StatusCode == 200 {
			break
		}
	}
	if body != "from the backend" {
		t.Fatalf("got %q through the export-shaped config", body)
	}
}
