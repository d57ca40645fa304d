package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/dnssec"
)

func TestDNSSECKeygenAndDS(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "gslb.example.key")
	code, out, errOut := runMain(t, "dnssec", "keygen", "--zone", "gslb.example", "--out", key)
	if code != 0 {
		t.Fatalf("keygen: exit %d\n%s%s", code, out, errOut)
	}
	k, err := dnssec.LoadKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(key); st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", st.Mode())
	}
	ds := k.DS("gslb.example.").String()
	if !strings.Contains(out, ds) || !strings.Contains(out, k.DNSKEY("gslb.example.").String()) {
		t.Fatalf("keygen printed:\n%s\nwant %s", out, ds)
	}
	// Never overwrites.
	if code, _, errOut := runMain(t, "dnssec", "keygen", "--zone", "gslb.example.", "--out", key); code != 1 || !strings.Contains(errOut, "never overwritten") {
		t.Fatalf("keygen over an existing key: exit %d, %s", code, errOut)
	}

	cfg := filepath.Join(dir, "spillway.yaml")
	yaml := `frontends:
- {name: dns, address: "127.0.0.1:5300", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  dnssec: {keyFile: ` + key + `}
- name: plain.example.
  nameServers: [ns1.plain.example.]
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runMain(t, "dnssec", "ds", "--config", cfg)
	if code != 0 || strings.TrimSpace(out) != ds {
		t.Fatalf("ds: exit %d\n%s%s\nwant %s", code, out, errOut, ds)
	}
	code, out, _ = runMain(t, "dnssec", "ds", "--config", cfg, "--zone", "gslb.example", "--format", "anchor")
	d := k.DS("gslb.example.")
	if code != 0 || !strings.HasPrefix(out, "trust-anchors {\n\tgslb.example. static-ds ") || !strings.Contains(out, d.Digest) {
		t.Fatalf("anchor: exit %d\n%s", code, out)
	}
	code, _, errOut = runMain(t, "dnssec", "ds", "--config", cfg, "--zone", "plain.example.")
	if code != 1 || !strings.Contains(errOut, "zone plain.example. is not a dnsZones[] entry with dnssec") {
		t.Fatalf("unsigned zone: exit %d, %s", code, errOut)
	}
	if err := os.WriteFile(key, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runMain(t, "dnssec", "ds", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "dnsZones[0].dnssec.keyFile "+key) || !strings.Contains(errOut, "fix:") {
		t.Fatalf("bad key: exit %d, %s", code, errOut)
	}
	if code, _, _ := runMain(t, "dnssec", "sign"); code != 2 {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
}
