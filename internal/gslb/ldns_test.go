package gslb_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// signedXfrYAML is a signed zone with a transfer block, delegations (a
// secure one with a DS and an insecure one, with glue), a wildcard, a
// CNAME and names of several types.
func signedXfrYAML(t testing.TB) string {
	t.Helper()
	path, _ := keyFile(t)
	return header + `
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  soa: {serial: 2026120101, minimum: 20}
  dnssec: {keyFile: ` + path + `}
  transfer: {allow: [127.0.0.0/8]}
  records:
  - {name: ns1, type: A, rrdatas: ["127.0.0.1"]}
  - {name: "@", type: MX, rrdatas: ["10 mail.gslb.example."]}
  - {name: "@", type: TXT, rrdatas: ["\"v=spf1 -all\""]}
  - {name: mail, type: A, rrdatas: ["192.0.2.25"]}
  - {name: mail, type: AAAA, rrdatas: ["2001:db8::25"]}
  - {name: www, type: CNAME, rrdatas: [mail.gslb.example.]}
  - {name: "*.wild", type: A, rrdatas: ["192.0.2.7"]}
  - {name: a.b.c, type: TXT, rrdatas: ["\"deep\""]}
  - {name: secure, type: NS, rrdatas: [ns.secure.gslb.example.]}
  - {name: ns.secure, type: A, rrdatas: ["192.0.2.53"]}
  - {name: secure, type: DS, rrdatas: ["12345 13 2 3a1b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70819"]}
  - {name: plain, type: NS, rrdatas: [ns.other.example.]}
  gslbNames:
  - name: w
    pool: {members: [{name: a, address: 192.0.2.1}]}
`
}

// TestLDNSVerifyZone transfers a signed zone from a running server and
// has ldns-verify-zone (Debian's ldnsutils, a verifier no one here
// wrote) check it: every authoritative set signed with a valid RRSIG
// that does not expire within 6 days, glue and delegation NS unsigned,
// and a complete NSEC chain. A changed record must make it fail. It
// skips without ldns-verify-zone unless SPILLWAY_REQUIRE_LDNS is set,
// as CI sets it.
func TestLDNSVerifyZone(t *testing.T) {
	verify, err := exec.LookPath("ldns-verify-zone")
	if err != nil {
		if os.Getenv("SPILLWAY_REQUIRE_LDNS") != "" {
			t.Fatal("ldns-verify-zone not found and SPILLWAY_REQUIRE_LDNS is set (fix: apt-get install ldnsutils)")
		}
		t.Skip("ldns-verify-zone not installed (apt-get install ldnsutils)")
	}
	_, addr := start(t, signedXfrYAML(t), gslb.Options{})
	rrs, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rrs) < 2 || !strings.Contains(rrs[0], "\tSOA\t") || rrs[len(rrs)-1] != rrs[0] {
		t.Fatalf("transfer does not start and end with the SOA: %v", rrs)
	}
	zone := strings.Join(rrs[:len(rrs)-1], "\n") + "\n"
	for _, want := range []string{"\tDNSKEY\t257 3 13 ", "\tRRSIG\tSOA 13 2 ", "ns1.gslb.example.\t20\tIN\tNSEC\tplain.gslb.example. A RRSIG NSEC",
		"secure.gslb.example.\t20\tIN\tNSEC\t*.wild.gslb.example. NS DS RRSIG NSEC", "\tRRSIG\tDS 13 3 "} {
		if !strings.Contains(zone, want) {
			t.Errorf("transfer lacks %q", want)
		}
	}
	for _, unsigned := range []string{"\tRRSIG\tNS 13 3 ", "ns.secure.gslb.example.\t20\tIN\tNSEC"} {
		if strings.Contains(zone, unsigned) {
			t.Errorf("transfer has %q: delegation NS and glue are the child's", unsigned)
		}
	}
	run := func(zone string) (string, error) {
		path := filepath.Join(t.TempDir(), "gslb.example.zone")
		if err := os.WriteFile(path, []byte(zone), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, verify, "-e", "P6D", path).CombinedOutput()
		return string(out), err
	}
	out, err := run(zone)
	t.Logf("ldns-verify-zone:\n%s", out)
	if err != nil || !strings.Contains(out, "Zone is verified and complete") {
		t.Fatalf("ldns-verify-zone: %v\n%s\n%s", err, out, zone)
	}
	// The check can fail: a record changed after signing.
	bad := strings.Replace(zone, "192.0.2.25", "192.0.2.26", 1)
	if out, err := run(bad); err == nil || strings.Contains(out, "Zone is verified and complete") {
		t.Fatalf("ldns-verify-zone accepted a changed record:\n%s", out)
	}
}
