//go:build linux

package globallab

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/lab"
	"github.com/spillwaylb/spillway/internal/netlab"
	"github.com/spillwaylb/spillway/internal/plan"
)

// Prefix names every namespace the lab makes (and finds again after a
// crash).
const Prefix = "spw-"

// Defaults of Options.
const (
	DefaultRate     = 150 // seed 001's 4,500 rps of European clients / 30
	DefaultSiteRate = 10  // per client geography, during the timelines
)

// Options configure a run.
type Options struct {
	// Exe is the spillway binary run inside the namespaces (`Exe serve
	// ...`); default: this process's executable.
	Exe string
	// Rate is the European clients' rate in the waterfall row (default
	// 150 rps against 100 rps of European capacity).
	Rate float64
	// SiteRate is each client geography's rate during the timelines
	// (default 10 rps, a new connection per request).
	SiteRate float64
	// Progress receives a line per step (nil: none).
	Progress io.Writer
}

func (o *Options) defaults() error {
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("globallab: the spillway binary: %w", err)
		}
		o.Exe = exe
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.SiteRate <= 0 {
		o.SiteRate = DefaultSiteRate
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// run is one lab run's state.
type run struct {
	o        Options
	net      *netlab.Net
	topo     *topology
	routers  []*router
	backends *lab.Backends
	clients  []*client
	edges    []*netlab.Proc
	regions  []*netlab.Proc
	dns      *netlab.Proc
	// common is the backends' plan (every site's zones).
	common *plan.Plan
	start  time.Time
	rep    *Report
}

// Run builds the lab, measures every row and removes the lab. It stops
// at the first step that fails and returns the rows measured so far with
// the error.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	n, err := netlab.New(ctx, Prefix)
	if err != nil {
		return nil, err
	}
	r := &run{o: o, net: n, start: time.Now(), rep: &Report{}}
	defer func() {
		r.close()
		if cerr := n.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("globallab: clean-up: %w", cerr)
		}
		r.rep.Elapsed = time.Since(r.start)
		r.rep.ElapsedSeconds = r.rep.Elapsed.Seconds()
	}()
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"building the network", r.setup},
		{"(a) nearest site", r.nearest},
		{"(d) GSLB", r.gslb},
		{"(b) waterfall through both layers", r.waterfall},
		{"(b) the second hop's cost", r.cost},
		{"(c) a site dies and comes back", r.siteKill},
		{"(c) a site loses its backends", r.backendsLost},
	}
	for _, s := range steps {
		t := time.Now()
		r.progress("%s...", s.name)
		if err := s.fn(ctx); err != nil {
			r.progress(" failed\n")
			return r.rep, fmt.Errorf("globallab: %s: %w", s.name, err)
		}
		r.progress(" %.1fs\n", time.Since(t).Seconds())
	}
	return r.rep, nil
}

func (r *run) progress(format string, args ...any) { fmt.Fprintf(r.o.Progress, format, args...) }

func (r *run) close() {
	for _, c := range r.clients {
		c.close()
	}
	if r.backends != nil {
		r.backends.Close()
	}
}

// setup builds the network, starts the routers, the backends, the
// regional layers, the edges and the GSLB, and waits until every edge's
// prefix is announced and every client reaches an edge.
func (r *run) setup(ctx context.Context) error {
	topo, err := build(ctx, r.net)
	if err != nil {
		return err
	}
	r.topo = topo
	if r.routers, err = topo.startRouters(ctx, edgeHoldTime); err != nil {
		return err
	}
	if err := r.startBackends(ctx); err != nil {
		return err
	}
	for _, s := range topo.sites {
		r.clients = append(r.clients, newClient(s))
		p, err := r.startServe(ctx, s, "regional")
		if err != nil {
			return err
		}
		r.regions = append(r.regions, p)
		if p, err = r.startServe(ctx, s, "edge"); err != nil {
			return err
		}
		r.edges = append(r.edges, p)
	}
	if r.dns, err = r.startDNS(ctx); err != nil {
		return err
	}
	if err := waitRouters(ctx, r.routers, 30*time.Second); err != nil {
		return err
	}
	for i := range topo.sites {
		if err := r.waitAnnounced(ctx, i, true, 30*time.Second); err != nil {
			return err
		}
		if _, err := r.waitRouteFor(ctx, i, AnycastAddr6, func(via string) bool { return via == "edge6" }, 30*time.Second); err != nil {
			return fmt.Errorf("the %s edge's IPv6 prefix not announced: %w (edge log: %s)", topo.sites[i].City, err, tail(r.edges[i].Log))
		}
	}
	return r.waitServing(ctx, 30*time.Second)
}

