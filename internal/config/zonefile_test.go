package config

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// withZoneFile returns dnsBase with zoneFile: {path: PATH[, includeRoot:
// ROOT]} on its zone; yamlNS false drops nameServers (the file gives
// them).
func withZoneFile(path, root string, yamlNS bool) string {
	zf := "  zoneFile: {path: " + path
	if root != "" {
		zf += ", includeRoot: " + root
	}
	zf += "}\n"
	s := strings.Replace(dnsBase, "  nameServers: [ns1.gslb.example.]\n", zf+"  nameServers: [ns1.gslb.example.]\n", 1)
	if !yamlNS {
		s = strings.Replace(s, "  nameServers: [ns1.gslb.example.]\n", "", 1)
	}
	return s
}

// writeFiles writes name → content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestZoneFileLoads(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"zones/gslb.zone": `$ORIGIN gslb.example.
$TTL 600
@	3600 IN SOA ns1 hostmaster 2026010102 3600 600 604800 60
@	IN NS ns1
ns1	IN A 192.0.2.53
txt	IN TXT "one" ; comment
txt	IN TXT "two"
$INCLUDE sub/more.zone sub.gslb.example.
`,
		"zones/sub/more.zone": "host 120 IN AAAA 2001:db8::1\n",
	})
	c, err := Parse([]byte(withZoneFile(filepath.Join(dir, "zones/gslb.zone"), "", false)), "dns.yaml")
	if err != nil {
		t.Fatalf("zone file config rejected:\n%v", err)
	}
	z := &c.DNSZones[0]
	if ns := z.ZoneNameServers(); !slices.Equal(ns, []string{"ns1.gslb.example."}) {
		t.Errorf("name servers %v", ns)
	}
	if s := z.ZoneSOA(); s == nil || *s.Serial != 2026010102 || *s.Minimum != 60 || s.RName != "hostmaster.gslb.example." {
		t.Errorf("SOA %+v", s)
	}
	got := map[string]string{}
	for _, r := range z.StaticRecords() {
		got[r.Name+" "+r.Type] = strings.Join(r.Rrdatas, "|") + " ttl " + itoa(r.TTL)
	}
	want := map[string]string{
		"ns1.gslb.example. A":         "192.0.2.53 ttl 600",
		"txt.gslb.example. TXT":       `"one"|"two" ttl 600`,
		"host.sub.gslb.example. AAAA": "2001:db8::1 ttl 120",
		"www CNAME":                   "app.gslb.example. ttl nil",
		"mx MX":                       "10 mail.gslb.example. ttl nil",
	}
	if !mapsEqual(got, want) {
		t.Errorf("records\n got %v\nwant %v", got, want)
	}
	files, sum := z.ZoneFiles()
	if len(files) != 2 || sum == [32]byte{} {
		t.Errorf("files %v, digest %x", files, sum)
	}
}

func itoa(p *int) string {
	if p == nil {
		return "nil"
	}
	return strconv.Itoa(*p)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Every way a zone file is refused names dnsZones[…].zoneFile.path (or
// the YAML field it clashes with), the file, and a fix.
func TestZoneFileRefused(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"outside.zone":       "leak IN A 192.0.2.9\n",
		"root/escape.zone":   "$INCLUDE ../outside.zone\n",
		"root/link.zone":     "$INCLUDE inside-link\n",
		"root/bad.zone":      "ok IN A 192.0.2.1\n\nbad IN A 300.1.2.3\n",
		"root/hinfo.zone":    "h IN HINFO cpu os\n",
		"root/signed.zone":   "@ IN DNSKEY 257 3 13 AAAA\n",
		"root/out.zone":      "www.elsewhere.example. IN A 192.0.2.1\n",
		"root/both.zone":     "mx IN MX 20 other.gslb.example.\n",
		"root/soa.zone":      "@ IN SOA ns1 hostmaster 1 2 3 4 5\n",
		"root/ns.zone":       "@ IN NS ns2.gslb.example.\n",
		"root/ttl.zone":      "t 60 IN TXT a\nt 70 IN TXT b\n",
		"root/occluded.zone": "sub IN NS ns.other.example.\nx.sub IN TXT hidden\n",
	})
	if err := os.Symlink(filepath.Join(dir, "outside.zone"), filepath.Join(dir, "root", "inside-link")); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	for _, tc := range []struct {
		file, soa string
		yamlNS    bool
		want      []string
	}{
		{file: "escape.zone", yamlNS: true, want: []string{"zoneFile.path:", "../outside.zone", "includeRoot", "fix:"}},
		{file: "link.zone", yamlNS: true, want: []string{"zoneFile.path:", "inside-link", "out of includeRoot", "fix:"}},
		{file: "bad.zone", yamlNS: true, want: []string{"zoneFile.path:", "bad.zone", "line: 3", "fix: correct the master file"}},
		{file: "hinfo.zone", yamlNS: true, want: []string{"h.gslb.example. HINFO", "not served"}},
		{file: "signed.zone", yamlNS: true, want: []string{"DNSKEY", "signs online"}},
		{file: "out.zone", yamlNS: true, want: []string{"not in zone gslb.example."}},
		{file: "both.zone", yamlNS: true, want: []string{"mx.gslb.example. MX is in both", "records[mx]", "the zone file's both.zone: mx.gslb.example. MX", "sets are not merged"}},
		{file: "soa.zone", soa: "  soa: {serial: 7}\n", yamlNS: true, want: []string{".soa: the zone file", "has an SOA too", "fix: keep one SOA"}},
		{file: "ns.zone", yamlNS: true, want: []string{".nameServers: the zone file", "NS records at the apex too"}},
		{file: "ttl.zone", yamlNS: true, want: []string{"t.gslb.example. TXT", "TTL 70 differs", "RFC 2181"}},
		{file: "occluded.zone", yamlNS: true, want: []string{"zoneFile.path: occluded.zone: x.sub.gslb.example. TXT", "below the delegation"}},
		{file: "missing.zone", yamlNS: true, want: []string{"zoneFile.path:", "missing.zone"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			cfg := withZoneFile(filepath.Join(root, tc.file), "", tc.yamlNS)
			if tc.soa != "" {
				cfg = strings.Replace(cfg, "  zoneFile:", tc.soa+"  zoneFile:", 1)
			}
			_, err := Parse([]byte(cfg), "dns.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
	// A zone file outside its includeRoot.
	_, err := Parse([]byte(withZoneFile(filepath.Join(dir, "outside.zone"), root, true)), "dns.yaml")
	if err == nil || !strings.Contains(err.Error(), "is not inside includeRoot") {
		t.Errorf("zone file outside includeRoot: %v", err)
	}
}

// FuzzZoneFile checks that the zone-file loading path (parser, $INCLUDE
// through the root file system, conversion to record sets) never panics,
// and that what it accepts validates as the YAML records would.
func FuzzZoneFile(f *testing.F) {
	f.Add([]byte("$ORIGIN gslb.example.\n$TTL 60\n@ IN SOA ns1 h 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.1\n"))
	f.Add([]byte("$INCLUDE inc.zone\nwww CNAME app\n"))
	f.Add([]byte("$INCLUDE ../etc/passwd\n"))
	f.Add([]byte("$GENERATE 1-3 h$ A 192.0.2.$\n"))
	f.Add([]byte("t TXT ( \"a\"\n \"b\" )\n"))
	fsys := fstest.MapFS{"inc.zone": {Data: []byte("mail MX 10 mx\n$INCLUDE inc.zone\n")}}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := parseZoneFile(strings.NewReader(string(data)), "gslb.example.", "fuzz.zone", fsys)
		if err != nil {
			if d != nil {
				t.Fatal("data and an error")
			}
			return
		}
		for _, r := range d.records {
			if !InDNSZone(r.Name, "gslb.example.") || len(r.Rrdatas) == 0 || r.TTL == nil {
				t.Fatalf("bad set %+v", r)
			}
		}
	})
}
