package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spillwaylb/spillway/internal/lab"
)

const labHelp = `
Usage: spillway lab [flags]

Reproduce seed 000's "Test results" table with real traffic on this machine:
a 70/30 URL-map split over two backend services that share six zonal groups
(us-south1-a/b/c and us-east4-a/b/c, inverted PREFERRED/DEFAULT).

For every config (with-policy, no-policy, baseline from examples/seed-70-30,
built into the binary) and every scenario (steady; us-south1-a down; a,b
down; a,b,c down) the lab:

  1. starts a real HTTP server per backend instance on its configured
     loopback address (127.1.Z.I / 127.2.Z.I, port 18080). Each answers
     GET / with {"zone": "us-south1-a", "instance": "us-south1-a-vm1"} and
     the health check's path (/healthz) with 200 "ok";
  2. starts Spillway itself in-process (health checks, drain, proxy) with an
     HTTPS frontend on an ephemeral 127.0.0.1 port and a self-signed
     certificate. Lab settings: health checks every --interval (200ms)
     instead of 5 s, thresholds unchanged (2/2); undrain is never needed
     because each scenario starts fresh backends and a fresh Spillway;
  3. fails the scenario's zones (--fail-mode 1: their health path answers
     503 while / keeps working; 2: their listeners and connections close)
     and waits until the health view shows them UNHEALTHY and, with
     autoCapacityDrain, drained;
  4. sends --requests HTTPS requests (8 keep-alive connections, paced at
     --rate, well below the groups' RATE capacity of 300 rps, since the seed
     measured at low load) and counts the zone named in each answer.

Columns: the share of requests each region served, its zones a / b / c in
brackets, and the share answered 503. Under each row, "seed" shows the
seed's published numbers, and every row the seed published gets a verdict:
"match" when every region and the 503 share are within ±4.5 points and the
zones fit, else "DIFF". Zones fit under SPRAY_TO_REGION (with-policy) when
each is within ±4 points. Under WATERFALL_BY_REGION (no-policy, baseline)
a zone's share is a draw: the lab's one client (127.0.0.1) reaches only its
own second-layer proxies, each favouring a zone, as the seed's client did;
those zones fit when dead ones are empty, each region's busiest zone
carries a fraction of it that 99% of clients would see, and each zone lies
in the p1-p99 of 200 simulated clients in the same scenario, printed under
the row as "any client p1-p99" (docs/semantics.md §2.4). 'spillway simulate
--client-ip 127.0.0.1' predicts the lab's zones, and its p5-p95 column the
range.

The whole matrix (12 scenarios × 1,000 requests) takes about a minute;
progress goes to stderr, the table (or --json) to stdout. Linux only as is:
other systems need loopback aliases for 127.1.0.0/16 and 127.2.0.0/16.

Examples:
  spillway lab
  spillway lab --only with-policy --requests 2000
  spillway lab --fail-mode 2 --json
  spillway lab --config examples/seed-70-30/with-policy.yaml

--scenario winticket runs seed 003 (examples/winticket, built in) instead:
bs-default spans Tokyo (asia-northeast1) and Osaka (asia-northeast2) with
outlierDetection; the frontend serves from Osaka. Phases: 1 healthy (all to
Osaka); 2 Osaka answers 503 to every request while its health check stays
200, until outlier detection ejects it, then 100% Tokyo (with get-health's
ejected state); 3 Osaka healthy again, back after baseEjectionTime; 4 the
manual switch, a Reload to weights 0/100/0 (bs-tokyo) under load, with no
failed request. Lab settings: probes every --interval; outlierDetection
interval 10s -> --outlier-interval (1s) and baseEjectionTime 180s ->
--ejection-time (5s); thresholds unchanged. It takes about 12 s.
--requests (default 200 here) is per measured phase.

  spillway lab --scenario winticket
  spillway lab --scenario winticket --json

Fleet lab: --fleet runs the table through a fleet instead of one server: an
etcd embedded in the lab (one member, a free loopback port, a temporary data
directory) and --fleet-instances (3) instances in the lab process, each what
'spillway serve --fleet' runs (its config from etcd, sharded probing with 2
probers per target, the elected control loop) with a frontend of its own on
an ephemeral port. The config is pushed once per row; the row's requests go
round-robin through every frontend at the same total --rate. Instances are
named after the config's regions, primary first (the seed has two regions, so
the third is a second one in us-south1); --region is only reported today and
changes no routing. Every lease lives --fleet-lease (2s) instead of serve's
10 s, so deaths are noticed within seconds. By default only the with-policy
config runs (--only picks others).

Then the kill timeline: a fresh fleet with us-south1-a down, load through
every frontend; the control-loop leader is killed, then, once a new leader
leads and the dead one's probe targets are re-owned, a prober that does not
lead. A kill cuts the instance's TCP connections to etcd first, so its leases
expire (as after a crash) instead of being revoked (as after a clean stop); its
frontend leaves the clients' rotation, as anycast would move them. Reported:
the new leader's and the re-owning times, requests failed and answered from
a down zone in each window, and the next failure row (us-south1-a,b down) on
the survivor, with its verdict. --kill-together kills the leader and the
prober at the same moment instead, so the targets both probed lose both
probers at once. --no-kill skips the timeline. About 35 s.

  spillway lab --fleet
  spillway lab --fleet --only no-policy --no-kill --json

Global lab: --global builds a small internet in Linux network namespaces
(root only: it needs CAP_NET_ADMIN and CAP_SYS_ADMIN, iproute2 and BIRD 2)
and runs Spillway in it as a global edge: anycast by BGP for the first
hop, two proxy layers, and a DNS GSLB as the brain. Three sites, Ashburn
(us-east4), Frankfurt (europe-west3) and Tokyo (asia-northeast1), each
with:

  - a router running BIRD 2 (Debian's bird2), peered over eBGP with the
    other two across links that delay every packet, one way, 40 ms
    (Ashburn-Frankfurt), 70 ms (Ashburn-Tokyo) or 100 ms (Frankfurt-Tokyo);
  - an edge 'spillway serve' (layer EDGE) on 203.0.113.10:80 and
    [2001:db8:ac::10]:80 that announces 203.0.113.0/24 and
    2001:db8:ac::/48 to its router over BGP (an IPv4 and an IPv6
    session) while it can serve;
  - a regional layer 'spillway serve' (layer REGIONAL) with two zones of
    two backends (the lab's test backends, RATE 25 rps each);
  - a client namespace 2 ms from the router.

A GSLB ('spillway serve' with a DNS frontend, policy GEO) runs on the
Frankfurt LAN. Only documentation addresses (RFC 5737, RFC 3849) are
used. Rows
(expected, measured, verdict):

  a1-a3  each geography's clients reach their own site through the
         anycast address: TCP handshake against the direct path to the
         next site's own address; a4-a6 the same over IPv6
  b1     seed 001's waterfall scaled by 1/30: 150 rps of European
         clients (--rate; 150 by default here) against 100 rps per
         region, through both layers, against what 'spillway simulate'
         predicts
  b2     the second hop's cost: latency and CPU, two layers against one
  c1-c2  Frankfurt loses power under load: its router withdraws the
         prefix when the edge's BGP hold timer (3 s) runs out and the
         European clients move to Ashburn; then power back, failback
  c3-c5  Tokyo loses its backends while its edge lives: the edge keeps
         announcing and forwards onward; reloaded with
         minHealthyCapacityPercent 80 it withdraws; backends back, it
         announces again after the hold-down
  e1-e2  controlled anycast: Ashburn's edge, degraded below 80% healthy,
         prepends its AS; Tokyo's router (its edge withdrawn) moves to
         Frankfurt, Ashburn's keeps its own edge; the prepend goes after
         the hold-down
  d1-d4  the GSLB answers a Berlin client (ECS) with Frankfurt, Tokyo's
         with Tokyo, and Berlin with Ashburn while Frankfurt is down

Under the table, the c rows' timelines: each second's answers per client
geography by the edge that served them, and what happened. Namespaces are
named spw-*; all of it is removed at exit, and a run first removes what a
crashed one left. Without root it says so in one line and exits 1. About
a minute; docs/global.md, "spillway lab --global", explains the design
and shows a run.

  sudo spillway lab --global
  sudo spillway lab --global --json

Timeline mode (--at): one config (the seed's with-policy, or --config, or
--only NAME) under --rate for --duration, zones failing and recovering at
the --at offsets (--fail-mode 2 by default here: listeners close, so
requests the engine still sends there are refused until the health checks
see it), printed per --step by when each request was sent: the lab's side
of 'spillway simulate --rate R --duration D --at ...' (whose --fail-as
refused models the same failure). The two agree on the errors of the
detection window (docs/semantics.md §4.3):

  spillway lab --at 10s:down=us-south1 --rate 100 --duration 30s \
      --step 5s --interval 5s
  spillway simulate --config examples/seed-70-30/with-policy.yaml \
      --client-ip 127.0.0.1 --rate 100 --duration 30s --step 5s \
      --at 10s:down=us-south1

(--interval 5s keeps the config's own probe interval, so simulate needs
no change; shorter intervals shrink the window in both.)

--config FILE runs the four kinds of scenario on that one config instead:
steady, then the first one, two, ... all zones of the frontend's region
down. --json prints {"scenarios": [{"config", "down", "requests", "regions",
"zones", "status"}]} with counts; every zone is present.
`

