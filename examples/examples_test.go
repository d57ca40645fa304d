package examples_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/route"
)

// TestExamplesAreValid loads every shipped example, compiles it and runs
// its URL map tests[], as `spillway validate` does.
func TestExamplesAreValid(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "gcloud" {
			return fs.SkipDir // gcloud's exports, which spillway import reads
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		n++
		c, err := config.Load(path)
		if err != nil {
			t.Errorf("%v", err)
			return nil
		}
		p, err := plan.Compile(c)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		for name, um := range p.URLMaps {
			tbl, err := route.Compile(um.Config)
			if err != nil {
				t.Errorf("%s: urlMaps[%s]: %v", path, name, err)
				continue
			}
			for _, f := range tbl.RunTests(um.Config.Tests) {
				t.Errorf("%s: urlMaps[%s].%s", path, name, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("found only %d example configs", n)
	}
	if _, err := os.Stat("seed-70-30/with-policy.yaml"); err != nil {
		t.Fatal(err)
	}
}
