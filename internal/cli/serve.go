package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/embedded"
	"github.com/spillwaylb/spillway/internal/procs"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/connlimit"
	"github.com/spillwaylb/spillway/internal/serve/handoff"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

const serveHelp = `
Usage: spillway serve --config FILE [flags]
       spillway serve --fleet etcd://HOST:2379,... --instance NAME --region R [--config FILE] [flags]
       spillway serve --fleet-embedded NAME=http://HOST:2380,... --instance NAME --region R [--config FILE] [flags]

Run the load balancer: every frontends[] entry listens (HTTP/1.1 and HTTP/2;
h2c on cleartext, ALPN on TLS), each request goes through the URL map, the
security policies, Cloud CDN's cache and the decision engine to an endpoint,
and active health checks, auto-capacity drain and failover act live. With
spillway.bgp it announces its anycast prefixes while it can serve. Saving the
file, SIGHUP or POST /reload reloads the config; one that fails validation is
rejected and the running one keeps serving. The admin listener (loopback)
serves /health, /metrics and the live dashboard /ui/. With --fleet or
--fleet-embedded, instances share one config through etcd (docs/fleet.md).

Examples:
  spillway serve --config examples/seed-70-30/with-policy.yaml
  spillway get-health --admin 127.0.0.1:9901
  spillway serve --fleet etcd://10.0.0.5:2379 --instance lb-use1-a --region us-east1 \
      --config /etc/spillway/last-resort.yaml
`

