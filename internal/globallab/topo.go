//go:build linux

package globallab

import (
	"context"
	"fmt"
	"time"

	"github.com/spillwaylb/spillway/internal/netlab"
)

// Addresses of the lab. Every address is a documentation address: RFC
// 5737's three /24s (v4) and RFC 3849's 2001:db8::/32 (v6).
const (
	// AnycastPrefix is announced by every site's edge; AnycastAddr is
	// the service address inside it, bound by every edge.
	AnycastPrefix = "203.0.113.0/24"
	AnycastAddr   = "203.0.113.10"
	// AnycastPrefix6 and AnycastAddr6 are the same over IPv6, announced
	// over the edges' IPv6 sessions.
	AnycastPrefix6 = "2001:db8:ac::/48"
	AnycastAddr6   = "2001:db8:ac::10"
	// edgeASN is every edge instance's AS (one origin AS for the anycast
	// prefix, as in a real anycast network).
	edgeASN = 65001
	// edgePort is the edge frontends' port; regionalPort the regional
	// layer's.
	edgePort     = 80
	regionalPort = 8443
	backendPort  = 18080
	dnsPort      = 53
	// zonesPerSite and instancesPerZone size each region's backends.
	zonesPerSite     = 2
	instancesPerZone = 2
	// clientDelay is the one-way delay between a client and its router
	// (a client near its nearest site).
	clientDelay = 2 * time.Millisecond
)

// Site is one of the lab's three sites: a router peering with the other
// two, an edge instance announcing the anycast prefix to it, a regional
// layer, backends in zones, and a client namespace nearby.
type Site struct {
	Key    string // short name in namespace and device names: use, euw, ane
	Region string // us-east4, europe-west3, asia-northeast1
	City   string // Ashburn, Frankfurt, Tokyo
	// ASN is the router's AS.
	ASN int
	k   int

	// Namespaces.
	Router, Edge, Regional, Backends, Client string
}

// Sites are the lab's sites, in order.
func Sites() []*Site {
	return []*Site{
		{Key: "use", Region: "us-east4", City: "Ashburn", ASN: 65010, k: 0},
		{Key: "euw", Region: "europe-west3", City: "Frankfurt", ASN: 65020, k: 1},
		{Key: "ane", Region: "asia-northeast1", City: "Tokyo", ASN: 65030, k: 2},
	}
}

// wan is a link between two sites' routers: its one-way delay.
type wan struct {
	a, b  int
	delay time.Duration
}

// wans are the inter-site links: about the one-way delays of the real
// paths (Ashburn-Frankfurt 40 ms, Ashburn-Tokyo 70 ms, Frankfurt-Tokyo
// 100 ms), not scaled.
func wans() []wan {
	return []wan{{0, 1, 40 * time.Millisecond}, {0, 2, 70 * time.Millisecond}, {1, 2, 100 * time.Millisecond}}
}

// lan is host h of the site's LAN, 198.51.100.(64k)/26.
func (s *Site) lan(h int) string { return fmt.Sprintf("198.51.100.%d", 64*s.k+h) }

// LANPrefix is the site LAN.
func (s *Site) LANPrefix() string { return fmt.Sprintf("198.51.100.%d/26", 64*s.k) }

// RouterLAN is the router's address on its LAN.
func (s *Site) RouterLAN() string { return s.lan(1) }

// EdgeUnicast is the edge's own (unicast) address.
func (s *Site) EdgeUnicast() string { return s.lan(2) }

// RegionalAddr is the regional layer's address.
func (s *Site) RegionalAddr() string { return s.lan(10) }

// DNSAddr is the GSLB's address (on the Frankfurt LAN only).
func (s *Site) DNSAddr() string { return s.lan(53) }

// BackendAddr is backend i (zone i/instancesPerZone) of the site.
func (s *Site) BackendAddr(i int) string { return s.lan(11 + i) }

// Zone is zone z of the site's region: b, c, ...
func (s *Site) Zone(z int) string { return fmt.Sprintf("%s-%c", s.Region, 'b'+z) }

