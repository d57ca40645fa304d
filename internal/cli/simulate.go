package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/sim"
)

const simulateHelp = `
Usage: spillway simulate --config FILE [flags]
       spillway simulate --config FILE --dns NAME [--client-subnet CIDR] [flags]

Predict how a config splits traffic, on a virtual clock, with the same decision
engine 'spillway serve' uses. Chosen zones or endpoints fail their health
checks; the simulation runs probes, healthy/unhealthy thresholds, auto-capacity
drain and undrain in virtual time, then counts requests after convergence.

Count mode (default) sends --requests requests at low load: capacity never
binds, so only weights, preference, proximity, health and drain decide.
Rate mode (--rate and --duration) sends requests evenly over the duration and
measures the offered rate per backend service, so RATE capacity
(maxRate, maxRatePerInstance, maxRatePerEndpoint) and spillover apply.

Examples:
  # The seed's 70/30 pattern with two of three primary zones down:
  spillway simulate --config examples/seed-70-30/with-policy.yaml \
      --down us-south1-a,us-south1-b --requests 20000

  # The no-policy rows as one client sees them (spillway lab sends from
  # 127.0.0.1): WATERFALL_BY_REGION binds one client to its own
  # second-layer proxies, so its zones are uneven; without --client-ip the
  # split is over many clients, even by capacity:
  spillway simulate --config examples/seed-70-30/no-policy.yaml \
      --client-ip 127.0.0.1

  # 4,500 rps of European clients against 2 x 3,000 rps of RATE capacity:
  spillway simulate --config examples/spillover/config.yaml \
      --client-region europe-west1 --rate 4500 --duration 60s

  # A timeline: us-south1 fails at 30 s and recovers at 90 s (watch the
  # 35%/60 s undrain rule):
  spillway simulate --config examples/seed-70-30/with-policy.yaml \
      --rate 100 --duration 4m --step 15s \
      --at 30s:down=us-south1 --at 90s:up=us-south1

--client-region is any region of the config or any built-in Google Cloud
region (europe-north1, asia-northeast1, ...), with or without backends there:
regions are ordered by round-trip time from it (regions[].rttMs, else the
built-in inter-region RTT table; see docs/semantics.md §2.1).

--down and --at targets are zones (us-south1-a), regions (us-south1), group
names, instance names or ip:port endpoints. Until their health checks see
the failure (interval x unhealthyThreshold), requests the engine still sends
there fail and are retried as the proxy retries them; --fail-as says how
they fail: refused (default), blackhole or health (docs/semantics.md §4.3).
The timeline shows each step's 503 (and 504) share and the share retried. --json prints
{"requests": N, "regions": {...}, "zones": {...}, "status": {"200": N, "503": N}, ...}
with counts; every zone of the config is present.

DNS mode (--dns NAME) queries a GSLB name of the config's dnsZones instead:
the simulation runs the DNS server's own answering code (gslb.Server, without
sockets) on the virtual clock. Pool members whose name, address or region is
in --down fail their health checks, at each check's interval and with the DNS
thresholds (3 failures down, 2 successes up, unless the check sets its own);
recovered members ramp back (failback steps over rampSec) and answers carry
the transition TTL while a name changes, all in virtual time. --down and --at
may also name endpoints (zones, regions, ...), which decide backendService
names through the engine View. --client-subnet sends EDNS Client Subnet, so
GEO and LATENCY names place the client by it; without it they place the
client by the resolver's own address, --resolver ADDRESS, as a real server
does. The default resolver is an address no locations[] CIDR contains
(the first of 192.0.2.53, 198.51.100.53, 203.0.113.53, 100.64.0.53, ...),
so such names answer as WEIGHTED over all members unless a geoDatabase
places it. The output says which address was placed and which locations
entry it matched. --queries N counts N queries after convergence; --rate QPS
--duration D sends queries over time and prints a timeline (with --at
60s:up=MEMBER it shows the failback ramp). Output: the share of answers per
member (address, region), per TTL, the rcodes (NOERROR, NXDOMAIN, SERVFAIL)
and each member's weight changes. --json prints
{"queries": N, "members": {"iad-edge": N, ...}, "addresses": {...},
 "regions": {...}, "ttls": {"30": N, "15": N}, "rcodes": {"NOERROR": N},
 "transitions": [...], "timeline": [...]}
with counts (members, addresses and regions count address records, so with
answerCount 2 they add up to twice the queries).

  # Active-passive with the primary down: every answer is the DR site.
  spillway simulate --config examples/dns/gslb.yaml --dns api.gslb.example \
      --down primary --queries 20000

  # The primary recovers at 60 s: 10% → 25% → 50% → 100% over rampSec.
  spillway simulate --config examples/dns/gslb.yaml --dns api.gslb.example \
      --down primary --at 60s:up=primary --rate 50 --duration 6m --step 20s

  # A European client of the GEO name (the nearest healthy edge):
  spillway simulate --config examples/dns/gslb.yaml --dns cdn.gslb.example \
      --client-subnet 203.0.113.0/24
`