// serveHelpTopics is what spillway serve --help-all adds: hot reload,
// TLS, the admin API, limits, CPUs, fleet mode and the embedded etcd.
const serveHelpTopics = `
Hot reload: send SIGHUP, POST /reload on the admin address, or just save the
file (it is polled every second, and reloaded whenever its content differs
from the config in force, however that config was applied). A config that
fails validation is rejected with a log line and the running config keeps
serving; open connections and in-flight requests survive a reload.

TLS: the certificate, key and CA files of HTTPS frontends are read again on
every reload and whenever they change (same poll), without touching the
listener; files that fail to load are logged and the old ones keep serving.
With several certificates, each handshake takes the first matching the
client's SNI. A frontend's sslPolicy (minimum TLS version, cipher profile;
without one, TLS 1.2 and up) and serverTlsPolicy (client certificates,
checked against a trust config's CA files) follow Google Cloud's resources;
see docs/extensions.md.

The admin listener (loopback by default) serves:
  GET  /healthz   liveness (never needs the token)
  GET  /health    the get-health view as JSON (per service, backend, endpoint:
                  health state, drained or drain-blocked, why)
  GET  /metrics   Prometheus metrics: endpoint health and ejection, backend
                  healthy members, drained / drain-blocked, traffic share,
                  offered rate per service and client region (in fleet
                  mode the fleet's), config and TLS file reloads and
                  failures, Cloud CDN hits, misses and store, BGP
                  sessions and prefixes, Go runtime;
                  in fleet mode spillway_fleet_stale and
                  spillway_fleet_config_revision
  GET  /ui/       the live dashboard: zones, drains, the split and the
                  measured split, rates, DNS answers, recent transitions
                  (with a token, open /ui/#token=TOKEN; docs/operations.md)
  GET  /debug/pprof/  profiling, only with --pprof
  POST /reload    reload the config file now
  GET  /overlay   the runtime overlay: drains, capacity scalers and weights
                  set with spillway ctl (also in /health and on /ui/)
  POST /overlay   change it (spillway ctl; each change is audit-logged,
                  and with --audit-log FILE also written there as JSON)
  POST /cache/invalidate  remove Cloud CDN objects by path or /prefix/*
                  (spillway cache invalidate; only with a CDN-enabled
                  backend)

Admin access: with a token (--admin-token-file FILE, or the environment
variable SPILLWAY_ADMIN_TOKEN; at least 16 characters), requests send
"Authorization: Bearer TOKEN": always for POSTs (/reload, /overlay,
/cache/invalidate) and /debug/pprof/, and for everything but /healthz when
--admin is not a loopback address. A non-loopback --admin without a token is
refused at start. Browsers cannot drive the API: cross-origin POSTs, and
requests to a loopback listener by a host name other than localhost, are
answered 403.

Connections: --max-connections bounds the client connections of all frontends
together (default auto: half the file-descriptor limit, as a proxied connection
usually holds a backend connection too), HTTP/3's QUIC connections included.
Past it, new TCP connections wait in the kernel's accept queue until one
closes, and new QUIC connections are refused (CONNECTION_REFUSED: clients
fall back to TCP). Request heads must arrive within 30 s
of a connection opening (then of their first byte; on HTTP/2, every header
block within 30 s of its HEADERS frame), idle keep-alive connections close
after 610 s, and the whole exchange, writing the response
to a client that reads slowly included, is bounded by the route's timeout or
the backend service's timeoutSec. The admin listener has limits of its own,
not counted by --max-connections: 64 connections, 2 min idle, 30 s per request
and response. docs/security.md lists every limit.

CPUs: --procs auto (the default) runs Go code on as many CPUs as the load
needs: one while a CPU keeps up, doubling whenever the ones in use are over
80% busy, and giving one back after 2 s under 60% of one fewer. A proxy's
goroutines mostly wait on sockets, and idle CPUs woken for every request
cost about a fifth of its CPU per request at moderate load
(docs/performance.md). --procs N fixes the number; so does the GOMAXPROCS
environment variable when --procs is not given. On Linux, each goroutine
serving a DNS frontend's UDP socket (half the CPUs) adds one more: it
spends most of its time blocked in the kernel. The current number is the
go_sched_gomaxprocs_threads metric; changes are logged at debug level.

Cloud CDN: backend services with enableCDN: true and backend buckets (local
directories) with enableCdn: true are cached after the security policies, by
their cdnPolicy (cacheMode, TTLs, negative caching, serve while stale, signed
URLs); responses say what happened in Cache-Status. The store is
spillway.cdn (memory, and an optional disk tier that survives restarts),
made at start: a reload keeps its objects and applies each backend's new
cdnPolicy, but a changed spillway.cdn needs a restart. A bucket whose
directory does not exist is refused at start and on reload. Empty a path
with spillway cache invalidate (docs/cdn.md):

  spillway cache invalidate --admin 127.0.0.1:9901 --path '/images/*'

Anycast (BGP): with spillway.bgp in the config the instance speaks BGP to the
routers it names and announces each frontend's anycastPrefixes only while it
can serve them: withdrawn when no endpoint its URL map reaches is healthy (or
less than minHealthyCapacityPercent of its capacity), degraded with an AS-path
prepend or a MED below degraded.belowHealthyCapacityPercent, back only after
holdDownSec healthy. On SIGTERM it withdraws first, serves on for drainSec,
then closes. get-health, /metrics and /ui show every session and prefix with
the reason (docs/global.md, "Anycast with BGP"; the fields:
docs/extensions.md):

  spillway:
    bgp:
      localAsn: 65001
      routerId: 192.0.2.1
      neighbors: [{address: 192.0.2.254, peerAsn: 65000}]
  frontends:
  - {name: edge, address: 203.0.113.10:80, urlMap: web-map,
     anycastPrefixes: [203.0.113.0/24]}

  spillway get-health --admin 127.0.0.1:9901   # sessions, prefixes, reasons

Fleet mode: with --fleet, several instances share one config through etcd
(docs/fleet.md). The instance takes the fleet's current config (pushed with
spillway config push), follows every new revision with the reload rules
above, and reports what it runs under its --instance name (spillway config
get --instances). If etcd is unreachable it keeps serving its last good
config and says so: "fleet": {"stale": true, ...} in /health and
spillway_fleet_stale 1 in /metrics; once etcd is back it catches up without a
restart. At start, if etcd does not answer within --fleet-timeout (or holds
no config yet), --config FILE is served instead, with a log line saying so;
without --config the start fails. In fleet mode the file is not watched, and
SIGHUP and POST /reload do not apply: push instead. etcd TLS: --fleet-ca,
--fleet-cert, --fleet-key (or the etcds:// scheme for the system roots);
authentication: --fleet-user with --fleet-password-file or
$SPILLWAY_FLEET_PASSWORD.

In fleet mode RATE capacity (maxRatePerInstance, maxRatePerEndpoint,
maxRate) is the fleet's, not each instance's: every instance publishes the
rate it receives per backend service and client region to etcd (when it moves
by more than 5%) and spills what the whole fleet offers over capacity, so N
instances do not get N times the configured rate. If etcd is lost the others'
rates are kept as last seen. --fleet-rate=false counts each instance's own
demand only. Likewise the security policies' throttle and rate_based_ban
rules count each key across the fleet (within about a second; bans hold on
every instance); --fleet-rate-limits=false counts per instance. Health
checks are sharded (--fleet-probers) and auto-capacity drain is decided by
one elected instance; see docs/fleet.md.

Two layers: --role edge serves every frontend but the REGIONAL ones and
probes no endpoint behind a regional layer (in a fleet, the regional
instances of the endpoint's region do, and the edge follows their
verdicts); --role regional --region R serves every frontend but the EDGE
ones, and of the REGIONAL ones those of R. One fleet config can then hold
both layers. UTILIZATION backends get their capacity from the utilisation
their endpoints report in the endpoint-load-metrics header, shared
through the fleet; see docs/global.md.

Embedded etcd: with --fleet-embedded the instances run etcd themselves, one
member each, so trying fleet mode needs no separate etcd. Give every instance
the same initial cluster, NAME=http://HOST:PORT for each member's peer
listener (as etcd's --initial-cluster); this instance's member is the one
named --instance. --fleet-embedded-client is where its member serves clients
(default http://127.0.0.1:2379); the instance connects there and learns the
other members' client URLs from etcd (unless --fleet names endpoints).
--fleet-embedded-client must be an address the other members reach, not
0.0.0.0 or [::]: it is advertised to them as given.

--fleet-data is the member's data directory. The default,
$TMPDIR/spillway-etcd-NAME, is for trying it only: a reboot clears it, and so
does every restart under systemd's PrivateTmp. In production give
--fleet-data on persistent storage (e.g. /var/lib/spillway/etcd). A member
that lost its data cannot rejoin as new: restore the directory, or run
etcdctl member remove and member add for it and restart it with an empty
--fleet-data and --fleet-embedded-state existing (default new: bootstrap the
cluster; either is used only while the data directory is empty).

etcd answers once a majority of the members run (2 of 3): until then an
instance starts from --config FILE, marked stale, and follows the fleet once
the quorum forms. If the member does not start at all (a lost data directory,
a port in use), an instance with --config FILE logs the error with the fix
and serves that file, stale; it follows the fleet through --fleet's endpoints
if given (name the other members' client URLs there), else it stays stale
until restarted. Without --config it fails. A member that stops later is
logged as an error and the instance serves on, stale while etcd does not
answer. etcd itself exits the whole process, proxy included, on unrecoverable
storage errors (a failed write to its WAL or database, e.g. a full disk); its
last log line, at level fatal, says why. Members speak plain HTTP: use them
on a trusted network, or run etcd yourself with TLS.

More examples:
  spillway config push spillway.yaml --fleet etcd://10.0.0.5:2379
  spillway serve --fleet etcd://10.0.0.5:2379,10.0.0.6:2379,10.0.0.7:2379 \
      --instance lb-use1-a --region us-east1 --config /etc/spillway/last-resort.yaml
  # the same, but the security policies' rate limits and bans count this
  # instance's requests alone (config, probes and RATE demand stay shared):
  spillway serve --fleet etcd://10.0.0.5:2379 --instance lb-use1-a --region us-east1 \
      --fleet-rate-limits=false

  # three instances on one machine, each with its etcd member (the config's
  # frontends on 127.0.0.1:0, or they would collide):
  C=a=http://127.0.0.1:2380,b=http://127.0.0.1:2382,c=http://127.0.0.1:2384
  spillway serve --fleet-embedded $C --instance a --fleet-embedded-client http://127.0.0.1:2379 \
      --admin 127.0.0.1:9901 --config spillway.yaml &
  spillway serve --fleet-embedded $C --instance b --fleet-embedded-client http://127.0.0.1:2381 \
      --admin 127.0.0.1:9902 --config spillway.yaml &
  spillway serve --fleet-embedded $C --instance c --fleet-embedded-client http://127.0.0.1:2383 \
      --admin 127.0.0.1:9903 --config spillway.yaml &
  spillway config push spillway.yaml --fleet etcd://127.0.0.1:2379
`