// ClientNet is the /27 the site's clients live in (what the GSLB's
// locations map to the region); ClientAddr the lab's client in it and
// clientGW its router's end of the client link.
func (s *Site) ClientNet() string  { return fmt.Sprintf("192.0.2.%d/27", 64+32*s.k) }
func (s *Site) ClientAddr() string { return fmt.Sprintf("192.0.2.%d", 64+32*s.k+2) }
func (s *Site) clientGW() string   { return fmt.Sprintf("192.0.2.%d", 64+32*s.k+1) }

// lan6 is host h of the site's IPv6 LAN, 2001:db8:1:k::/64 (the host
// numbers of the IPv4 LAN, written in the last group).
func (s *Site) lan6(h int) string { return fmt.Sprintf("2001:db8:1:%d::%d", s.k, h) }

// RouterLAN6, EdgeUnicast6 and ClientAddr6 are the IPv6 addresses of
// the router on its LAN, the edge and the client; clientGW6 the
// router's end of the client link (2001:db8:c:k::/64).
func (s *Site) RouterLAN6() string   { return s.lan6(1) }
func (s *Site) EdgeUnicast6() string { return s.lan6(2) }
func (s *Site) ClientAddr6() string  { return fmt.Sprintf("2001:db8:c:%d::2", s.k) }
func (s *Site) clientGW6() string    { return fmt.Sprintf("2001:db8:c:%d::1", s.k) }

// wanAddr6 is the IPv6 twin of wanAddr: 2001:db8:f:j::1 or ::2 (/64).
func wanAddr6(j int, lower bool) string {
	if lower {
		return fmt.Sprintf("2001:db8:f:%d::1", j)
	}
	return fmt.Sprintf("2001:db8:f:%d::2", j)
}

// wanAddr is site s's address on WAN link j (192.0.2.4j/30; the lower
// site index gets .1).
func wanAddr(j int, lower bool) string {
	if lower {
		return fmt.Sprintf("192.0.2.%d", 4*j+1)
	}
	return fmt.Sprintf("192.0.2.%d", 4*j+2)
}

// topology is the built network.
type topology struct {
	net   *netlab.Net
	sites []*Site
	// dns is the GSLB's namespace (on the Frankfurt LAN).
	dns string
	// peers[k] are site k's BGP peers.
	peers [][]birdPeer
	links []*netlab.Link
}

// build makes every namespace and link of the lab.
func build(ctx context.Context, n *netlab.Net) (*topology, error) {
	t := &topology{net: n, sites: Sites()}
	t.peers = make([][]birdPeer, len(t.sites))
	for _, s := range t.sites {
		if err := t.buildSite(ctx, s); err != nil {
			return nil, err
		}
	}
	dns, err := t.hang(ctx, t.sites[1], "dns", t.sites[1].DNSAddr())
	if err != nil {
		return nil, err
	}
	t.dns = dns
	for j, w := range wans() {
		a, b := t.sites[w.a], t.sites[w.b]
		l, err := n.DelayLink(ctx, a.Router, "wan-"+b.Key, wanAddr(j, true)+"/30", b.Router, "wan-"+a.Key, wanAddr(j, false)+"/30", w.delay)
		if err != nil {
			return nil, err
		}
		t.links = append(t.links, l)
		if err := n.Addr(ctx, a.Router, "wan-"+b.Key, wanAddr6(j, true)+"/64"); err != nil {
			return nil, err
		}
		if err := n.Addr(ctx, b.Router, "wan-"+a.Key, wanAddr6(j, false)+"/64"); err != nil {
			return nil, err
		}
		t.peers[w.a] = append(t.peers[w.a], birdPeer{name: b.Key, local: wanAddr(j, true), addr: wanAddr(j, false),
			local6: wanAddr6(j, true), addr6: wanAddr6(j, false), asn: b.ASN, delay: w.delay})
		t.peers[w.b] = append(t.peers[w.b], birdPeer{name: a.Key, local: wanAddr(j, false), addr: wanAddr(j, true),
			local6: wanAddr6(j, false), addr6: wanAddr6(j, true), asn: a.ASN, delay: w.delay})
	}
	return t, nil
}

