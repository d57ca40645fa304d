package gcpimport_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/spillwaylb/spillway/internal/gcpimport"
)

// FuzzImport checks that Import never panics on any file and member list,
// and that what it writes is always YAML.
func FuzzImport(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, []byte(`[{"instance": "projects/p/zones/us-east1-b/instances/vm-1", "status": "RUNNING"}]`))
	}
	f.Add([]byte("name: um\ndefaultService: bs\n---\nname: bs\nbackends: [{group: zones/z/networkEndpointGroups/g}]\n"), []byte(`[{"networkEndpoint": {"ipAddress": "10.0.0.1", "port": 80}}]`))
	f.Add([]byte("a: &a [*a]\nvalues: {root_module: {resources: *a, child_modules: [*a]}}\n"), []byte("[]"))
	f.Fuzz(func(t *testing.T, file, members []byte) {
		res, err := gcpimport.Import(gcpimport.Options{
			Files:     []gcpimport.Source{{Name: "in.yaml", Data: file}},
			Endpoints: []gcpimport.Endpoints{{Group: "g", Source: gcpimport.Source{Name: "g.json", Data: members}}},
			Frontend:  "127.0.0.1:8080",
		})
		if err != nil {
			return
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(res.Config, &doc); err != nil {
			t.Fatalf("output is not YAML: %v\n%s", err, res.Config)
		}
	})
}