// serveCommonFlags are the flags spillway serve --help lists.
var serveCommonFlags = []string{"config", "admin", "admin-token-file", "log-level", "log-format", "watch", "fleet", "fleet-embedded", "instance", "region"}

// checkFleetLease checks a --fleet-lease value: etcd leases count whole
// seconds, and a lease kept alive every third of its TTL needs 2 s or
// more to survive a slow keepalive.
func checkFleetLease(d time.Duration) error {
	if d < 2*time.Second || d%time.Second != 0 {
		return fmt.Errorf("--fleet-lease %s: etcd leases count whole seconds and are kept alive every third of their TTL (fix: give whole seconds, at least 2s, e.g. --fleet-lease 10s)", d)
	}
	return nil
}

// serveCmd is one run of spillway serve: its flags, then what the steps
// of runServe derive from them.
type serveCmd struct {
	cfgPath, admin, level, logFormat, procs, tokenFile, maxConns string
	auditLog, upgradeSocket                                      string
	handover                                                     *handoff.Handover
	watch                                                        time.Duration
	pprof                                                        bool
	ff                                                           *fleetFlags
	instance, region, role                                       string
	fleetTimeout, fleetLease                                     time.Duration
	fleetProbers                                                 int
	fleetRate, fleetRateLimits                                   bool
	embedded, embeddedClient, fleetData, embeddedState, etcdLog  string
	set                                                          map[string]bool

	token     string
	member    *embedded.Options // --fleet-embedded's member; nil without
	fleetMode bool
	log       *slog.Logger
	autoProcs bool
	wi        time.Duration // serve.Options.WatchInterval
	conns     int

	cfg         *config.Config
	store       *fleet.Store
	fleetStatus control.FleetStatus
	watchPath   string
	// closers run when runServe returns, last added first.
	closers []func()
}

func runServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	ctx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	c, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	defer c.close()
	if err := c.checkFlags(stderr); err != nil {
		return err
	}
	if err := c.setupProcess(stderr); err != nil {
		return err
	}
	if err := c.loadConfig(ctx); err != nil {
		return err
	}
	opts := serve.Options{Admin: c.admin, AdminToken: c.token, Pprof: c.pprof, Logger: c.log, ConfigPath: c.watchPath, WatchInterval: c.wi, MaxConnections: c.conns, WAF: newWAF(), Instance: c.instance, Role: c.role, Region: c.region}
	if err := c.openAuditLog(&opts); err != nil {
		return err
	}
	if err := c.takeSockets(ctx, &opts); err != nil {
		return err
	}
	var inst *fleet.Instance
	if c.fleetMode {
		if inst, err = c.fleetInstance(&opts); err != nil {
			return err
		}
	}
	runErr := make(chan error, 1)
	srv, err := c.startServer(ctx, opts, runErr)
	if err != nil {
		c.handover.Abort() // the old process keeps serving
		return err
	}
	c.upgraded(ctx, opts.Sockets, srv, stopRun)
	c.handleSIGHUP(ctx, srv)
	if c.fleetMode {
		c.runInstance(ctx, inst, srv)
	}
	if c.autoProcs {
		go runAutoProcs(ctx, c.log)
	}
	c.log.Info("spillway serving", "admin", srv.AdminAddr())
	return <-runErr
}

