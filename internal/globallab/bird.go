//go:build linux

package globallab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/spillwaylb/spillway/internal/netlab"
)

// birdPeer is a site router's pair of eBGP sessions to another site's
// (name: that site's key), one over IPv4 and one over IPv6.
type birdPeer struct {
	name          string
	local, addr   string
	local6, addr6 string
	asn           int
	delay         time.Duration
}

// router is one site's BIRD.
type router struct {
	site *Site
	sock string
	proc *netlab.Proc
}

// birdConf is a site router's BIRD 2 config. Its sessions come twice,
// once per address family (IPv4 sessions carry IPv4 routes, IPv6
// sessions IPv6 routes). The LAN and client link are announced to the
// other routers. The edge's anycast prefix is accepted from the edge
// (and nothing else from it) and preferred (local preference 1000). The
// anycast prefix from another site is ranked as BGP ranks routes
// between networks: local preference 900 for every site, then the
// shortest AS path, then the link's one-way delay in ms (MED, compared
// between sites by "med metric on"). That is the lab's stand-in for a
// network that sends traffic to the nearest healthy site and honours a
// degraded site's AS-path prepend (controlled anycast). Other routes
// use BGP's default (shortest AS path). After a session fails BIRD
// waits "error wait time" before it accepts the peer again (default 60
// to 300 s); the lab's is 1 to 2 s, so an edge that comes back is heard
// at once.
var birdConf = template.Must(template.New("bird").Parse(`# {{.Site.City}} ({{.Site.Region}}), written by spillway lab --global
log stderr { info, remote, warning, error, auth, fatal, bug };
router id {{.Site.RouterLAN}};
protocol device { scan time 1; }
protocol direct { ipv4; ipv6; interface "-lo", "*"; }
protocol kernel { ipv4 { export where source = RTS_BGP; }; scan time 2; }
protocol kernel kernel6 { ipv6 { export where source = RTS_BGP; }; scan time 2; }
{{range .Families}}
protocol bgp {{.Edge}} {
	description "the {{$.Site.City}} edge (spillway serve), {{.Net}}";
	local {{.Local}} as {{$.Site.ASN}};
	neighbor {{.Neighbor}} as {{$.EdgeASN}};
	passive on;
	hold time {{$.HoldTime}}; keepalive time 1; connect retry time 1; error wait time 1, 2;
	{{.Net}} {
		import filter { if net ~ [ {{.Anycast}}+ ] then { bgp_local_pref = 1000; accept; } reject; };
		export none;
	};
}
{{range .Peers}}
protocol bgp {{.Name}} {
	local {{.Local}} as {{$.Site.ASN}};
	neighbor {{.Addr}} as {{.ASN}};
	hold time 6; keepalive time 2; connect retry time 1; error wait time 1, 2;
	med metric on;
	{{.Net}} {
		import filter { if net ~ [ {{.Anycast}}+ ] then { bgp_local_pref = 900; bgp_med = {{.DelayMs}}; } accept; };
		export where source ~ [ RTS_BGP, RTS_DEVICE ];
	};
}
{{end}}{{end}}`))

// birdFamily is one address family's sessions in birdConf: the edge's
// and the other sites'.
type birdFamily struct {
	Net, Edge, Local, Neighbor, Anycast string
	Peers                               []birdSession
}

// birdSession is one session to another site's router.
type birdSession struct {
	Name, Local, Addr, Net, Anycast string
	ASN, DelayMs                    int
}

// families returns site i's sessions: protocols edge and site_KEY over
// IPv4, edge6 and site6_KEY over IPv6.
func (t *topology) families(i int) []birdFamily {
	s := t.sites[i]
	v4 := birdFamily{Net: "ipv4", Edge: "edge", Local: s.RouterLAN(), Neighbor: s.EdgeUnicast(), Anycast: AnycastPrefix}
	v6 := birdFamily{Net: "ipv6", Edge: "edge6", Local: s.RouterLAN6(), Neighbor: s.EdgeUnicast6(), Anycast: AnycastPrefix6}
	for _, p := range t.peers[i] {
		ms := int(p.delay / time.Millisecond)
		v4.Peers = append(v4.Peers, birdSession{"site_" + p.name, p.local, p.addr, "ipv4", AnycastPrefix, p.asn, ms})
		v6.Peers = append(v6.Peers, birdSession{"site6_" + p.name, p.local6, p.addr6, "ipv6", AnycastPrefix6, p.asn, ms})
	}
	return []birdFamily{v4, v6}
}

