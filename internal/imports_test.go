package internal_test

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pure lists the packages that must stay free of I/O, clocks and global
// randomness, so the simulator predicts exactly what the proxy does.
var pure = []string{"config", "plan", "route", "health", "outlier", "control", "engine", "sim", "lint", "gcpimport", "serve/report", "armor", "rrl", "overlay", "cdnpolicy", "anycast"}

func TestPurePackagesDoNoIO(t *testing.T) {
	forbiddenImports := map[string]bool{"net": true, "net/http": true, "os": true, "log": true, "os/exec": true, "github.com/miekg/dns": true}
	forbiddenCalls := []string{"time.Now(", "time.Sleep(", "time.After(", "time.NewTicker(", "time.NewTimer(", "time.Tick(", "rand.Int", "rand.Float", "rand.Uint", "rand.Perm", "rand.Shuffle", "go func"}
	for _, name := range pure {
		dir := filepath.Join(".", name)
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			if _, statErr := os.Stat(dir); os.IsNotExist(statErr) {
				continue
			}
			t.Fatalf("%s: %v", name, err)
		}
		for _, imp := range pkg.Imports {
			// Sanctioned: config.Load is the one file read, and config
			// parses DNS record text with miekg/dns's pure parser (dns.NewRR).
			sanctioned := name == "config" && (imp == "os" || imp == "github.com/miekg/dns")
			if forbiddenImports[imp] && !sanctioned {
				t.Errorf("pure package %s imports %s", name, imp)
			}
			if strings.Contains(imp, "/internal/") {
				shell := imp[strings.LastIndex(imp, "/")+1:]
				if !contains(pure, shell) {
					t.Errorf("pure package %s imports shell package %s", name, imp)
				}
			}
		}
		for _, f := range pkg.GoFiles {
			src, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range forbiddenCalls {
				if strings.Contains(string(src), call) {
					t.Errorf("%s/%s calls %s", name, f, strings.TrimSuffix(call, "("))
				}
			}
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// leaves lists shell packages (they do I/O) that must not depend on any
// Spillway package but another leaf, so that they can be reasoned about,
// and driven by a differential harness, on their own: h1 is the HTTP/1.1
// wire code under the proxy, park the epoll set its idle connections
// wait in.
var leaves = []string{"h1", "park"}

func TestLeafPackagesImportNoInternalPackage(t *testing.T) {
	for _, name := range leaves {
		pkg, err := build.ImportDir(filepath.Join(".", name), 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "github.com/spillwaylb/spillway/") && !contains(leaves, strings.TrimPrefix(imp, "github.com/spillwaylb/spillway/internal/")) {
				t.Errorf("leaf package %s imports %s", name, imp)
			}
		}
	}
}

// apart lists, for a package, the Spillway packages it must not depend
// on, directly or through another: fleet takes its value types from
// control and probe and names the server it drives by interfaces, so
// that it (and its tests' build) need none of the serving stack.
var apart = map[string][]string{
	"fleet": {"serve", "proxy", "gslb", "h1"},
}

func TestFleetDoesNotImportServeProxyGSLBH1(t *testing.T) {
	const module = "github.com/spillwaylb/spillway/internal/"
	for name, banned := range apart {
		deps := map[string]bool{}
		var walk func(dir string)
		walk = func(dir string) {
			pkg, err := build.ImportDir(dir, 0)
			if err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			for _, imp := range pkg.Imports {
				rel, ok := strings.CutPrefix(imp, module)
				if !ok || deps[rel] {
					continue
				}
				deps[rel] = true
				walk(filepath.Join(".", filepath.FromSlash(rel)))
			}
		}
		walk(filepath.Join(".", name))
		for _, b := range banned {
			for dep := range deps {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s depends on %s", name, dep)
				}
			}
		}
	}
}