// parseServeFlags defines and parses spillway serve's flags.
func parseServeFlags(args []string, stderr io.Writer) (*serveCmd, error) {
	c := &serveCmd{}
	fs := newFlagsHelp("serve", help{text: serveHelp, more: serveHelpTopics, common: serveCommonFlags}, stderr)
	fs.StringVar(&c.cfgPath, "config", "", "config `FILE` (YAML or JSON)")
	fs.StringVar(&c.admin, "admin", "127.0.0.1:9901", "admin listener `ADDR` (empty to disable)")
	fs.StringVar(&c.level, "log-level", "info", "log `LEVEL`: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "process log `FORMAT`: text (key=value) or json (one JSON object a line)")
	fs.DurationVar(&c.watch, "watch", time.Second, "poll `INTERVAL` of the config file and the TLS certificate, key and CA files (0 disables the watch)")
	fs.StringVar(&c.procs, "procs", "auto", "CPUs that run Go code at once (GOMAXPROCS): a number, or auto to follow the load (see CPUs above)")
	fs.StringVar(&c.tokenFile, "admin-token-file", "", "`FILE` holding the admin API bearer token (default: the SPILLWAY_ADMIN_TOKEN environment variable)")
	fs.StringVar(&c.upgradeSocket, "upgrade-socket", "", "zero-downtime binary upgrade: serve the listening sockets to a successor on the Unix socket `PATH`, and at start take them over from the spillway serve offering them there, which then stops accepting, finishes its requests in flight and exits (docs/deploy.md)")
	fs.StringVar(&c.auditLog, "audit-log", "", "append one JSON line per runtime overlay change (spillway ctl: who, what, when, from where) to `FILE` (default: the process log only)")
	fs.BoolVar(&c.pprof, "pprof", false, "serve net/http/pprof under /debug/pprof/ on the admin listener")
	fs.StringVar(&c.maxConns, "max-connections", "auto", "client connections of all frontends together: a number, 0 for no limit, or auto (half the file-descriptor limit)")
	c.ff = addFleetFlags(fs, "run in fleet mode: the config comes from etcd at `ENDPOINTS`, etcd://host:2379,host:2379 (default $"+fleetEnv+")")
	host, _ := os.Hostname()
	fs.StringVar(&c.instance, "instance", host, "this instance's `NAME` (the dashboard shows it; in fleet mode, unique in the fleet) (default the host name)")
	fs.StringVar(&c.region, "region", "", "the `REGION` this instance runs in, e.g. us-east1 (fleet mode: registered with the instance; with --role regional: the REGIONAL frontends it serves)")
	fs.StringVar(&c.role, "role", "all", "the proxy `LAYER` this instance runs (docs/global.md): all (every frontend), edge (every frontend but the REGIONAL ones; probes no endpoint behind a regional layer) or regional (every frontend but the EDGE ones; of the REGIONAL ones, those of --region)")
	fs.DurationVar(&c.fleetTimeout, "fleet-timeout", 5*time.Second, "fleet mode: how long to wait for etcd at start before falling back to --config")
	fs.IntVar(&c.fleetProbers, "fleet-probers", fleet.DefaultProbers, "fleet mode: how many instances probe each endpoint (sharded probing; 0: every instance probes every endpoint)")
	fs.DurationVar(&c.fleetLease, "fleet-lease", 10*time.Second, "fleet mode: the TTL of this instance's leases (registration, verdicts, offered rate, election): how long after a crash the fleet moves its probes and elects a new leader. Whole seconds, at least 2s")
	fs.BoolVar(&c.fleetRateLimits, "fleet-rate-limits", true, "fleet mode: security policies' throttle and rate_based_ban rules count each key across the fleet, and bans hold on every instance, shared through etcd; false: each instance counts alone")
	fs.BoolVar(&c.fleetRate, "fleet-rate", true, "fleet mode: count RATE capacity (maxRatePerInstance, maxRatePerEndpoint, maxRate) against the fleet's offered rate, shared through etcd; false: against this instance's alone")
	fs.StringVar(&c.embedded, "fleet-embedded", "", "fleet mode with etcd inside the instances: the initial `CLUSTER` NAME=http://HOST:PORT,... (each member's peer URL; this instance's member is the one named --instance)")
	fs.StringVar(&c.embeddedClient, "fleet-embedded-client", embedded.DefaultClientURL, "--fleet-embedded: this member's client `URL`, advertised to the other members: an address they reach, not 0.0.0.0")
	fs.StringVar(&c.fleetData, "fleet-data", "", "--fleet-embedded: this member's data `DIR` (default $TMPDIR/spillway-etcd-NAME, which a reboot clears: give a persistent one in production)")
	fs.StringVar(&c.embeddedState, "fleet-embedded-state", "new", "--fleet-embedded: etcd's initial cluster `STATE`, used only while --fleet-data is empty: new (bootstrap the cluster with the --fleet-embedded members) or existing (join a running cluster that lists this member already: etcdctl member add, e.g. to replace a member that lost its data directory)")
	fs.StringVar(&c.etcdLog, "fleet-embedded-log-level", "fatal", "--fleet-embedded: etcd's own log `LEVEL` on stderr, in etcd's JSON: debug, info, warn, error or fatal (default fatal: only what exits the process; what etcd logs while the instance closes its member is dropped)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	c.set = givenFlags(fs)
	return c, nil
}

// takeSockets inherits listening sockets: systemd's (LISTEN_FDS) or,
// with --upgrade-socket, those of the spillway serve offering them there.
func (c *serveCmd) takeSockets(ctx context.Context, opts *serve.Options) error {
	opts.Sockets = handoff.FromEnv()
	if n := opts.Sockets.Len(); n > 0 {
		c.log.Info("systemd socket activation: inherited listening sockets", "sockets", n)
	}
	if c.upgradeSocket == "" {
		return nil
	}
	sockets, h, err := handoff.Take(ctx, c.upgradeSocket)
	if err != nil {
		return fmt.Errorf("--upgrade-socket: %w (fix: check that the running spillway serve was started with the same --upgrade-socket, or remove the stale file)", err)
	}
	if h != nil {
		c.log.Info("upgrade: took the listening sockets of the running spillway serve", "pid", h.PID, "sockets", sockets.Len())
		opts.Sockets.Close()
		opts.Sockets, c.handover = sockets, h
	}
	return nil
}

// quicUpgradeDrain bounds how long the old process of a binary upgrade
// lets its HTTP/3 requests in flight finish before it closes their
// connections and releases the UDP sockets to the new process, whose new
// QUIC connections wait until then: shorter than a QUIC client's
// handshake timeout (5 s in quic-go, 10 s in browsers).
const quicUpgradeDrain = 3 * time.Second

// upgraded finishes a takeover once srv serves (the old process stops
// accepting and finishes), closes inherited sockets no listener took,
// and offers srv's sockets to the next process on --upgrade-socket:
// when one takes them, stop ends this one.
func (c *serveCmd) upgraded(ctx context.Context, sockets *handoff.Sockets, srv *serve.Server, stop context.CancelFunc) {
	sockets.Close()
	if c.handover != nil {
		if err := c.handover.Ready(); err != nil {
			c.log.Error("upgrade: could not tell the old process to finish; stop it yourself", "pid", c.handover.PID, "err", err)
		} else {
			c.log.Info("upgrade: serving; the old process finishes its requests in flight and exits", "pid", c.handover.PID)
		}
	}
	if c.upgradeSocket == "" {
		return
	}
	go func() {
		err := handoff.Offer(ctx, c.upgradeSocket, srv.ListenerFiles, func() {
			c.log.Info("upgrade: a new process took the listening sockets; finishing the requests in flight, then exiting")
			// HTTP/3 first: its sockets are released to the new process
			// once its requests in flight are done (Offer says so when
			// this returns); the TCP side stops meanwhile.
			qctx, cancel := context.WithTimeout(context.Background(), quicUpgradeDrain)
			defer cancel()
			released := srv.DetachQUIC(qctx)
			stop()
			<-released
		})
		if err != nil {
			c.log.Error("upgrade: the upgrade socket does not serve; an upgrade will bind anew", "err", err)
		}
	}()
}

// openAuditLog opens --audit-log for appending.
func (c *serveCmd) openAuditLog(opts *serve.Options) error {
	if c.auditLog == "" {
		return nil
	}
	f, err := os.OpenFile(c.auditLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("--audit-log: %w (fix: give a file the process can write, e.g. /var/log/spillway/audit.log)", err)
	}
	c.closers = append(c.closers, func() { f.Close() })
	opts.AuditLog = f
	return nil
}

// close runs the closers, last added first.
func (c *serveCmd) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}

// checkFlags checks the flags that need no logger: the admin token, the
// embedded member, the lease and that there is a config to serve.
func (c *serveCmd) checkFlags(stderr io.Writer) error {
	var err error
	if c.token, err = adminToken(c.tokenFile); err != nil {
		return err
	}
	if c.member, err = embeddedFlags(c.set, c.ff, c.embedded, c.embeddedClient, c.fleetData, c.embeddedState, c.instance); err != nil {
		return err
	}
	if c.member != nil {
		switch c.etcdLog {
		case "debug", "info", "warn", "error", "fatal":
			c.member.LogLevel = c.etcdLog
		default:
			return fmt.Errorf("--fleet-embedded-log-level %q: want debug, info, warn, error or fatal", c.etcdLog)
		}
	}
	c.fleetMode = c.ff.given() || c.member != nil
	if c.role, err = parseRole(c.role); err != nil {
		return err
	}
	if err := checkFleetLease(c.fleetLease); err != nil {
		return err
	}
	if c.cfgPath == "" && !c.fleetMode {
		fmt.Fprintln(stderr, "spillway serve: --config is required (try --config examples/seed-70-30/with-policy.yaml), or --fleet etcd://HOST:2379 for fleet mode")
		return errUsage
	}
	return nil
}

// parseRole turns --role into serve.Options.Role: "" for all,
// config.LayerEdge or config.LayerRegional.
func parseRole(s string) (string, error) {
	switch strings.ToLower(s) {
	case "all", "":
		return "", nil
	case "edge":
		return config.LayerEdge, nil
	case "regional":
		return config.LayerRegional, nil
	}
	return "", fmt.Errorf("--role %q: want all, edge or regional", s)
}

// setupProcess builds the logger and applies --procs, --watch and
// --max-connections.
func (c *serveCmd) setupProcess(stderr io.Writer) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.level)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", c.level)
	}
	var err error
	if c.log, err = newLogger(stderr, c.logFormat, lvl); err != nil {
		return err
	}
	if c.autoProcs, err = setProcs(c.procs, c.set["procs"], c.log); err != nil {
		return err
	}
	c.wi = c.watch
	if c.wi == 0 {
		c.wi = -1
	}
	c.conns, err = maxConnections(c.maxConns)
	return err
}

