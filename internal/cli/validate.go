package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/lint"
	"github.com/spillwaylb/spillway/internal/route"
	"github.com/spillwaylb/spillway/internal/waf"
)

const validateHelp = `
Usage: spillway validate --config FILE [--rate N]

Check a config the way Google Cloud checks an import: strict decoding (unknown
fields are errors, with a did-you-mean), every documented range and reference,
then every URL map's tests[] (host, path, headers → expected service,
expectedOutputUrl, expectedRedirectResponseCode).

Exit status 0 when the config is valid and every test passes; 1 otherwise,
with each problem's file, line and column, field (list elements by name:
backendServices[bs-web].backends[mig-a]), source line with a caret under
the mistake, and fix; a mistake repeated in several elements is one error
listing the places.

It also prints, without failing:
  warning: what Google Cloud's global external Application Load Balancer
           would reject (so the config will not import there as is), and
           every field that is set and accepted but has no effect in
           Spillway, with what Google Cloud would do (connectionDraining
           shorter than the request timeout, header variables such as
           {client_region} that expand to empty, isolationConfig, ...;
           docs/semantics.md §7);
  advice:  operational caveats of a valid config — weighted backend
           services that each live in one region (the URL map picks a
           service before health, so a region's outage fails that
           service's whole share), a region holding more than half of a
           service's groups (auto-capacity drain stops at 50%), groups
           shared by services with balancingMode UTILIZATION, the failover
           step-up of a weighted split over regions, and, with --rate, RATE
           capacity below the stated load.

--rate N states the steady load in requests per second that each URL map's
default route receives (a weighted split divides it by weight). A backend
service whose RATE capacity (maxRate, maxRatePerInstance or
maxRatePerEndpoint × members × capacityScaler) is below its share is
advised: below the PREFERRED backends' (or the largest region's) capacity,
the excess spills over to other regions with nothing failed; below all its
backends' capacity, every backend runs over its target. Without --rate no
load advice is given.

Examples:
  spillway validate --config examples/seed-70-30/with-policy.yaml
  spillway validate --config examples/seed-70-30/baseline.yaml --rate 1500
`

func runValidate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("validate", validateHelp, stderr)
	cfgPath := fs.String("config", "", "config `FILE` (YAML or JSON)")
	rate := fs.Float64("rate", 0, "stated steady load in requests per second per URL map (`N`); advises RATE capacity below it")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "spillway validate: --config is required")
		return errUsage
	}
	if *rate < 0 || math.IsNaN(*rate) || math.IsInf(*rate, 0) {
		fmt.Fprintf(stderr, "spillway validate: --rate %v: give the steady load as a positive number of requests per second, e.g. --rate 1500\n", *rate)
		return errUsage
	}
	p, err := loadPlan(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, strings.TrimRight(config.Explain(err), "\n"))
		return exitCode(1)
	}
	if _, err := armor.Compile(p.Config, newWAF()); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", *cfgPath, err)
		return exitCode(1)
	}
	for _, w := range p.Config.Warnings() {
		fmt.Fprintf(stdout, "warning: %s: %s\n", *cfgPath, w)
	}
	for _, f := range lint.Check(p, lint.Options{Rate: *rate}) {
		fmt.Fprintf(stdout, "advice: %s: %s\n", *cfgPath, f)
	}
	failed, total := 0, 0
	for _, name := range slices.Sorted(maps.Keys(p.URLMaps)) {
		um := p.URLMaps[name]
		t, err := route.Compile(um.Config)
		if err != nil {
			fmt.Fprintf(stderr, "%s: urlMaps[%s]: %v\n", *cfgPath, name, err)
			return exitCode(1)
		}
		total += len(um.Config.Tests)
		for _, f := range t.RunTests(um.Config.Tests) {
			failed++
			fmt.Fprintf(stdout, "FAIL urlMaps[%s].%s\n", name, f.String())
		}
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "%s: %d of %d URL map tests failed\n", *cfgPath, failed, total)
		return exitCode(1)
	}
	fmt.Fprintf(stdout, "%s: valid; %d backend services, %d endpoints; %d URL map tests passed\n", *cfgPath, len(p.Services), len(p.Endpoints), total)
	return nil
}

// newWAF returns the preconfigured WAF rule sets security policies can
// call (the OWASP CRS through Coraza; built on the first call).
func newWAF() armor.WAF { return waf.ForArmor(waf.Options{}) }