// startBackends starts every site's backends, each listening inside its
// site's backend namespace.
func (r *run) startBackends(ctx context.Context) error {
	data, err := render(backendsTmpl, r.topo.sites, nil, "Backend", variant{})
	if err != nil {
		return err
	}
	cfg, err := config.Parse(data, "backends")
	if err != nil {
		return err
	}
	if r.common, err = plan.Compile(cfg); err != nil {
		return err
	}
	nsOf := map[string]string{}
	for _, s := range r.topo.sites {
		for i := range zonesPerSite * instancesPerZone {
			nsOf[s.BackendAddr(i)] = s.Backends
		}
	}
	listen := func(ctx context.Context, addr string) (net.Listener, error) {
		host, _, _ := net.SplitHostPort(addr)
		ns, ok := nsOf[host]
		if !ok {
			return nil, fmt.Errorf("no site has backend %s", addr)
		}
		return netlab.Listen(ctx, ns, "tcp", addr)
	}
	r.backends, err = lab.StartBackendsWith(ctx, r.common, listen)
	return err
}

// writeConfig renders site s's config for role (edge, edge-floor,
// edge-degraded, regional) into the lab directory and returns its path.
func (r *run) writeConfig(s *Site, role string) (string, error) {
	var data []byte
	var err error
	switch role {
	case "edge":
		data, err = render(edgeTmpl, r.topo.sites, s, "Edge", variant{})
	case "edge-floor":
		data, err = render(edgeTmpl, r.topo.sites, s, "Edge", variant{floor: withdrawFloor})
	case "edge-degraded":
		data, err = render(edgeTmpl, r.topo.sites, s, "Edge", variant{degraded: degradedBelow})
	case "regional":
		data, err = render(regionalTmpl, r.topo.sites, s, "Regional", variant{})
	default:
		data, err = render(dnsTmpl, r.topo.sites, nil, "", variant{})
	}
	if err != nil {
		return "", err
	}
	path := filepath.Join(r.net.Dir(), role+"-"+s.Key+".yaml")
	if strings.HasPrefix(role, "edge-") { // the edge's own file, reloaded
		path = filepath.Join(r.net.Dir(), "edge-"+s.Key+".yaml")
	}
	return path, os.WriteFile(path, data, 0o644)
}

// startServe starts `spillway serve` as site s's edge or regional layer,
// in its namespace.
func (r *run) startServe(ctx context.Context, s *Site, role string) (*netlab.Proc, error) {
	path, err := r.writeConfig(s, role)
	if err != nil {
		return nil, err
	}
	ns := s.Edge
	if role == "regional" {
		ns = s.Regional
	}
	name := role + "-" + s.Key
	return r.net.Start(ns, name, []string{r.o.Exe, "serve", "--config", path, "--instance", name, "--watch", "0", "--log-level", "warn"})
}

// startDNS starts the GSLB on the Frankfurt LAN.
func (r *run) startDNS(ctx context.Context) (*netlab.Proc, error) {
	path, err := r.writeConfig(&Site{Key: "gslb"}, "dns")
	if err != nil {
		return nil, err
	}
	return r.net.Start(r.topo.dns, "gslb", []string{r.o.Exe, "serve", "--config", path, "--instance", "gslb", "--watch", "0", "--log-level", "warn"})
}