// loadConfig reads the config to start with: the fleet's (joinFleet) or
// the --config file's.
func (c *serveCmd) loadConfig(ctx context.Context) error {
	c.watchPath = c.cfgPath
	if c.fleetMode {
		if err := c.joinFleet(ctx); err != nil {
			return err
		}
	} else {
		var err error
		if c.cfg, err = config.Load(c.cfgPath); err != nil {
			return err
		}
	}
	for _, w := range c.cfg.Warnings() {
		c.log.Warn(w, "file", c.cfg.File)
	}
	return nil
}

// joinFleet starts the embedded member (with --fleet-embedded), opens the
// store and takes the fleet's config (or the --config fallback).
func (c *serveCmd) joinFleet(ctx context.Context) error {
	if c.instance == "" {
		return fmt.Errorf("--instance: fleet mode needs a name for this instance, unique in the fleet (fix: give --instance NAME)")
	}
	if c.member != nil {
		if err := c.startMember(ctx); err != nil {
			return err
		}
	}
	store, closeStore, err := c.ff.store()
	if err != nil {
		return err
	}
	c.store = store
	c.closers = append(c.closers, closeStore)
	// The fleet is the source of the config: the file, if any, is only
	// the fallback at start, never watched.
	c.watchPath = ""
	c.cfg, c.fleetStatus, err = fleet.Start(ctx, store, c.cfgPath, c.fleetTimeout, c.log)
	return err
}