// startRouters writes every router's config and starts BIRD in its
// namespace.
func (t *topology) startRouters(ctx context.Context, holdTime int) ([]*router, error) {
	var rs []*router
	for i, s := range t.sites {
		dir := filepath.Join(t.net.Dir(), "bird-"+s.Key)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		var b bytes.Buffer
		err := birdConf.Execute(&b, map[string]any{"Site": s, "EdgeASN": edgeASN, "Families": t.families(i), "HoldTime": holdTime})
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "bird.conf")
		if err := os.WriteFile(conf, b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		r := &router{site: s, sock: filepath.Join(dir, "bird.ctl")}
		r.proc, err = t.net.Start(s.Router, "bird-"+s.Key, []string{"bird", "-f", "-c", conf, "-s", r.sock, "-P", filepath.Join(dir, "bird.pid")})
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// birdc runs a birdc command against r.
func (r *router) birdc(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "birdc", append([]string{"-s", r.sock}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s (%s): %w: %s", strings.Join(args, " "), r.site.Key, err, out)
	}
	return string(out), nil
}

// protocols returns the state of each BGP session ("Established",
// "Active", ...), by protocol name.
func (r *router) protocols(ctx context.Context) (map[string]string, error) {
	out, err := r.birdc(ctx, "show", "protocols")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "BGP" {
			m[f[0]] = f[len(f)-1]
		}
	}
	return m, nil
}

// bestVia returns the protocol of the best route to addr ("edge",
// "site_euw", ...) or "" when there is none.
func (r *router) bestVia(ctx context.Context, addr string) (string, error) {
	out, err := r.birdc(ctx, "show", "route", "for", addr)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(out) {
		if i := strings.Index(line, "["); i >= 0 && strings.Contains(line, "*") {
			rest := line[i+1:]
			if j := strings.IndexAny(rest, " ]"); j > 0 {
				return rest[:j], nil
			}
		}
	}
	return "", nil
}

// asPath returns the AS path of the route to addr that r learned from
// protocol proto (e.g. "site_use"), or "" when it has none.
func (r *router) asPath(ctx context.Context, addr, proto string) (string, error) {
	out, err := r.birdc(ctx, "show", "route", "for", addr, "protocol", proto, "all")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(out) {
		if _, path, ok := strings.Cut(line, "BGP.as_path:"); ok {
			return strings.TrimSpace(path), nil
		}
	}
	return "", nil
}

// waitRouters waits until every router's sessions to the other routers
// are established and its best route to every other site's LAN, over
// IPv4 and IPv6, is the direct link (shortest AS path).
func waitRouters(ctx context.Context, rs []*router, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, r := range rs {
		for {
			ok, why := routerReady(ctx, r, rs)
			if ok {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("router %s not converged after %s: %s (log: %s)", r.site.Key, limit, why, r.proc.Log)
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

func routerReady(ctx context.Context, r *router, rs []*router) (bool, string) {
	ps, err := r.protocols(ctx)
	if err != nil {
		return false, err.Error()
	}
	for name, st := range ps {
		if strings.HasPrefix(name, "site") && st != "Established" {
			return false, name + " " + st
		}
	}
	for _, o := range rs {
		if o == r {
			continue
		}
		via, err := r.bestVia(ctx, o.site.RouterLAN())
		if err != nil || via != "site_"+o.site.Key {
			return false, fmt.Sprintf("route to %s via %q, not yet the direct link", o.site.LANPrefix(), via)
		}
		via, err = r.bestVia(ctx, o.site.RouterLAN6())
		if err != nil || via != "site6_"+o.site.Key {
			return false, fmt.Sprintf("route to %s via %q, not yet the direct link", o.site.RouterLAN6(), via)
		}
	}
	return true, ""
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
