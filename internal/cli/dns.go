package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/gslb"
)

const dnsHelp = `
Usage:
  spillway dns export --zone NAME [--config FILE]

The DNS zones Spillway serves (dnsZones[], docs/dns.md).

export  writes zone NAME as an RFC 1035 master file to standard output:
        $ORIGIN, the SOA, the apex NS records and the static records
        (records[] and the zone's zoneFile), as they are served. GSLB names
        are answered per query, so they are listed as comments (policy,
        TTL, members), not as records; DNSSEC records are left out (the
        zone is signed online). The output loads back as a zoneFile, and
        named-checkzone accepts it. --config defaults to spillway.yaml.

Examples:
  spillway dns export --zone gslb.example. --config examples/dns/gslb.yaml > gslb.example.zone
  named-checkzone gslb.example. gslb.example.zone
`

func runDNS(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs := newFlags("dns", dnsHelp, stderr)
		if err := parse(fs, args); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "spillway dns: name a subcommand: export")
		return errUsage
	}
	if args[0] != "export" {
		fmt.Fprintf(stderr, "spillway dns: unknown subcommand %q (want export)\n", args[0])
		return errUsage
	}
	fs := newFlags("dns export", dnsHelp, stderr)
	cfgPath := fs.String("config", "spillway.yaml", "config `FILE` (YAML or JSON)")
	zone := fs.String("zone", "", "the zone's `NAME`, e.g. gslb.example.")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if *zone == "" {
		fmt.Fprintln(stderr, "spillway dns export: --zone is required")
		return errUsage
	}
	p, err := loadPlan(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, strings.TrimRight(config.Explain(err), "\n"))
		return exitCode(1)
	}
	if err := gslb.ExportZone(p.Config, p, *zone, *cfgPath, stdout); err != nil {
		fmt.Fprintf(stderr, "spillway dns export: %s: %v\n", *cfgPath, err)
		return exitCode(1)
	}
	return nil
}