// labCmd is one run of spillway lab: its flags.
type labCmd struct {
	cfgPath, scenario           string
	requests, failMode          int
	asJSON                      bool
	interval, outlierInterval   time.Duration
	ejectionTime                time.Duration
	rate                        float64
	fleet, noKill, killTogether bool
	global                      bool
	fleetInstances              int
	fleetLease                  time.Duration
	only                        listFlag
	at                          listFlag
	duration, step              time.Duration
	set                         map[string]bool
}

func runLab(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseLabFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := c.check(stderr); err != nil {
		return err
	}
	if c.global {
		return c.runGlobal(ctx, stdout, stderr)
	}
	if c.scenario != "" {
		return c.runWinticket(ctx, stdout, stderr)
	}
	configs, err := c.configs(stderr)
	if err != nil {
		return err
	}
	if len(c.at) > 0 {
		return c.runTimeline(ctx, configs, stdout, stderr)
	}
	if c.fleet {
		return c.runFleet(ctx, configs, stdout, stderr)
	}
	rep, err := lab.Run(ctx, c.options(configs, stderr))
	if err != nil {
		return err
	}
	if c.asJSON {
		return lab.WriteJSON(stdout, rep)
	}
	return lab.WriteTable(stdout, rep)
}

// parseLabFlags defines and parses spillway lab's flags.
func parseLabFlags(args []string, stderr io.Writer) (*labCmd, error) {
	c := &labCmd{}
	fs := newFlags("lab", labHelp, stderr)
	fs.StringVar(&c.cfgPath, "config", "", "run the scenarios on this config `FILE` instead of the seed's three")
	fs.IntVar(&c.requests, "requests", lab.DefaultRequests, "HTTPS requests per scenario")
	fs.IntVar(&c.failMode, "fail-mode", int(lab.FailHealthCheck), "how zones fail: 1 = health path answers 503, 2 = listeners stop")
	fs.BoolVar(&c.asJSON, "json", false, `print {"scenarios": [...]} with counts instead of the table`)
	fs.DurationVar(&c.interval, "interval", lab.DefaultInterval, "health-check interval the lab sets (checkIntervalMs)")
	fs.Float64Var(&c.rate, "rate", lab.DefaultRate, "requests per second; keep it below the RATE capacity left after failures")
	fs.StringVar(&c.scenario, "scenario", "", "run a named scenario instead of the seed-000 matrix: winticket")
	fs.DurationVar(&c.outlierInterval, "outlier-interval", lab.DefaultOutlierInterval, "winticket: outlierDetection.interval the lab sets")
	fs.DurationVar(&c.ejectionTime, "ejection-time", lab.DefaultBaseEjectionTime, "winticket: outlierDetection.baseEjectionTime the lab sets")
	fs.BoolVar(&c.fleet, "fleet", false, "run the table through a fleet (three instances on an embedded etcd), then kill the control-loop leader and a prober under load (see Fleet lab above)")
	fs.BoolVar(&c.global, "global", false, "run the global lab instead: three sites in network namespaces, BGP anycast, two proxy layers and a GSLB (see Global lab above; root only)")
	fs.IntVar(&c.fleetInstances, "fleet-instances", lab.DefaultFleetInstances, "--fleet: how many instances")
	fs.DurationVar(&c.fleetLease, "fleet-lease", lab.DefaultFleetLeaseTTL, "--fleet: the TTL of every lease (registrations, verdicts, election), instead of serve's 10s")
	fs.BoolVar(&c.noKill, "no-kill", false, "--fleet: the table only, no kill timeline")
	fs.BoolVar(&c.killTogether, "kill-together", false, "--fleet: kill the leader and the prober at the same moment, not one after the other")
	fs.Var(&c.only, "only", "comma-separated `LIST` of seed configs to run: with-policy, no-policy, baseline")
	fs.Var(&atFlag{&c.at}, "at", "timeline mode: fail or recover zones or regions under load, `OFFSET:down=LIST` or OFFSET:up=LIST (repeatable), as spillway simulate --at does")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "timeline mode: how long the load runs")
	fs.DurationVar(&c.step, "step", 0, "timeline mode: the width of a timeline step (default duration/10)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	c.set = givenFlags(fs)
	return c, nil
}