// startMember starts this instance's embedded etcd member and points the
// fleet flags at it unless --fleet names endpoints. A member that does
// not start is fatal only without --config.
func (c *serveCmd) startMember(ctx context.Context) error {
	member, log := c.member, c.log
	if !c.set["fleet-data"] {
		log.Warn("fleet: the embedded etcd member keeps its data under the temporary directory, which a reboot (or, under systemd's PrivateTmp, a restart) clears; a member that lost it cannot rejoin without etcdctl member remove and member add (fix: give --fleet-data DIR on persistent storage, e.g. /var/lib/spillway/etcd)", "data", member.Dir)
	}
	client := member.ClientURL.Host
	m, err := embedded.Start(*member)
	switch {
	case err != nil && c.cfgPath == "":
		return fmt.Errorf("--fleet-embedded: %w; without --config FILE this instance has nothing to serve while its member is down (fix: give --config FILE as well, served marked stale until etcd answers)", err)
	case err != nil:
		// Static stability: the data plane does not wait for the
		// control plane's member. The instance goes on as one
		// whose etcd is unreachable: --config, stale, following
		// the fleet through --fleet's endpoints if given.
		log.Error("fleet: the embedded etcd member did not start; serving without it (from --config, stale, until etcd answers through --fleet's endpoints, if given)", "member", member.Name, "data", member.Dir, "err", err)
	default:
		c.closers = append(c.closers, func() { m.Close() })
		client = m.ClientAddr()
		go watchMember(ctx, m, member.Name, log)
		log.Info("fleet: embedded etcd member started", "member", member.Name, "client", client, "data", member.Dir, "cluster", c.embedded)
	}
	if !c.ff.given() {
		// Its own member first; the others' client URLs come
		// from the member list, refreshed every 30 s.
		*c.ff.endpoints = "etcd://" + dialable(client)
		c.ff.autoSync = 30 * time.Second
	}
	log.Info("fleet: etcd endpoints", "etcd", *c.ff.endpoints)
	return nil
}

// watchMember logs the embedded member stopping on its own before ctx
// ends. A member that stops does not stop the proxy: the fleet agent
// turns stale once etcd does not answer, and the data plane serves on.
func watchMember(ctx context.Context, m *embedded.Member, name string, log *slog.Logger) {
	select {
	case <-ctx.Done():
	case <-m.Stopped():
		if err := m.Err(); err != nil {
			log.Error("fleet: the embedded etcd member stopped; serving on", "member", name, "err", err)
		}
	}
}

// fleetInstance builds the fleet side of the instance and sets the
// shares it runs in opts.
func (c *serveCmd) fleetInstance(opts *serve.Options) (*fleet.Instance, error) {
	inst, err := fleet.NewInstance(c.store, fleet.InstanceOptions{Instance: c.instance, Region: c.region, Role: c.role, Probers: c.fleetProbers, Rate: c.fleetRate, RateLimits: c.fleetRateLimits, LeaseTTL: c.fleetLease, Logger: c.log})
	if err != nil {
		return nil, err
	}
	if sh := inst.Share(); sh != nil {
		opts.ProbeShare = sh
	}
	if d := inst.Demand(); d != nil {
		opts.DemandShare = d
	}
	if rl := inst.RateLimits(); rl != nil {
		opts.RateLimitShare = rl
	}
	opts.OverlayStore = inst.Overlay()
	opts.CacheInvalidations = inst.Cache()
	opts.CertStorage = inst.CertStorage()
	return inst, nil
}

// startServer starts the server on c.cfg. In fleet mode, a fleet config
// that does not start on this host falls back to the --config file.
func (c *serveCmd) startServer(ctx context.Context, opts serve.Options, runErr chan error) (*serve.Server, error) {
	srv, err := startServer(ctx, c.cfg, opts, runErr)
	if err != nil && c.fleetMode && c.fleetStatus.Revision > 0 && c.cfgPath != "" {
		// The fleet's config loads but does not start on this host (a
		// certificate file missing here, a port in use): the file is the
		// fallback, and the revision counts as rejected here.
		c.log.Error("fleet: the fleet's config does not start on this instance; starting from the --config file", "revision", c.fleetStatus.Revision, "file", c.cfgPath, "err", err)
		c.fleetStatus.RejectedRevision, c.fleetStatus.RejectedError, c.fleetStatus.Revision = c.fleetStatus.Revision, err.Error(), 0
		if c.cfg, err = config.Load(c.cfgPath); err != nil {
			return nil, fmt.Errorf("fleet: fallback --config %s: %w", c.cfgPath, err)
		}
		srv, err = startServer(ctx, c.cfg, opts, runErr)
	}
	return srv, err
}

// handleSIGHUP reloads the config file on SIGHUP until ctx ends (in
// fleet mode it only logs that SIGHUP does not apply).
func (c *serveCmd) handleSIGHUP(ctx context.Context, srv *serve.Server) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	c.closers = append(c.closers, func() { signal.Stop(hup) })
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if c.fleetMode {
					c.log.Warn("SIGHUP ignored in fleet mode: the config comes from etcd (fix: spillway config push FILE)")
					continue
				}
				if err := srv.ReloadFile(ctx, c.cfgPath); err != nil {
					c.log.Error("SIGHUP: config rejected; the old config keeps serving", "err", err)
				}
			}
		}
	}()
}

// runInstance runs the fleet side of the instance on srv until runServe
// returns, and waits for it then.
func (c *serveCmd) runInstance(ctx context.Context, inst *fleet.Instance, srv *serve.Server) {
	instCtx, stopInst := context.WithCancel(ctx)
	instDone := make(chan struct{})
	c.closers = append(c.closers, func() { stopInst(); <-instDone })
	status := c.fleetStatus
	go func() { defer close(instDone); inst.Run(instCtx, srv, status) }()
}

// runAutoProcs runs --procs auto until ctx ends.
func runAutoProcs(ctx context.Context, log *slog.Logger) {
	procs.Default(runtime.GOMAXPROCS(0)).Run(ctx, 1, time.Now, func() time.Duration {
		d, _ := procs.ProcessCPU()
		return d
	}, procs.Set, func(from, to int, used float64) {
		log.Debug("procs: GOMAXPROCS changed", "from", from, "to", to, "cpus_used", fmt.Sprintf("%.2f", used))
	})
}

