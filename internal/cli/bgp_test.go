package cli

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/anycast"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// TestPrintHealthBGP: get-health's anycast view, one line per session
// and per prefix with its state and reason (docs/operations.md shows
// this output).
func TestPrintHealthBGP(t *testing.T) {
	at := time.Date(2026, 12, 2, 14, 33, 47, 0, time.UTC)
	med := int64(100)
	r := &report.Health{BGP: &report.BGP{LocalASN: 65001, RouterID: "192.0.2.1",
		Sessions: []report.BGPSession{{Neighbor: "192.0.2.254:179", PeerASN: 65000, State: "ESTABLISHED", Since: at, Advertised: 1}},
		Prefixes: []anycast.Prefix{
			{Prefix: netip.MustParsePrefix("203.0.113.0/24"), Frontends: []string{"edge"}, State: anycast.Degraded, Reason: anycast.LowCapacity, ASPathPrepend: 3, HealthyPercent: 25,
				Detail: "edge: 25% of its reachable capacity healthy (1 of 4 endpoints healthy), below degraded.belowHealthyCapacityPercent 50%"},
			{Prefix: netip.MustParsePrefix("2001:db8:1::/48"), Frontends: []string{"edge"}, State: anycast.Degraded, Reason: anycast.LowCapacity, MED: &med, HealthyPercent: 25},
		}}}
	var out bytes.Buffer
	PrintHealth(&out, r)
	t.Logf("\n%s", out.String())
	for _, want := range []string{
		"bgp (local AS 65001, router ID 192.0.2.1)",
		"  192.0.2.254:179              65000      ESTABLISHED  2026-12-02T14:33:47Z       0          1",
		"  203.0.113.0/24               DEGRADED (prepend 3)   low_capacity          25.0%  edge: 25% of its reachable capacity healthy",
		"  2001:db8:1::/48              DEGRADED (MED 100)     low_capacity",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