// check rejects flag combinations that do not make a run.
func (c *labCmd) check(stderr io.Writer) error {
	if c.failMode != 1 && c.failMode != 2 {
		fmt.Fprintf(stderr, "spillway lab: --fail-mode %d: use 1 (health path answers 503) or 2 (listeners stop)\n", c.failMode)
		return errUsage
	}
	if c.requests <= 0 || c.rate <= 0 || c.interval < 10*time.Millisecond {
		fmt.Fprintln(stderr, "spillway lab: --requests and --rate must be positive and --interval at least 10ms")
		return errUsage
	}
	if c.global && (c.fleet || c.scenario != "" || c.cfgPath != "" || len(c.only) > 0 || len(c.at) > 0) {
		fmt.Fprintln(stderr, "spillway lab: --global runs its own topology; it takes only --rate and --json")
		return errUsage
	}
	if c.fleet && c.scenario != "" {
		fmt.Fprintln(stderr, "spillway lab: --fleet runs seed 000's table; it cannot be combined with --scenario")
		return errUsage
	}
	if c.scenario == "" {
		return nil
	}
	if c.scenario != "winticket" {
		fmt.Fprintf(stderr, "spillway lab: --scenario %q: the only named scenario is winticket\n", c.scenario)
		return errUsage
	}
	if c.cfgPath != "" || len(c.only) > 0 {
		fmt.Fprintln(stderr, "spillway lab: --scenario winticket runs examples/winticket; it cannot be combined with --config or --only")
		return errUsage
	}
	return nil
}

