package plan

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
)

func TestServesFrontend(t *testing.T) {
	edge := &config.Frontend{Name: "edge", Layer: config.LayerEdge, Region: "us-east1"}
	regUS := &config.Frontend{Name: "reg-us", Layer: config.LayerRegional, Region: "us-east1"}
	regEU := &config.Frontend{Name: "reg-eu", Layer: config.LayerRegional, Region: "regions/europe-west1"}
	plain := &config.Frontend{Name: "plain"}
	for _, c := range []struct {
		role, region string
		want         []string
	}{
		{"", "", []string{"edge", "reg-us", "reg-eu", "plain"}},
		{"", "us-east1", []string{"edge", "reg-us", "reg-eu", "plain"}},
		{config.LayerEdge, "us-east1", []string{"edge", "plain"}},
		{config.LayerRegional, "europe-west1", []string{"reg-eu", "plain"}},
		{config.LayerRegional, "", []string{"reg-us", "reg-eu", "plain"}},
	} {
		var got []string
		for _, f := range []*config.Frontend{edge, regUS, regEU, plain} {
			if ServesFrontend(f, c.role, c.region) {
				got = append(got, f.Name)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("role %q region %q: serves %v, want %v", c.role, c.region, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("role %q region %q: serves %v, want %v", c.role, c.region, got, c.want)
				break
			}
		}
	}
}
