package gslb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/plan"
)

// exportZoneYAML has every record type records[] takes, a wildcard, a
// delegation with DS and glue, TXT data with quotes, spaces and ";", and
// GSLB names.
const exportZoneYAML = `frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
dnsZones:
- name: gslb.example.
  soa: {mname: ns1.gslb.example., rname: dns-admin.gslb.example., serial: 2026050101, refresh: 7200, retry: 900, expire: 1209600, minimum: 60}
  nameServers: [ns1.gslb.example., ns2.other.example.]
  records:
  - {name: ns1, type: A, ttl: 3600, rrdatas: ["192.0.2.53"]}
  - {name: ns1, type: AAAA, ttl: 3600, rrdatas: ["2001:db8::53"]}
  - {name: "@", type: MX, rrdatas: ["10 mail.gslb.example.", "20 mail2.other.example."]}
  - {name: "@", type: TXT, rrdatas: ["\"v=spf1 -all\"", "\"semi; colon \\\"quoted\\\" text\""]}
  - {name: "@", type: CAA, rrdatas: ["0 issue \"letsencrypt.org\""]}
  - {name: mail, type: A, ttl: 120, rrdatas: ["192.0.2.25", "192.0.2.26"]}
  - {name: _sip._udp, type: SRV, rrdatas: ["0 5 5060 sip.gslb.example."]}
  - {name: sip, type: AAAA, rrdatas: ["2001:db8::5060"]}
  - {name: www, type: CNAME, rrdatas: [cdn.gslb.example.]}
  - {name: "*.wild", type: A, rrdatas: ["192.0.2.80"]}
  - {name: ptr, type: PTR, rrdatas: [www.gslb.example.]}
  - {name: sub, type: NS, ttl: 86400, rrdatas: [ns1.sub.gslb.example.]}
  - {name: sub, type: DS, ttl: 86400, rrdatas: ["12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"]}
  - {name: ns1.sub, type: A, rrdatas: ["192.0.2.54"]}
  gslbNames:
  - name: cdn
    pool: {members: [{name: a, address: 198.51.100.10}, {name: b, address: "2001:db8::10"}]}
`

// export runs ExportZone on a config.
func export(t *testing.T, yaml string) string {
	t.Helper()
	c, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("config:\n%v", err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := gslb.ExportZone(c, p, "gslb.example", "test.yaml", &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// rrsets parses a master file and returns its records, one per string,
// sorted.
func rrsets(t *testing.T, zone string) []string {
	t.Helper()
	zp := dns.NewZoneParser(strings.NewReader(zone), "", "export")
	var out []string
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		out = append(out, rr.String())
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("export does not parse: %v\n%s", err, zone)
	}
	slices.Sort(out)
	return out
}

// Export → load as a zoneFile → export gives the same record sets: the
// zone served from the file is the zone served from the YAML. BIND's
// named-checkzone accepts the file (when installed; CI has it).
func TestZoneExportRoundTrip(t *testing.T) {
	first := export(t, exportZoneYAML)
	if strings.Contains(first, "198.51.100.10\n") || !strings.Contains(first, "; GSLB names") ||
		!strings.Contains(first, "cdn.gslb.example. policy WEIGHTED ttl 30: members a 198.51.100.10, b 2001:db8::10") {
		t.Errorf("GSLB names should be comments only:\n%s", first)
	}
	want := rrsets(t, first)
	if len(want) != 20 {
		t.Errorf("exported %d records, want 20:\n%s", len(want), first)
	}
	path := filepath.Join(t.TempDir(), "gslb.example.zone")
	if err := os.WriteFile(path, []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	// The zone from the file alone: SOA, apex NS and records from it,
	// the GSLB names from the YAML.
	fromFile := `frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
dnsZones:
- name: gslb.example.
  zoneFile: {path: ` + path + `}
  gslbNames:
  - name: cdn
    pool: {members: [{name: a, address: 198.51.100.10}, {name: b, address: "2001:db8::10"}]}
`
	if got := rrsets(t, export(t, fromFile)); !slices.Equal(got, want) {
		t.Errorf("after a round trip\n got %q\nwant %q", got, want)
	}
	checkzone, err := exec.LookPath("named-checkzone")
	if err != nil {
		if os.Getenv("SPILLWAY_REQUIRE_CHECKZONE") != "" {
			t.Fatal("named-checkzone not installed (Debian: bind9-utils)")
		}
		t.Skip("named-checkzone not installed (Debian: bind9-utils)")
	}
	out, err := exec.Command(checkzone, "gslb.example.", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("named-checkzone: %v\n%s\n%s", err, out, first)
	}
}
