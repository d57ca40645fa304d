package gslb_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/plan"
)

// writeTestMMDB writes a small GeoLite2-City-shaped database (an IPv6
// tree with IPv4 aliased, like MaxMind's) and returns its path:
//
//	198.51.100.0/24  Ashburn (39.04, -77.49), North America
//	203.0.113.0/25   Frankfurt (50.11, 8.68), Europe
//	192.0.2.0/24     continent AS only (a Country record)
func writeTestMMDB(t testing.TB) string {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-City", RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	city := func(continent string, lat, lon float64) mmdbtype.Map {
		return mmdbtype.Map{
			"continent": mmdbtype.Map{"code": mmdbtype.String(continent)},
			"location":  mmdbtype.Map{"latitude": mmdbtype.Float64(lat), "longitude": mmdbtype.Float64(lon)},
		}
	}
	for cidr, rec := range map[string]mmdbtype.Map{
		"198.51.100.0/24": city("NA", 39.04, -77.49),
		"203.0.113.0/25":  city("EU", 50.11, 8.68),
		"192.0.2.0/24":    {"continent": mmdbtype.Map{"code": mmdbtype.String("AS")}},
	} {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Insert(n, rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "GeoLite2-City-test.mmdb")
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

// geoYAML serves two GEO names over members in three regions: "geo"
// places clients with a CIDR table, "city" with the MaxMind database
// (and one CIDR entry that takes precedence over it).
func geoYAML(db string) string {
	return fmt.Sprintf(header+`
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: geo
    policy: GEO
    pool:
      members:
      - {name: iad, address: 192.0.2.10, region: us-east1}
      - {name: fra, address: 192.0.2.20, region: europe-west3}
      - {name: sin, address: 192.0.2.30, region: asia-southeast1}
    locations:
    - {cidr: 198.51.100.0/24, region: us-east1}
    - {cidr: 203.0.113.0/24, region: europe-west3}
  - name: city
    policy: GEO
    geoDatabase: %s
    pool:
      members:
      - {name: iad, address: 192.0.2.10, region: us-east1}
      - {name: fra, address: 192.0.2.20, region: europe-west3}
      - {name: sin, address: 192.0.2.30, region: asia-southeast1}
    locations:
    - {cidr: 203.0.113.128/25, region: asia-southeast1}
`, db)
}

// The MaxMind database places ECS clients at the nearest member region
// and the ECS scope is the database network's prefix length.
func TestGeoDatabase(t *testing.T) {
	_, addr := start(t, geoYAML(writeTestMMDB(t)), gslb.Options{})
	for _, tc := range []struct {
		ecs   string
		want  string // "" = any member (weighted)
		scope int
	}{
		{"198.51.100.0/24", "192.0.2.10", 24}, // Ashburn → us-east1
		{"198.51.100.77/32", "192.0.2.10", 24},
		{"203.0.113.0/24", "192.0.2.20", 25},   // Frankfurt → europe-west3, a /25 in the database
		{"203.0.113.128/25", "192.0.2.30", 25}, // the locations entry wins
		{"192.0.2.0/24", "192.0.2.30", 24},     // continent AS → asia-southeast1
	} {
		for range 20 {
			r := exchange(t, "udp", addr, query("city.gslb.example.", dns.TypeA, 1232, tc.ecs))
			if got := addrs(r); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("ECS %s: %v, want %s", tc.ecs, got, tc.want)
			}
			if s := ecsScope(r); s != tc.scope {
				t.Fatalf("ECS %s: scope %d, want %d", tc.ecs, s, tc.scope)
			}
		}
	}
	// An address with no record is answered over all members, with the
	// scope of the empty network around it.
	seen := map[string]bool{}
	for range 60 {
		r := exchange(t, "udp", addr, query("city.gslb.example.", dns.TypeA, 1232, "100.64.1.0/24"))
		seen[addrs(r)[0]] = true
		if s := ecsScope(r); s <= 0 || s > 24 {
			t.Fatalf("unknown client: scope %d", s)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("unknown client answered with %v, want every member", seen)
	}
}

func TestGeoDatabaseMissing(t *testing.T) {
	cfg, err := config.Parse([]byte(geoYAML(filepath.Join(t.TempDir(), "missing.mmdb"))), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gslb.New(cfg, p, gslb.Options{}); err == nil || !strings.Contains(err.Error(), "geoDatabase") {
		t.Fatalf("New with a missing database: %v", err)
	}
}

// dig +subnet for two /24s gets the two regions' answers and reports the
// CLIENT-SUBNET scope the server set.
func TestDigSubnet(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("dig not installed")
	}
	_, addr := start(t, geoYAML(writeTestMMDB(t)), gslb.Options{})
	host, port, _ := net.SplitHostPort(addr)
	scopeRE := regexp.MustCompile(`CLIENT-SUBNET: (\S+)/(\d+)/(\d+)`)
	for _, tc := range []struct {
		name, subnet, want, scope string
	}{
		{"geo", "198.51.100.0/24", "192.0.2.10", "24"},
		{"geo", "203.0.113.0/24", "192.0.2.20", "24"},
		{"city", "198.51.100.0/24", "192.0.2.10", "24"},
		{"city", "203.0.113.0/24", "192.0.2.20", "25"},
	} {
		out, err := exec.Command(dig, "@"+host, "-p", port, tc.name+".gslb.example", "A",
			"+subnet="+tc.subnet, "+tries=1", "+time=2").CombinedOutput()
		if err != nil {
			t.Fatalf("dig: %v\n%s", err, out)
		}
		text := string(out)
		if !regexp.MustCompile(`(?m)^` + tc.name + `\.gslb\.example\.\s+\d+\s+IN\s+A\s+` + regexp.QuoteMeta(tc.want) + `$`).MatchString(text) {
			t.Fatalf("dig %s +subnet=%s: want A %s in\n%s", tc.name, tc.subnet, tc.want, text)
		}
		m := scopeRE.FindStringSubmatch(text)
		if m == nil || m[1] != strings.Split(tc.subnet, "/")[0] || m[2] != "24" || m[3] != tc.scope {
			t.Fatalf("dig %s +subnet=%s: CLIENT-SUBNET %v, want scope %s in\n%s", tc.name, tc.subnet, m, tc.scope, text)
		}
		t.Logf("dig %s +subnet=%s: %s", tc.name, tc.subnet, m[0])
		if !strings.Contains(text, "flags: qr aa") {
			t.Fatalf("dig: reply not authoritative:\n%s", text)
		}
	}
}
