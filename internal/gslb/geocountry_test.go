package gslb_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// countryRec is a GeoLite2 record: country and continent codes, and
// coordinates unless lat and lon are both 0 (a Country record).
func countryRec(country, continent string, lat, lon float64) mmdbtype.Map {
	m := mmdbtype.Map{}
	if country != "" {
		m["country"] = mmdbtype.Map{"iso_code": mmdbtype.String(country)}
	}
	if continent != "" {
		m["continent"] = mmdbtype.Map{"code": mmdbtype.String(continent)}
	}
	if lat != 0 || lon != 0 {
		m["location"] = mmdbtype.Map{"latitude": mmdbtype.Float64(lat), "longitude": mmdbtype.Float64(lon)}
	}
	return m
}

// writeMMDB writes a GeoLite2-shaped database of records by CIDR.
func writeMMDB(t testing.TB, recs map[string]mmdbtype.Map) string {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-City", RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, rec := range recs {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Insert(n, rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "test.mmdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// countryDB holds one network per precedence case.
func countryDB(t testing.TB) string {
	return writeMMDB(t, map[string]mmdbtype.Map{
		"198.51.100.0/24":  countryRec("US", "NA", 39.04, -77.49), // no entry: coordinates
		"203.0.113.0/25":   countryRec("DE", "EU", 50.11, 8.68),   // country beats continent and coordinates
		"203.0.113.128/25": countryRec("FR", "EU", 48.86, 2.35),   // continent beats coordinates
		"192.0.2.0/24":     countryRec("JP", "AS", 0, 0),          // a Country record
		"100.64.0.0/24":    countryRec("SG", "AS", 1.29, 103.85),  // the cidr entry wins
		"100.64.1.0/24":    countryRec("BR", "SA", 0, 0),          // continent centre: nearest member region
	})
}

// countryYAML is a name over five regions with country, continent and
// CIDR locations, each mapping clients elsewhere than their coordinates
// would (Frankfurt to europe-west1, Paris to europe-west3, Japan's
// continent centre is nearer Hong Kong than Tokyo).
func countryYAML(db, policy string) string {
	return fmt.Sprintf(header+`
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: geo
    policy: %s
    geoDatabase: %s
    pool:
      members:
      - {name: iad, address: 192.0.2.10, region: us-east4}
      - {name: fra, address: 192.0.2.20, region: europe-west3}
      - {name: bel, address: 192.0.2.30, region: europe-west1}
      - {name: tok, address: 192.0.2.40, region: asia-northeast1}
      - {name: hkg, address: 192.0.2.50, region: asia-east2}
    locations:
    - {country: JP, region: asia-northeast1}
    - {country: DE, region: europe-west1}
    - {continent: EU, region: europe-west3}
    - {cidr: 100.64.0.0/24, region: us-east4}
`, policy, db)
}

// Precedence: a CIDR entry, then the database's country, then its
// continent, then its coordinates (nearest member region), then none.
func TestGeoCountryContinent(t *testing.T) {
	_, addr := start(t, countryYAML(countryDB(t), "GEO"), gslb.Options{})
	for _, tc := range []struct {
		name, ecs string
		want      string // "" = any member (not placed)
		scope     int
	}{
		{"coordinates", "198.51.100.0/24", "192.0.2.10", 24},
		{"country over continent", "203.0.113.0/24", "192.0.2.30", 25},
		{"continent over coordinates", "203.0.113.128/25", "192.0.2.20", 25},
		{"country without coordinates", "192.0.2.0/24", "192.0.2.40", 24},
		{"cidr over country", "100.64.0.0/24", "192.0.2.10", 24},
		{"continent centre", "100.64.1.0/24", "192.0.2.10", 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 {
				r := exchange(t, "udp", addr, query("geo.gslb.example.", dns.TypeA, 1232, tc.ecs))
				if got := addrs(r); len(got) != 1 || got[0] != tc.want {
					t.Fatalf("ECS %s: %v, want %s", tc.ecs, got, tc.want)
				}
				if s := ecsScope(r); s != tc.scope {
					t.Fatalf("ECS %s: scope %d, want %d", tc.ecs, s, tc.scope)
				}
			}
		})
	}
	seen := map[string]bool{}
	for range 80 {
		r := exchange(t, "udp", addr, query("geo.gslb.example.", dns.TypeA, 1232, "100.64.9.0/24"))
		seen[addrs(r)[0]] = true
	}
	if len(seen) != 5 {
		t.Fatalf("a client the database does not know got %v, want every member", seen)
	}
}
