package sim_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spillwaylb/spillway/internal/sim"
)

// Under WATERFALL_BY_REGION one client's zones are a draw of its
// second-layer proxies: ClientSpread gives the range over many clients,
// which is wide for zones (8 proxies over 3 zones: one client may see a
// zone get 1/8 or 5/8 of its region) and a single number for regions
// (the levels do not depend on the client).
func TestClientSpread(t *testing.T) {
	p := load(t, filepath.Join("..", "..", "examples", "seed-70-30", "no-policy.yaml"))
	for _, down := range [][]string{nil, {"us-south1"}} {
		o := sim.Options{Requests: 1000, Seed: 1, Down: down}
		spread, err := sim.ClientSpread(p, o, 200)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := sim.ClientSpread(p, o, 200)
		if !reflect.DeepEqual(spread, again) {
			t.Fatal("two spreads of the same options differ")
		}
		o.ClientIP = "127.0.0.1"
		lab, err := sim.Run(p, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zones {
			zr := spread[z]
			got := 100 * float64(lab.Zones[z]) / float64(lab.Requests)
			if got < zr.P1-0.5 || got > zr.P99+0.5 {
				t.Errorf("down %v: 127.0.0.1's %s %.1f%% is outside the spread %+v", down, z, got, zr)
			}
			if live := zr.P50 > 0; live && zr.P95-zr.P5 < 10 {
				t.Errorf("down %v: %s spread %+v is narrow; one client's zones should vary", down, z, zr)
			}
		}
		for _, reg := range []string{"us-south1", "us-east4"} {
			if zr := spread[reg]; zr.P1 != zr.P99 {
				t.Errorf("down %v: region %s varies by client: %+v", down, reg, zr)
			}
		}
	}
}