// startServer builds a server for cfg and runs it until ctx is done; it
// returns once the server's listeners are bound, or with the error that
// kept it from starting. Run's result arrives on runErr.
func startServer(ctx context.Context, cfg *config.Config, opts serve.Options, runErr chan error) (*serve.Server, error) {
	srv, err := serve.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	go func() { runErr <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
		return srv, nil
	case err := <-runErr:
		if err == nil {
			err = ctx.Err() // stopped before it was ready
		}
		return nil, err
	}
}

// setProcs applies --procs; it reports whether auto mode should run. An
// explicit number sets GOMAXPROCS. auto follows the load (package procs),
// except when the GOMAXPROCS environment variable is set and --procs was
// not given: then Go's own setting stands.
func setProcs(v string, explicit bool, log *slog.Logger) (bool, error) {
	if v == "auto" {
		if _, ok := procs.ProcessCPU(); !ok {
			return false, nil
		}
		if env := os.Getenv("GOMAXPROCS"); env != "" && !explicit {
			log.Info("procs: GOMAXPROCS is set in the environment; --procs auto is off", "GOMAXPROCS", env)
			return false, nil
		}
		return true, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return false, fmt.Errorf("--procs %q: want a number of CPUs (1 or more) or auto", v)
	}
	runtime.GOMAXPROCS(n)
	return false, nil
}

// maxConnections parses --max-connections.
func maxConnections(v string) (int, error) {
	if v == "auto" {
		return connlimit.DefaultMaxConnections(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--max-connections %q: want a number of connections, 0 for no limit, or auto", v)
	}
	return n, nil
}

// adminTokenEnv is the environment variable that holds the admin token
// when --admin-token-file is not given.
const adminTokenEnv = "SPILLWAY_ADMIN_TOKEN"

// adminToken returns the admin API token: the content of file (surrounding
// white space trimmed) when file is given, else $SPILLWAY_ADMIN_TOKEN
// ("" when neither is set).
func adminToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(adminTokenEnv)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--admin-token-file %s is empty (fix: write the token into it, e.g. head -c 32 /dev/urandom | base64 > %s)", file, file)
	}
	return tok, nil
}

const getHealthHelp = `
Usage: spillway get-health [--admin ADDR] [--admin-token-file FILE] [--json | --live]

Print a running instance's health view, like
'gcloud compute backend-services get-health': for each backend service, each
backend (group) with its preference, healthy members, drain state and share of
traffic, and each endpoint's health state and last probe detail. With
spillway.bgp it also shows each BGP session's state and each anycast prefix's
(ANNOUNCED, DEGRADED or WITHDRAWN) with the reason.

When the admin API wants a token, give it with --admin-token-file FILE or the
SPILLWAY_ADMIN_TOKEN environment variable (as for spillway serve).

--live asks only whether the instance is up (GET /healthz, which needs no
token), within 5 s: it prints "ok" and exits 0, or exits 1 saying why. It
is the container image's HEALTHCHECK.
`

func runGetHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("get-health", getHealthHelp, stderr)
	admin := fs.String("admin", "127.0.0.1:9901", "admin `ADDR` of the running spillway serve")
	asJSON := fs.Bool("json", false, "print the raw JSON")
	tokenFile := fs.String("admin-token-file", "", "`FILE` holding the admin API bearer token (default: the SPILLWAY_ADMIN_TOKEN environment variable)")
	live := fs.Bool("live", false, "only check that the instance is up (GET /healthz, no token needed; exit 0 or 1)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *live {
		return checkLive(ctx, *admin, stdout)
	}
	token, err := adminToken(*tokenFile)
	if err != nil {
		return err
	}
	body, err := callAdmin(ctx, *admin, token, http.MethodGet, "/health", nil)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err = stdout.Write(body)
		return err
	}
	var r report.Health
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("admin API answered something that is not a health report: %w", err)
	}
	PrintHealth(stdout, &r)
	return nil
}

// checkLive asks the admin API's /healthz whether the instance is up.
func checkLive(ctx context.Context, admin string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not live: cannot reach the admin API at %s: %w", admin, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not live: the admin API at %s answered %s", admin, resp.Status)
	}
	_, err = fmt.Fprintln(stdout, "ok")
	return err
}

