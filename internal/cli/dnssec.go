package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/dnssec"
)

const dnssecHelp = `
Usage:
  spillway dnssec keygen --zone ZONE --out FILE
  spillway dnssec ds --config FILE [--zone ZONE] [--format ds|dnskey|anchor]

DNSSEC keys of the DNS zones Spillway signs online (dnsZones[].dnssec,
docs/dns.md "DNSSEC"). Each signed zone has one ECDSA P-256 key (algorithm
13), used as a combined signing key (DNSKEY flags 257).

keygen  writes a new private key (PEM, PKCS #8, mode 0600) to FILE, which
        must not exist, and prints its DNSKEY and DS. Point the zone's
        dnssec.keyFile at FILE.
ds      reads the config and every signed zone's key file, and prints
        what the parent zone publishes: DS records (SHA-256, digest type
        2; the default), the DNSKEY records (--format dnskey; some
        registrars want these), or a trust-anchors block for delv -a and
        BIND (--format anchor). --zone picks one zone.

Examples:
  spillway dnssec keygen --zone gslb.example. --out /etc/spillway/gslb.example.key
  spillway dnssec ds --config spillway.yaml
  spillway dnssec ds --config spillway.yaml --format anchor > anchor.conf
  delv @127.0.0.1 -p 5300 -a anchor.conf +root=gslb.example. www.gslb.example. A
`

func runDNSSEC(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs := newFlags("dnssec", dnssecHelp, stderr)
		if err := parse(fs, args); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "spillway dnssec: name a subcommand: keygen or ds")
		return errUsage
	}
	switch args[0] {
	case "keygen":
		return runDNSSECKeygen(args[1:], stdout, stderr)
	case "ds":
		return runDNSSECDS(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "spillway dnssec: unknown subcommand %q (want keygen or ds)\n", args[0])
	return errUsage
}

func runDNSSECKeygen(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dnssec keygen", dnssecHelp, stderr)
	zone := fs.String("zone", "", "the zone's `NAME`, e.g. gslb.example.")
	out := fs.String("out", "", "`FILE` to write the private key to (must not exist)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *zone == "" || *out == "" {
		fmt.Fprintln(stderr, "spillway dnssec keygen: --zone and --out are required")
		return errUsage
	}
	z := config.CanonicalDNSName(*zone)
	k, err := dnssec.Generate()
	if err != nil {
		return err
	}
	p, err := k.PEM()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "spillway dnssec keygen: %v (fix: choose a new --out; an existing key is never overwritten)\n", err)
		return exitCode(1)
	}
	if _, err := f.Write(p); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "; wrote %s: set dnsZones[].dnssec.keyFile to it for zone %s\n", *out, z)
	fmt.Fprintln(stdout, k.DNSKEY(z))
	fmt.Fprintln(stdout, k.DS(z))
	return nil
}

func runDNSSECDS(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dnssec ds", dnssecHelp, stderr)
	cfgPath := fs.String("config", "", "config `FILE` (YAML or JSON)")
	zone := fs.String("zone", "", "print only this zone's `NAME`")
	format := fs.String("format", "ds", "`ds`, dnskey or anchor")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "spillway dnssec ds: --config is required")
		return errUsage
	}
	if *format != "ds" && *format != "dnskey" && *format != "anchor" {
		fmt.Fprintf(stderr, "spillway dnssec ds: --format %q: use ds, dnskey or anchor\n", *format)
		return errUsage
	}
	c, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitCode(1)
	}
	want := ""
	if *zone != "" {
		want = config.CanonicalDNSName(*zone)
	}
	found := 0
	var anchors strings.Builder
	for i := range c.DNSZones {
		cz := &c.DNSZones[i]
		z := config.CanonicalDNSName(cz.Name)
		if cz.DNSSEC == nil || (want != "" && z != want) {
			continue
		}
		found++
		keys, err := dsKeys(cz, z)
		if err != nil {
			fmt.Fprintf(stderr, "%s: dnsZones[%d].dnssec.%v\n", *cfgPath, i, err)
			return exitCode(1)
		}
		if cz.DNSSEC.Disabled {
			fmt.Fprintf(stdout, "; %s: dnssec.disabled is true: the zone is served unsigned\n", z)
		}
		printDSKeys(stdout, &anchors, z, keys, *format)
	}
	if found == 0 {
		what := "no dnsZones[] has dnssec"
		if want != "" {
			what = "zone " + want + " is not a dnsZones[] entry with dnssec"
		}
		fmt.Fprintf(stderr, "%s: %s (fix: add dnssec: {keyFile: FILE} or {keyDirectory: DIR} to the zone; spillway dnssec keygen writes a key)\n", *cfgPath, what)
		return exitCode(1)
	}
	if *format == "anchor" {
		fmt.Fprintf(stdout, "trust-anchors {\n%s};\n", anchors.String())
	}
	return nil
}

// printDSKeys writes zone z's keys in format (ds or dnskey) to stdout,
// or for anchor as BIND trust-anchors lines to anchors.
func printDSKeys(stdout io.Writer, anchors *strings.Builder, z string, keys []*dns.DNSKEY, format string) {
	for _, dk := range keys {
		switch format {
		case "ds":
			fmt.Fprintln(stdout, dk.ToDS(dns.SHA256))
		case "dnskey":
			fmt.Fprintln(stdout, dk)
		case "anchor":
			ds := dk.ToDS(dns.SHA256)
			fmt.Fprintf(anchors, "\t%s static-ds %d %d %d \"%s\";\n", z, ds.KeyTag, ds.Algorithm, ds.DigestType, ds.Digest)
		}
	}
}

// dsKeys returns the DNSKEYs of zone cz the parent's DS should name: its
// keyFile's key, or with keyDirectory the KSKs the CDS set names now
// (dnssec.Load: the keys as spillway serve last saved them).
func dsKeys(cz *config.DNSZone, zone string) ([]*dns.DNSKEY, error) {
	d := cz.DNSSEC
	if d.KeyDirectory == "" {
		k, err := dnssec.LoadKey(d.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("keyFile %s: %w", d.KeyFile, err)
		}
		return []*dns.DNSKEY{k.DNSKEY(zone)}, nil
	}
	ks, err := dnssec.Load(d.KeyDirectory, zone)
	if err != nil {
		return nil, fmt.Errorf("keyDirectory %s: %w", d.KeyDirectory, err)
	}
	now := time.Now()
	var out []*dns.DNSKEY
	for i := range ks.State.Keys {
		if kt := &ks.State.Keys[i]; kt.InDS(now) {
			out = append(out, ks.DNSKEY(kt))
		}
	}
	return out, nil
}
