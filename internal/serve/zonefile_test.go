package serve_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// A zone file is re-read like the config: the watcher applies a changed
// file, and a file that does not parse is rejected with its file and line
// while the old zone keeps serving.
func TestZoneFileReload(t *testing.T) {
	dir := t.TempDir()
	zonePath := filepath.Join(dir, "gslb.zone")
	write := func(path, s string) {
		t.Helper()
		// Written aside and renamed, as editors do: the watcher never
		// reads half a file.
		if err := os.WriteFile(path+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(zonePath, "$ORIGIN gslb.example.\n@ IN SOA ns1 hostmaster 1 3600 600 604800 30\n@ IN NS ns1\nns1 IN A 127.0.0.1\nv IN TXT \"one\"\n")
	y := `frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
dnsZones:
- name: gslb.example.
  zoneFile: {path: ` + zonePath + `}
`
	cfgPath := filepath.Join(dir, "spillway.yaml")
	write(cfgPath, y)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{ConfigPath: cfgPath, WatchInterval: 20 * time.Millisecond})
	addr := s.DNSAddr("dns")
	txt := func() string {
		m := new(dns.Msg)
		m.SetQuestion("v.gslb.example.", dns.TypeTXT)
		r, err := dns.Exchange(m, addr)
		if err != nil || len(r.Answer) == 0 {
			return "no answer"
		}
		return strings.Join(r.Answer[0].(*dns.TXT).Txt, "")
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for got := txt(); got != want; got = txt() {
			if time.Now().After(deadline) {
				t.Fatalf("v.gslb.example. TXT is %q, want %q", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("one")
	// Let the watcher take the config in force as seen (its first looks),
	// so that what it applies next is the zone file's change alone.
	time.Sleep(200 * time.Millisecond)
	write(zonePath, "$ORIGIN gslb.example.\n@ IN SOA ns1 hostmaster 2 3600 600 604800 30\n@ IN NS ns1\nns1 IN A 127.0.0.1\nv IN TXT \"two\"\n")
	waitFor("two")

	write(zonePath, "$ORIGIN gslb.example.\n@ IN SOA ns1 hostmaster 3 3600 600 604800 30\n@ IN NS ns1\nns1 IN A 127.0.0.1\nv IN A 300.0.0.1\n")
	err := s.ReloadFile(context.Background(), cfgPath)
	if err == nil || !strings.Contains(err.Error(), "gslb.zone: dns: bad A A") || !strings.Contains(err.Error(), "line: 5") ||
		!strings.Contains(err.Error(), "zoneFile.path") {
		t.Fatalf("bad zone file: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // the watcher sees it too, and rejects it
	if got := txt(); got != "two" {
		t.Fatalf("after a bad zone file, TXT is %q; the old zone should keep serving", got)
	}
}
