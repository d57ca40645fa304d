//go:build linux

package globallab

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
)

// Every generated config loads and validates.
func TestConfigsValidate(t *testing.T) {
	sites := Sites()
	check := func(name string, data []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := config.Parse(data, name); err != nil {
			t.Errorf("%s: %v\n%s", name, err, data)
		}
	}
	for _, s := range sites {
		b, err := render(edgeTmpl, sites, s, "Edge", 0)
		check("edge-"+s.Key, b, err)
		b, err = render(edgeTmpl, sites, s, "Edge", withdrawFloor)
		check("edge-floor-"+s.Key, b, err)
		b, err = render(regionalTmpl, sites, s, "Regional", 0)
		check("regional-"+s.Key, b, err)
	}
	b, err := render(dnsTmpl, sites, nil, "", 0)
	check("dns", b, err)
	b, err = render(backendsTmpl, sites, nil, "", 0)
	check("backends", b, err)
}