// waitAnnounced waits until site i's router has (announced) or has not
// the anycast prefix from its edge as its best route, and returns when.
func (r *run) waitAnnounced(ctx context.Context, i int, announced bool, limit time.Duration) error {
	_, err := r.waitRoute(ctx, i, func(via string) bool { return (via == "edge") == announced }, limit)
	if err != nil {
		state := "announced"
		if !announced {
			state = "withdrawn"
		}
		return fmt.Errorf("the %s edge's prefix not %s after %s: %w (edge log: %s)", r.topo.sites[i].City, state, limit, err, tail(r.edges[i].Log))
	}
	return nil
}

// waitRoute polls site i's router until ok(best route's protocol for the
// anycast address) and returns the time it saw it.
func (r *run) waitRoute(ctx context.Context, i int, ok func(via string) bool, limit time.Duration) (time.Time, error) {
	return r.waitRouteFor(ctx, i, AnycastAddr, ok, limit)
}

// waitRouteFor is waitRoute for any address.
func (r *run) waitRouteFor(ctx context.Context, i int, addr string, ok func(via string) bool, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		via, err := r.routers[i].bestVia(ctx, addr)
		if err == nil && ok(via) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("best route via %q", via)
			}
			return time.Time{}, err
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
}

// waitServing waits until every client gets a backend's answer through
// the anycast address and the GSLB answers.
func (r *run) waitServing(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, c := range r.clients {
		for {
			a := get(ctx, c.fresh, anycastURL())
			if a.OK() {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s client: no answer through %s after %s: status %d, %v (edge log: %s)", c.site.City, anycastURL(), limit, a.Status, a.Err, tail(r.edges[c.site.k].Log))
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	for {
		_, err := r.clients[1].query(ctx, r.topo.sites[1].DNSAddr(), GSLBName, "")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the GSLB does not answer: %w (log: %s)", err, tail(r.dns.Log))
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func anycastURL() string { return fmt.Sprintf("http://%s:%d/", AnycastAddr, edgePort) }

func anycastURL6() string {
	return fmt.Sprintf("http://%s/", net.JoinHostPort(AnycastAddr6, strconv.Itoa(edgePort)))
}

// tail returns the last lines of a log file, for errors.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return path + ": " + err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return path + ":\n  " + strings.Join(lines, "\n  ")
}

// kill crashes site i: its servers' links go down first (so nothing they
// send on dying reaches the router: a power loss), then the edge and
// regional processes get SIGKILL and the backends close.
func (r *run) killSite(ctx context.Context, i int) error {
	s := r.topo.sites[i]
	if err := r.topo.setSite(ctx, s, false); err != nil {
		return err
	}
	r.edges[i].Kill()
	r.regions[i].Kill()
	for z := range zonesPerSite {
		if err := r.backends.StopListeners(s.Zone(z)); err != nil {
			return err
		}
	}
	return nil
}

// restoreSite powers site i back on: links up, backends, regional layer
// and edge started again.
func (r *run) restoreSite(ctx context.Context, i int) error {
	s := r.topo.sites[i]
	if err := r.topo.setSite(ctx, s, true); err != nil {
		return err
	}
	for z := range zonesPerSite {
		if err := r.backends.Recover(ctx, s.Zone(z)); err != nil {
			return err
		}
	}
	var err error
	if r.regions[i], err = r.startServe(ctx, s, "regional"); err != nil {
		return err
	}
	r.edges[i], err = r.startServe(ctx, s, "edge")
	return err
}

// reload makes site i's edge read its config file again (SIGHUP).
func (r *run) reload(i int) error {
	if err := syscall.Kill(r.edges[i].PID(), syscall.SIGHUP); err != nil {
		return fmt.Errorf("reloading the %s edge: %w", r.topo.sites[i].City, err)
	}
	return nil
}
