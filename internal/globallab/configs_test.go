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
		b, err := render(edgeTmpl, sites, s, "Edge", variant{})
		check("edge-"+s.Key, b, err)
		b, err = render(edgeTmpl, sites, s, "Edge", variant{floor: withdrawFloor})
		check("edge-floor-"+s.Key, b, err)
		b, err = render(edgeTmpl, sites, s, "Edge", variant{degraded: degradedBelow})
		check("edge-degraded-"+s.Key, b, err)
		b, err = render(regionalTmpl, sites, s, "Regional", variant{})
		check("regional-"+s.Key, b, err)
	}
	b, err := render(dnsTmpl, sites, nil, "", variant{})
	check("dns", b, err)
	b, err = render(backendsTmpl, sites, nil, "", variant{})
	check("backends", b, err)
}