// runWinticket runs --scenario winticket.
func (c *labCmd) runWinticket(ctx context.Context, stdout, stderr io.Writer) error {
	n, r := lab.DefaultWinticketRequests, float64(lab.DefaultWinticketRate)
	if c.set["requests"] {
		n = c.requests
	}
	if c.set["rate"] {
		r = c.rate
	}
	rep, err := lab.RunWinticket(ctx, lab.WinticketOptions{
		Interval: c.interval, OutlierInterval: c.outlierInterval, BaseEjectionTime: c.ejectionTime,
		Requests: n, Rate: r, Progress: stderr,
	})
	if err != nil {
		return err
	}
	if c.asJSON {
		return lab.WriteWinticketJSON(stdout, rep)
	}
	return lab.WriteWinticketTable(stdout, rep)
}

// configs returns the configs the table runs on: --config's, or the
// seed's (--only; with --fleet, with-policy by default).
func (c *labCmd) configs(stderr io.Writer) ([]lab.Config, error) {
	switch {
	case c.cfgPath != "" && len(c.only) > 0:
		fmt.Fprintln(stderr, "spillway lab: --only picks among the seed's configs; it cannot be combined with --config")
		return nil, errUsage
	case c.cfgPath != "":
		cfg, err := lab.LoadConfig(c.cfgPath)
		if err != nil {
			return nil, err
		}
		return []lab.Config{cfg}, nil
	case c.fleet && len(c.only) == 0:
		return lab.SeedConfigs([]string{"with-policy"})
	default:
		return lab.SeedConfigs(c.only)
	}
}

// options are the lab options of the table on configs.
func (c *labCmd) options(configs []lab.Config, stderr io.Writer) lab.Options {
	return lab.Options{
		Configs: configs, Requests: c.requests, FailMode: lab.FailMode(c.failMode),
		Interval: c.interval, Rate: c.rate, Progress: stderr,
	}
}

// runFleet runs the table through a fleet (--fleet).
func (c *labCmd) runFleet(ctx context.Context, configs []lab.Config, stdout, stderr io.Writer) error {
	if c.fleetInstances < 2 {
		fmt.Fprintln(stderr, "spillway lab: --fleet-instances must be at least 2")
		return errUsage
	}
	if err := checkFleetLease(c.fleetLease); err != nil {
		return err
	}
	rep, err := lab.RunFleet(ctx, lab.FleetOptions{
		Options:   c.options(configs, stderr),
		Instances: c.fleetInstances, LeaseTTL: c.fleetLease, NoKill: c.noKill, Together: c.killTogether,
	})
	if err != nil {
		return err
	}
	if c.asJSON {
		return lab.WriteFleetJSON(stdout, rep)
	}
	return lab.WriteFleetTable(stdout, rep)
}