// buildSite makes a site's router (a bridge for its LAN), its edge,
// regional and backend namespaces on the LAN, and its client behind a
// delayed link.
func (t *topology) buildSite(ctx context.Context, s *Site) error {
	n := t.net
	var err error
	if s.Router, err = n.AddNS(ctx, "rt-"+s.Key); err != nil {
		return err
	}
	for _, key := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
		if err := n.Sysctl(ctx, s.Router, key, "1"); err != nil {
			return err
		}
	}
	if err := n.Bridge(ctx, s.Router, "lan"); err != nil {
		return err
	}
	for _, a := range []string{s.RouterLAN() + "/26", s.RouterLAN6() + "/64"} {
		if err := n.Addr(ctx, s.Router, "lan", a); err != nil {
			return err
		}
	}
	if s.Edge, err = t.hang(ctx, s, "edge", s.EdgeUnicast()); err != nil {
		return err
	}
	for _, a := range []struct{ dev, cidr string }{{"lo", AnycastAddr + "/32"}, {"lo", AnycastAddr6 + "/128"}, {"eth0", s.EdgeUnicast6() + "/64"}} {
		if err := n.Addr(ctx, s.Edge, a.dev, a.cidr); err != nil {
			return err
		}
	}
	if _, err := n.IP(ctx, s.Edge, "route", "add", "default", "via", s.RouterLAN6()); err != nil {
		return err
	}
	if s.Regional, err = t.hang(ctx, s, "reg", s.RegionalAddr()); err != nil {
		return err
	}
	if s.Backends, err = t.hang(ctx, s, "be", s.BackendAddr(0)); err != nil {
		return err
	}
	for i := 1; i < zonesPerSite*instancesPerZone; i++ {
		if err := n.Addr(ctx, s.Backends, "eth0", s.BackendAddr(i)+"/26"); err != nil {
			return err
		}
	}
	if s.Client, err = n.AddNS(ctx, "cl-"+s.Key); err != nil {
		return err
	}
	l, err := n.DelayLink(ctx, s.Router, "cl", s.clientGW()+"/30", s.Client, "eth0", s.ClientAddr()+"/30", clientDelay)
	if err != nil {
		return err
	}
	t.links = append(t.links, l)
	if err := n.Addr(ctx, s.Router, "cl", s.clientGW6()+"/64"); err != nil {
		return err
	}
	if err := n.Addr(ctx, s.Client, "eth0", s.ClientAddr6()+"/64"); err != nil {
		return err
	}
	for _, gw := range []string{s.clientGW(), s.clientGW6()} {
		if _, err := n.IP(ctx, s.Client, "route", "add", "default", "via", gw); err != nil {
			return err
		}
	}
	return nil
}

// hang makes namespace role-KEY with eth0 (addr/26) on site s's LAN
// bridge and a default route through the router, and returns its name.
func (t *topology) hang(ctx context.Context, s *Site, role, addr string) (string, error) {
	n := t.net
	ns, err := n.AddNS(ctx, role+"-"+s.Key)
	if err != nil {
		return "", err
	}
	if err := n.Veth(ctx, s.Router, role, ns, "eth0"); err != nil {
		return "", err
	}
	if err := n.Attach(ctx, s.Router, role, "lan"); err != nil {
		return "", err
	}
	if err := n.Addr(ctx, ns, "eth0", addr+"/26"); err != nil {
		return "", err
	}
	_, err = n.IP(ctx, ns, "route", "add", "default", "via", s.RouterLAN())
	return ns, err
}

// siteDown takes every server link of site s down from the servers' side
// (edge, regional, backends): a power loss, which the router sees only
// when its BGP hold timer expires. siteUp brings them back.
func (t *topology) setSite(ctx context.Context, s *Site, up bool) error {
	for _, ns := range []string{s.Edge, s.Regional, s.Backends} {
		if err := t.net.Link(ctx, ns, "eth0", up); err != nil {
			return err
		}
	}
	if !up {
		return nil
	}
	// The default routes left with the link, and the edge's IPv6
	// address too (IPv6 drops its addresses on link down).
	if _, err := t.net.IP(ctx, s.Edge, "addr", "replace", s.EdgeUnicast6()+"/64", "dev", "eth0", "nodad"); err != nil {
		return err
	}
	if _, err := t.net.IP(ctx, s.Edge, "route", "replace", "default", "via", s.RouterLAN6()); err != nil {
		return err
	}
	for _, ns := range []string{s.Edge, s.Regional, s.Backends} {
		if _, err := t.net.IP(ctx, ns, "route", "replace", "default", "via", s.RouterLAN()); err != nil {
			return err
		}
	}
	return nil
}
