package geoip_test

import (
	"net/netip"
	"testing"

	"github.com/spillwaylb/spillway/internal/geoip"
	"github.com/spillwaylb/spillway/internal/geoip/geoiptest"
)

func TestRegionCode(t *testing.T) {
	db, err := geoip.Open(geoiptest.Countries(t, map[string]string{"198.51.100.0/24": "NL", "2001:db8::/32": "JP"}))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"198.51.100.7": "NL", "::ffff:198.51.100.7": "NL", "2001:db8::1": "JP", "203.0.113.1": "",
	} {
		if got := db.RegionCode(netip.MustParseAddr(addr)); got != want {
			t.Errorf("RegionCode(%s) = %q, want %q", addr, got, want)
		}
	}
	if (*geoip.DB)(nil).RegionCode(netip.MustParseAddr("198.51.100.7")) != "" {
		t.Error("a nil DB placed an address")
	}
	if _, err := geoip.Open("/nonexistent.mmdb"); err == nil {
		t.Error("Open of a missing file: no error")
	}
}
