package gslb_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/dnssec"
	"github.com/spillwaylb/spillway/internal/gslb"
)

// TestDNSSECDelv validates signed answers with BIND's delv, an
// independent validator, from a trust anchor: the DS of the zone's key,
// as the parent would publish it (spillway dnssec ds prints the same).
// delv follows DS → DNSKEY → RRSIG itself, so this is the whole chain
// below the anchor. It skips without delv (Debian's bind9-dnsutils)
// unless SPILLWAY_REQUIRE_DELV is set, as CI sets it.
func TestDNSSECDelv(t *testing.T) {
	delv := lookDelv(t)
	y, k := signedYAML(t)
	_, addr := start(t, y, gslb.Options{})
	host, port, _ := net.SplitHostPort(addr)
	ds := k.DS("gslb.example.")
	anchor := filepath.Join(t.TempDir(), "anchor.conf")
	conf := fmt.Sprintf("trust-anchors {\n\tgslb.example. static-ds %d %d %d \"%s\";\n};\n",
		ds.KeyTag, ds.Algorithm, ds.DigestType, ds.Digest)
	if err := os.WriteFile(anchor, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(anchor, name, qtype string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, delv, "@"+host, "-p", port, "-a", anchor, "+root=gslb.example.",
			"+dnssec", "+nocrypto", name, qtype)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, c := range []struct {
		name, qtype string
		want        []string
	}{
		// A GSLB name, a static name, a CNAME chain into a GSLB name.
		{"w.gslb.example.", "A", []string{"; fully validated", "w.gslb.example.", "RRSIG\tA 13 3"}},
		{"mail.gslb.example.", "A", []string{"; fully validated", "192.0.2.25"}},
		{"www.gslb.example.", "A", []string{"; fully validated", "CNAME\tweb.gslb.example."}},
		{"gslb.example.", "DNSKEY", []string{"; fully validated", "DNSKEY\t257 3 13"}},
		// NODATA and a name that does not exist (compact denial: delv
		// sees a NODATA proved by the NSEC at the name).
		{"mail.gslb.example.", "AAAA", []string{"; negative response, fully validated", "; mail.gslb.example.", "; mail.gslb.example. NSEC \\000.mail.gslb.example. A RRSIG NSEC"}},
		{"nope.gslb.example.", "A", []string{"; negative response, fully validated", "; nope.gslb.example. NSEC \\000.nope.gslb.example. RRSIG NSEC TYPE128"}},
	} {
		out, err := run(anchor, c.name, c.qtype)
		t.Logf("delv %s %s:\n%s", c.name, c.qtype, out)
		if err != nil {
			t.Fatalf("delv %s %s: %v", c.name, c.qtype, err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("delv %s %s: output lacks %q", c.name, c.qtype, w)
			}
		}
	}
	// The check can fail: anchored at another key, nothing validates.
	other, err := dnssec.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ods := other.DS("gslb.example.")
	wrong := filepath.Join(t.TempDir(), "wrong.conf")
	conf = fmt.Sprintf("trust-anchors {\n\tgslb.example. static-ds %d %d %d \"%s\";\n};\n",
		ods.KeyTag, ods.Algorithm, ods.DigestType, ods.Digest)
	if err := os.WriteFile(wrong, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(wrong, "w.gslb.example.", "A"); strings.Contains(out, "fully validated") || !strings.Contains(out, "resolution failed") {
		t.Fatalf("delv with the wrong anchor:\n%s", out)
	}
}

// lookDelv returns delv's path; it skips the test without delv unless
// SPILLWAY_REQUIRE_DELV is set.
func lookDelv(t *testing.T) string {
	t.Helper()
	delv, err := exec.LookPath("delv")
	if err != nil {
		if os.Getenv("SPILLWAY_REQUIRE_DELV") != "" {
			t.Fatal("delv not found and SPILLWAY_REQUIRE_DELV is set (fix: apt-get install bind9-dnsutils)")
		}
		t.Skip("delv not installed (apt-get install bind9-dnsutils)")
	}
	return delv
}

// TestDNSSECDelvChain validates through a zone cut with delv: anchored
// at the parent's DS only, a name in the signed child validates through
// the parent's DS for the child (served by the parent side, issue 23
// defect 1: with the child's apex answering the DS query, delv found the
// chain broken), and a name in the unsigned child is proved insecure by
// the parent's NSEC at the cut.
func TestDNSSECDelvChain(t *testing.T) {
	delv := lookDelv(t)
	y, parent, _ := chainYAML(t)
	_, addr := start(t, y, gslb.Options{})
	host, port, _ := net.SplitHostPort(addr)
	ds := parent.DS("gslb.example.")
	anchor := filepath.Join(t.TempDir(), "anchor.conf")
	conf := fmt.Sprintf("trust-anchors {\n\tgslb.example. static-ds %d %d %d \"%s\";\n};\n",
		ds.KeyTag, ds.Algorithm, ds.DigestType, ds.Digest)
	if err := os.WriteFile(anchor, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, qtype string
		want        []string
	}{
		{"www.secure.gslb.example.", "A", []string{"; fully validated", "192.0.2.80", "RRSIG\tA 13 4"}},
		{"app.secure.gslb.example.", "A", []string{"; fully validated", "192.0.2.1"}},
		{"secure.gslb.example.", "DS", []string{"; fully validated", "DS\t"}},
		{"nope.secure.gslb.example.", "A", []string{"; negative response, fully validated"}},
		{"www.plain.gslb.example.", "A", []string{"; unsigned answer", "192.0.2.81"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, delv, "@"+host, "-p", port, "-a", anchor, "+root=gslb.example.",
			"+dnssec", "+nocrypto", c.name, c.qtype).CombinedOutput()
		cancel()
		t.Logf("delv %s %s:\n%s", c.name, c.qtype, out)
		if err != nil {
			t.Fatalf("delv %s %s: %v", c.name, c.qtype, err)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("delv %s %s: output lacks %q", c.name, c.qtype, w)
			}
		}
	}
}