func runSimulate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("simulate", simulateHelp, stderr)
	cfgPath := fs.String("config", "", "config `FILE` (YAML or JSON)")
	requests := fs.Int("requests", 1000, "requests to count in count mode")
	rate := fs.Float64("rate", 0, "requests per second (rate mode; needs --duration)")
	duration := fs.Duration("duration", 0, "how long rate mode runs, e.g. 60s")
	step := fs.Duration("step", 0, "timeline step in rate mode (default duration/10)")
	seed := fs.Uint64("seed", 1, "random seed for probe timing, fault injection and random endpoint picks (weighted splits are drawn evenly, not at random: docs/semantics.md §2); the same seed gives the same result")
	client := fs.String("client-region", "", "`REGION` the requests come from: a region of the config or any built-in Google Cloud region (default: the frontend's region)")
	clientIP := fs.String("client-ip", "", "send every request from this one client `ADDRESS`, as a lab or a curl loop does: under WATERFALL_BY_REGION one client reaches only its own second-layer proxies and sees their zones (spillway lab's client is 127.0.0.1); default: many clients")
	urlMap := fs.String("url-map", "", "URL map to use (default: the first frontend's)")
	host := fs.String("host", "", "request Host, matched against the URL map's hostRules")
	path := fs.String("path", "/", "request path, matched against the URL map's path matchers")
	asJSON := fs.Bool("json", false, "print one JSON object instead of tables")
	spread := fs.Int("spread-clients", sim.DefaultSpreadClients, "with --client-ip under WATERFALL_BY_REGION (count mode): also run this many other client addresses and show each zone's p5-p95 over them, the range one client's zones are a draw from (0: off)")
	dnsName := fs.String("dns", "", "simulate DNS queries for GSLB `NAME` (e.g. api.gslb.example) instead of HTTP requests")
	subnet := fs.String("client-subnet", "", "EDNS Client Subnet `CIDR` of DNS queries (with --dns)")
	resolver := fs.String("resolver", "", "the `ADDRESS` DNS queries come from (with --dns): without --client-subnet, GEO and LATENCY names place the client by it (default: the first of 192.0.2.53, 198.51.100.53, 203.0.113.53, 100.64.0.53, 10.0.0.53, 172.16.0.53, 192.168.0.53 that no locations[] CIDR contains, so such names answer as WEIGHTED)")
	queries := fs.Int("queries", 1000, "DNS queries to count in count mode (with --dns)")
	var down listFlag
	fs.Var(&down, "down", "comma-separated `LIST` of zones, regions or ip:port endpoints (with --dns also pool member names, addresses or regions) that fail health checks before counting")
	var at listFlag
	fs.Var(&atFlag{&at}, "at", "scripted event `OFFSET:down=LIST` or OFFSET:up=LIST (rate mode; repeatable)")
	failAs := fs.String("fail-as", "refused", "what a down endpoint does to requests until its health checks take it out: `MODE` refused (connections refused at once), blackhole (nothing answers: attempts wait out the 5 s dial timeout, probes their timeout) or health (only health checks fail; requests are still served)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "spillway simulate: --config is required (try --config examples/seed-70-30/with-policy.yaml)")
		return errUsage
	}
	events, err := parseEvents(at)
	if err != nil {
		return err
	}
	if len(events) > 0 && *rate <= 0 {
		return fmt.Errorf("--at needs rate mode: add --rate RPS --duration D")
	}
	p, err := loadPlan(*cfgPath)
	if err != nil {
		return err
	}
	set := givenFlags(fs)
	if *dnsName != "" {
		o := sim.DNSOptions{Name: *dnsName, ClientSubnet: *subnet, Resolver: *resolver, Queries: *queries, Rate: *rate, Duration: *duration,
			Step: *step, Seed: *seed, Down: down, Events: events}
		return runSimulateDNS(p, o, set, *asJSON, stdout)
	}
	for _, f := range []string{"client-subnet", "queries", "resolver"} {
		if set[f] {
			return fmt.Errorf("--%s needs --dns NAME", f)
		}
	}
	mode, err := sim.ParseFailMode(*failAs)
	if err != nil {
		return err
	}
	opts := sim.Options{
		FailAs:   mode,
		Requests: *requests, Rate: *rate, Duration: *duration, Step: *step, Seed: *seed,
		ClientRegion: *client, ClientIP: *clientIP, URLMap: *urlMap, Host: *host, Path: *path, Down: down, Events: events,
	}
	res, err := sim.Run(p, opts)
	if err != nil {
		return err
	}
	if opts.ClientIP != "" && opts.Rate == 0 && *spread > 0 && sim.UsesWaterfallByRegion(p) {
		if res.ClientSpread, err = sim.ClientSpread(p, opts, *spread); err != nil {
			return err
		}
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	printResult(stdout, p, opts, res)
	return nil
}