// newLogger returns the process logger: --log-format text or json.
func newLogger(w io.Writer, format string, lvl slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// PrintHealth prints a health report as tables.
func PrintHealth(w io.Writer, r *report.Health) {
	for _, s := range r.Services {
		drain := ""
		if s.AutoDrain {
			drain = ", autoCapacityDrain"
		}
		fmt.Fprintf(w, "backend service %s (%s%s, failover threshold %d%%)\n", s.Name, s.Algorithm, drain, s.Threshold)
		fmt.Fprintf(w, "  %-22s %-14s %-10s %-8s %-14s %6s\n", "BACKEND", "ZONE", "PREFERENCE", "HEALTHY", "STATE", "SHARE")
		for _, b := range s.Backends {
			printBackendRow(w, b.Group, zoneOrRegion(b.Zone, b.Region), b.Preference, b.Healthy, b.Members, b.Drained, b.DrainBlocked, b.Share)
			for _, e := range b.Endpoints {
				extra := []string{}
				if e.Ejected {
					extra = append(extra, "ejected")
				}
				if e.Detail != "" {
					extra = append(extra, e.Detail)
				}
				fmt.Fprintf(w, "      %-22s %-10s %s\n", e.IPAddress, e.HealthState, strings.Join(extra, "; "))
			}
		}
		for _, f := range s.Frontends {
			region := f.ClientRegion
			if region == "" {
				region = "none"
			}
			fmt.Fprintf(w, "  seen from frontend %s (client region %s; measured over %d requests)\n", f.Frontend, region, f.MeasuredRequests)
			fmt.Fprintf(w, "    %-22s %-14s %6s %9s\n", "BACKEND", "ZONE", "SHARE", "MEASURED")
			for _, b := range f.Backends {
				measured := "-"
				if f.MeasuredRequests > 0 {
					measured = fmt.Sprintf("%.1f%%", 100*b.MeasuredShare)
				}
				fmt.Fprintf(w, "    %-22s %-14s %5.1f%% %9s\n", b.Group, splitZone(s, b), 100*b.Share, measured)
			}
		}
		fmt.Fprintln(w)
	}
	if r.Overlay != nil {
		fmt.Fprintln(w, "runtime overlay (spillway ctl list):")
		printOverlay(w, r.Overlay)
	}
	printCertificates(w, r.SslCertificates)
	printRegionalLayers(w, r.RegionalLayers)
	printBGP(w, r.BGP)
}

// printBGP prints the anycast view: each BGP session and each prefix's
// state with its reason.
func printBGP(w io.Writer, b *report.BGP) {
	if b == nil {
		return
	}
	fmt.Fprintf(w, "bgp (local AS %d, router ID %s)\n", b.LocalASN, b.RouterID)
	fmt.Fprintf(w, "  %-28s %-10s %-12s %-22s %5s %10s\n", "NEIGHBOR", "PEER AS", "STATE", "SINCE", "FLAPS", "ADVERTISED")
	for _, s := range b.Sessions {
		since := "-"
		if !s.Since.IsZero() {
			since = s.Since.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "  %-28s %-10d %-12s %-22s %5d %10d\n", s.Neighbor, s.PeerASN, s.State, since, s.Flaps, s.Advertised)
	}
	fmt.Fprintf(w, "  %-28s %-22s %-18s %8s  %s\n", "PREFIX", "STATE", "REASON", "HEALTHY", "DETAIL")
	for _, p := range b.Prefixes {
		state := p.State.String()
		switch {
		case p.ASPathPrepend > 0:
			state += fmt.Sprintf(" (prepend %d)", p.ASPathPrepend)
		case p.MED != nil:
			state += fmt.Sprintf(" (MED %d)", *p.MED)
		}
		fmt.Fprintf(w, "  %-28s %-22s %-18s %7.1f%%  %s\n", p.Prefix, state, p.Reason, p.HealthyPercent, p.Detail)
	}
	if b.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", b.Error)
	}
	fmt.Fprintln(w)
}

// zoneOrRegion is a health view backend's zone, or its region for a
// regional group (serverless and internet NEGs have no zone), as
// simulate and the lab name it.
func zoneOrRegion(zone, region string) string {
	if zone == "" {
		return region
	}
	return zone
}

// splitZone is a frontend split row's zone, or its group's region when
// the group is regional.
func splitZone(s report.Service, b report.SplitShare) string {
	if b.Zone != "" {
		return b.Zone
	}
	for _, sb := range s.Backends {
		if sb.Group == b.Group {
			return sb.Region
		}
	}
	return ""
}

// printCertificates prints the managed certificates' status, per domain.
func printCertificates(w io.Writer, certs []report.SslCertificate) {
	for _, c := range certs {
		if c.Managed == nil {
			continue
		}
		expires := ""
		if c.ExpireTime != "" {
			expires = ", expires " + c.ExpireTime
		}
		fmt.Fprintf(w, "ssl certificate %s (MANAGED, %s%s)\n", c.Name, c.Managed.Status, expires)
		for _, d := range c.Managed.Domains {
			fmt.Fprintf(w, "  %-40s %-20s %s\n", d, c.Managed.DomainStatus[strings.ToLower(d)], c.Managed.Detail[strings.ToLower(d)])
		}
	}
}

// embeddedFlags checks --fleet-embedded and its companions and returns
// this instance's member (nil without --fleet-embedded).
func embeddedFlags(set map[string]bool, ff *fleetFlags, cluster, client, dir, state, instance string) (*embedded.Options, error) {
	if cluster == "" {
		for _, f := range []string{"fleet-embedded-client", "fleet-data", "fleet-embedded-log-level", "fleet-embedded-state"} {
			if set[f] {
				return nil, fmt.Errorf("--%s needs --fleet-embedded (fix: give --fleet-embedded NAME=http://HOST:2380,... to run an etcd member in this instance, or drop --%s)", f, f)
			}
		}
		return nil, nil
	}
	peers, err := embedded.ParseCluster("--fleet-embedded", cluster)
	if err != nil {
		return nil, err
	}
	if instance == "" {
		return nil, fmt.Errorf("--fleet-embedded: this instance needs a name, its member's (fix: give --instance NAME, one of the cluster's)")
	}
	var names []string
	found := false
	for _, p := range peers {
		names = append(names, p.Name)
		found = found || p.Name == instance
	}
	if !found {
		return nil, fmt.Errorf("--fleet-embedded: this instance, --instance %s, is not a member of %s (fix: give --instance one of %s, or add %s=http://HOST:2380 to --fleet-embedded)", instance, cluster, strings.Join(names, ", "), instance)
	}
	cu, err := embedded.ParseURL("--fleet-embedded-client", client)
	if err != nil {
		return nil, err
	}
	if !ff.given() {
		for _, f := range []string{"fleet-ca", "fleet-cert", "fleet-key", "fleet-user", "fleet-password-file"} {
			if set[f] {
				return nil, fmt.Errorf("--%s with --fleet-embedded: the embedded member serves plain HTTP without users (fix: drop --%s, or give --fleet with the etcd endpoints it is for)", f, f)
			}
		}
	}
	if state != "new" && state != "existing" {
		return nil, fmt.Errorf("--fleet-embedded-state %q: want new or existing (fix: new to bootstrap the cluster, existing to join a running one after etcdctl member add)", state)
	}
	if dir == "" {
		dir = embedded.DefaultDir(instance)
	}
	return &embedded.Options{Name: instance, Cluster: peers, ClientURL: cu, Dir: dir, ClusterState: state}, nil
}

// dialable turns a listener's address into one to dial: an unspecified
// host (0.0.0.0, ::) becomes loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