// runSimulateDNS is simulate --dns: flags that are for HTTP requests are
// refused, then o runs and its result is printed.
func runSimulateDNS(p *plan.Plan, o sim.DNSOptions, set map[string]bool, asJSON bool, stdout io.Writer) error {
	for _, f := range []string{"client-region", "client-ip", "url-map", "host", "path", "requests"} {
		if set[f] {
			return fmt.Errorf("--%s is for HTTP requests; with --dns use --client-subnet and --queries", f)
		}
	}
	res, err := simulateDNS(p, o)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, res)
	}
	printDNSResult(stdout, o, res)
	return nil
}

// loadPlan loads, validates and compiles a config file.
func loadPlan(path string) (*plan.Plan, error) {
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	p, err := plan.Compile(c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// atFlag collects --at values whole (they contain commas).
type atFlag struct{ l *listFlag }

func (a *atFlag) String() string {
	if a.l == nil {
		return ""
	}
	return a.l.String()
}
func (a *atFlag) Set(v string) error { *a.l = append(*a.l, v); return nil }

func parseEvents(specs []string) ([]sim.Event, error) {
	var evs []sim.Event
	for _, s := range specs {
		off, rest, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("--at %q: want OFFSET:down=LIST or OFFSET:up=LIST, e.g. 30s:down=us-south1-a", s)
		}
		d, err := time.ParseDuration(off)
		if err != nil {
			return nil, fmt.Errorf("--at %q: bad offset %q: %w", s, off, err)
		}
		verb, list, ok := strings.Cut(rest, "=")
		if !ok || (verb != "down" && verb != "up") {
			return nil, fmt.Errorf("--at %q: want down=LIST or up=LIST after the offset", s)
		}
		var targets listFlag
		_ = targets.Set(list)
		evs = append(evs, sim.Event{At: d, Down: verb == "down", Targets: targets})
	}
	return evs, nil
}

func pct(n, total int) string {
	if total == 0 {
		return "  0.0%"
	}
	return fmt.Sprintf("%5.1f%%", 100*float64(n)/float64(total))
}

func printResult(w io.Writer, p *plan.Plan, o sim.Options, r *sim.Result) {
	mode := fmt.Sprintf("%d requests at low load", r.Requests)
	if o.Rate > 0 {
		mode = fmt.Sprintf("%d requests at %.0f rps over %s", r.Requests, o.Rate, o.Duration)
	}
	client := o.ClientRegion
	if client == "" {
		client = "(frontend's)"
	}
	if o.ClientIP != "" {
		client += " · one client, " + o.ClientIP
	} else {
		client += " · many clients"
	}
	down := "nothing"
	if len(o.Down) > 0 {
		down = strings.Join(o.Down, ", ")
	}
	fmt.Fprintf(w, "client region %s · down: %s · %s · converged %s after the failure · seed %d\n\n",
		client, down, mode, time.Duration(r.ConvergedAfter), o.Seed)

	printZones(w, p, r)
	fmt.Fprintln(w)
	for _, code := range slices.Sorted(maps.Keys(r.Status)) {
		fmt.Fprintf(w, "HTTP %s: %d (%s)\n", code, r.Status[code], strings.TrimSpace(pct(r.Status[code], r.Requests)))
	}
	for _, reason := range slices.Sorted(maps.Keys(r.Reasons)) {
		fmt.Fprintf(w, "  %d × %s\n", r.Reasons[reason], reason)
	}
	if r.Retries > 0 || len(o.Events) > 0 {
		fmt.Fprintf(w, "retries: %d (down endpoints: %s; the proxy's retry policy: docs/semantics.md §5)\n", r.Retries, o.FailAs)
	}

	for _, s := range r.Services {
		svc := p.ServiceByName[s.Name]
		fmt.Fprintf(w, "\nbackend service %s (%s", s.Name, svc.Algorithm)
		if svc.AutoDrain {
			fmt.Fprint(w, ", autoCapacityDrain")
		}
		fmt.Fprintf(w, ", failover threshold %.0f%%)\n", svc.FailoverThreshold*100)
		fmt.Fprintf(w, "  failover threshold %.0f%%: %s\n", svc.FailoverThreshold*100, svc.ThresholdRule)
		fmt.Fprintf(w, "  %-22s %-14s %-10s %-8s %-14s %6s\n", "GROUP", "ZONE", "PREFERENCE", "HEALTHY", "STATE", "SHARE")
		for _, b := range s.Backends {
			pref := "DEFAULT"
			if b.Preferred {
				pref = "PREFERRED"
			}
			printBackendRow(w, b.Group, b.Zone, pref, b.Healthy, b.Members, b.Drained, b.DrainBlocked, b.Share)
		}
	}

	if len(r.Timeline) > 0 {
		printTimeline(w, r)
	}
}

// printTimeline prints rate mode's timeline: each step's share per zone,
// of 503 and 504 answers, and of requests retried. A request counts in
// the step it was sent in.
func printTimeline(w io.Writer, r *sim.Result) {
	codes := []string{"503"}
	if r.Status["504"] > 0 {
		codes = append(codes, "504")
	}
	fmt.Fprintf(w, "\ntimeline (share of each step's requests, by when they were sent)\n%-8s", "T+")
	for _, z := range r.ZoneOrder {
		fmt.Fprintf(w, " %12s", z)
	}
	for _, c := range codes {
		fmt.Fprintf(w, " %7s", c)
	}
	fmt.Fprintf(w, " %8s\n", "retried")
	for _, b := range r.Timeline {
		fmt.Fprintf(w, "%-8s", time.Duration(b.Start))
		for _, z := range r.ZoneOrder {
			fmt.Fprintf(w, " %12s", pct(b.Zones[z], b.Requests))
		}
		for _, c := range codes {
			fmt.Fprintf(w, " %7s", pct(b.Status[c], b.Requests))
		}
		fmt.Fprintf(w, " %8s\n", pct(b.Retried, b.Requests))
	}
}

// printZones prints the region and zone table; with a client spread, a
// column with each share's p5-p95 over many clients. A regional group
// (no zone: serverless and internet NEGs) is listed under its region
// with the region as its zone, as the lab places it.
func printZones(w io.Writer, p *plan.Plan, r *sim.Result) {
	regions := slices.Sorted(maps.Keys(r.Regions))
	rw, zw := columnWidth(14, regions), columnWidth(16, r.ZoneOrder)
	fmt.Fprintf(w, "%-*s %-*s %9s %7s", rw, "REGION", zw, "ZONE", "REQUESTS", "SHARE")
	if r.ClientSpread != nil {
		fmt.Fprintf(w, "   %s", "ANY ONE CLIENT (p5-p95)")
	}
	fmt.Fprintln(w)
	noRange := false
	row := func(reg, name, key string, n int) {
		fmt.Fprintf(w, "%-*s %-*s %9d %7s", rw, reg, zw, name, n, pct(n, r.Requests))
		if zr, ok := r.ClientSpread[key]; ok {
			fmt.Fprintf(w, "   %5.1f-%5.1f%%", zr.P5, zr.P95)
		} else if r.ClientSpread != nil {
			noRange = true
		}
		fmt.Fprintln(w)
	}
	for _, reg := range regions {
		for _, z := range r.ZoneOrder {
			if zoneInRegion(p, z, reg) {
				row(reg, z, z, r.Zones[z])
			}
		}
		row(reg, "(region)", reg, r.Regions[reg])
	}
	if r.ClientSpread != nil {
		fmt.Fprintf(w, "(WATERFALL_BY_REGION: one client's zones are a draw of its second-layer proxies; the range is over --spread-clients other client addresses, default 200; docs/semantics.md §2.4)\n")
	}
	if noRange {
		fmt.Fprintf(w, "(no range: a region with zonal groups and regional ones, whose zone is named as the region, has one name for two shares)\n")
	}
}

// columnWidth is the width of a table column: least, or the longest name.
func columnWidth(least int, names []string) int {
	for _, n := range names {
		least = max(least, len(n))
	}
	return least
}

// zoneInRegion reports whether zone, a sim.Result zone (a regional
// group's is its region), is in region.
func zoneInRegion(p *plan.Plan, zone, region string) bool {
	for _, g := range p.Groups {
		if g.ZoneOrRegion() == zone {
			return g.Region == region
		}
	}
	return false
}

// printBackendRow prints one backend of a service table (simulate and
// get-health share the layout).
func printBackendRow(w io.Writer, group, zone, pref string, healthy, members int, drained, blocked bool, share float64) {
	state := "serving"
	switch {
	case drained:
		state = "drained"
	case blocked:
		state = "drain blocked"
	case healthy == 0:
		state = "unhealthy"
	}
	fmt.Fprintf(w, "  %-22s %-14s %-10s %-8s %-14s %5.1f%%\n", group, zone, pref, fmt.Sprintf("%d/%d", healthy, members), state, 100*share)
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
