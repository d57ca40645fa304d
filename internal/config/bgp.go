package config

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// BGP is spillway.bgp: the BGP speaker that announces the frontends'
// anycastPrefixes to upstream routers while this instance can serve them,
// and withdraws them when it cannot (docs/extensions.md, docs/global.md).
// Google Cloud announces its load balancers' anycast addresses itself;
// there is no Google field for any of this.
type BGP struct {
	// LocalASN is this instance's autonomous system number (required):
	// 1 to 4294967294, except AS_TRANS (23456) and 65535.
	LocalASN int64 `json:"localAsn"`
	// RouterID is the BGP identifier, an IPv4 address (required).
	RouterID string `json:"routerId"`
	// ListenPort is the TCP port the speaker accepts sessions on; -1 (the
	// default) does not listen and only dials out to the neighbors.
	ListenPort *int `json:"listenPort,omitempty"`
	// Neighbors are the routers to announce to (at least one).
	Neighbors []BGPNeighbor `json:"neighbors"`
	// MinHealthyCapacityPercent: a frontend's prefixes are announced only
	// while at least this share of its reachable capacity is healthy
	// (0-100). Default: any healthy endpoint.
	MinHealthyCapacityPercent *float64 `json:"minHealthyCapacityPercent,omitempty"`
	// Degraded, when set, announces a prefix with a longer AS path or a
	// MED while the healthy share is below its threshold (controlled
	// anycast: attract less without disappearing).
	Degraded *BGPDegraded `json:"degraded,omitempty"`
	// HoldDownSec is the hysteresis: a withdrawn or degraded prefix
	// returns only after it has been healthy this long. Default 30.
	HoldDownSec *int `json:"holdDownSec,omitempty"`
	// DrainSec is the lame duck on shutdown: the prefixes are withdrawn,
	// the instance serves on for this long, then closes its listeners
	// and connections. Default 10.
	DrainSec *int `json:"drainSec,omitempty"`
	// MaxStaleSec, in fleet mode, withdraws the prefixes once the
	// instance has lost etcd for this long. 0 (the default): never;
	// static stability keeps announcing (docs/extensions.md).
	MaxStaleSec *int `json:"maxStaleSec,omitempty"`
}

// BGPNeighbor is spillway.bgp.neighbors[]: one upstream router.
type BGPNeighbor struct {
	// Address is the router's IP address (required). An IPv4 neighbor
	// carries the IPv4 prefixes, an IPv6 neighbor the IPv6 ones.
	Address string `json:"address"`
	// PeerASN is the router's autonomous system number (required).
	PeerASN int64 `json:"peerAsn"`
	// Port is the router's BGP port (default 179).
	Port int `json:"port,omitempty"`
	// HoldTimeSec is the proposed hold time: 0 (no keepalives) or 3 to
	// 65535; default 90. Keepalives go every third of it.
	HoldTimeSec *int `json:"holdTimeSec,omitempty"`
	// PasswordFile holds the session's TCP MD5 password (RFC 2385),
	// read at start and on every reload (surrounding white space
	// trimmed). Optional.
	PasswordFile string `json:"passwordFile,omitempty"`
	// LocalAddress is the source address of the session (optional).
	LocalAddress string `json:"localAddress,omitempty"`
}

// BGPDegraded is spillway.bgp.degraded: how a prefix is announced while
// its frontend is short of healthy capacity.
type BGPDegraded struct {
	// BelowHealthyCapacityPercent is the threshold: below it (and at or
	// above minHealthyCapacityPercent) the prefix is DEGRADED.
	BelowHealthyCapacityPercent float64 `json:"belowHealthyCapacityPercent"`
	// ASPathPrepend repeats the local ASN this many more times (1-16).
	ASPathPrepend int `json:"asPathPrepend,omitempty"`
	// MED is the MULTI_EXIT_DISC sent instead (0-4294967295).
	MED *int64 `json:"med,omitempty"`
}

// BGP defaults.
const (
	DefaultBGPHoldDown  = 30 * time.Second
	DefaultBGPDrain     = 10 * time.Second
	DefaultBGPPort      = 179
	DefaultBGPHoldTime  = 90
	DefaultBGPListening = -1
)

// Listen returns the port the speaker listens on, -1 for none.
func (b *BGP) Listen() int { return intOr(b.ListenPort, DefaultBGPListening) }

// HoldDown returns holdDownSec as a duration.
func (b *BGP) HoldDown() time.Duration {
	return secondsOr(b.HoldDownSec, DefaultBGPHoldDown)
}

// Drain returns drainSec as a duration.
func (b *BGP) Drain() time.Duration { return secondsOr(b.DrainSec, DefaultBGPDrain) }

// MaxStale returns maxStaleSec as a duration, 0 for no limit.
func (b *BGP) MaxStale() time.Duration { return secondsOr(b.MaxStaleSec, 0) }

// MinHealthyPercent returns minHealthyCapacityPercent (0 when unset).
func (b *BGP) MinHealthyPercent() float64 {
	if b.MinHealthyCapacityPercent == nil {
		return 0
	}
	return *b.MinHealthyCapacityPercent
}

// RemotePort returns the neighbor's port (default 179).
func (n BGPNeighbor) RemotePort() int {
	if n.Port == 0 {
		return DefaultBGPPort
	}
	return n.Port
}

// HoldTime returns the neighbor's hold time in seconds (default 90).
func (n BGPNeighbor) HoldTime() int { return intOr(n.HoldTimeSec, DefaultBGPHoldTime) }

// Prefixes parses a frontend's anycastPrefixes; ones that do not parse
// are left out (Validate reports them).
func (f *Frontend) Prefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range f.AnycastPrefixes {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func secondsOr(p *int, def time.Duration) time.Duration {
	if p == nil {
		return def
	}
	return time.Duration(*p) * time.Second
}

// asn checks an autonomous system number.
func (v *validator) asn(path string, n int64) {
	switch {
	case n == 0:
		v.add(path, "give the autonomous system number, e.g. 65001 (private: 64512-65534 or 4200000000-4294967294)", "an AS number is required")
	case n < 0 || n > 4294967294:
		v.add(path, "use an AS number between 1 and 4294967294", "%d is out of range", n)
	case n == 23456 || n == 65535:
		v.add(path, "use another AS number, e.g. a private one (64512-65534)", "%d is reserved (RFC 6793, RFC 7300)", n)
	}
}

// bgp validates spillway.bgp and the frontends' anycastPrefixes.
func (v *validator) bgp() {
	var b *BGP
	if v.c.Spillway != nil {
		b = v.c.Spillway.BGP
	}
	v.anycastPrefixes(b)
	if b == nil {
		return
	}
	const p = "spillway.bgp"
	v.asn(p+".localAsn", b.LocalASN)
	if id, err := netip.ParseAddr(b.RouterID); b.RouterID == "" {
		v.add(p+".routerId", "give an IPv4 address, e.g. the instance's own, 192.0.2.1", "a router ID is required")
	} else if err != nil || !id.Is4() || id.IsUnspecified() {
		v.add(p+".routerId", "write an IPv4 address other than 0.0.0.0, e.g. 192.0.2.1 (a BGP identifier is 32 bits, also on IPv6-only routers)", "%q is not an IPv4 address", b.RouterID)
	}
	if l := b.ListenPort; l != nil && *l != -1 && (*l < 1 || *l > 65535) {
		v.add(p+".listenPort", "use -1 (do not listen, only dial out) or a port between 1 and 65535", "%d is out of range", *l)
	}
	v.floatRange(p+".minHealthyCapacityPercent", b.MinHealthyCapacityPercent, 0, 100)
	v.intRange(p+".holdDownSec", b.HoldDownSec, 0, 3600)
	v.intRange(p+".drainSec", b.DrainSec, 0, 300)
	v.intRange(p+".maxStaleSec", b.MaxStaleSec, 0, 604800)
	v.bgpDegraded(b)
	if len(b.Neighbors) == 0 {
		v.add(p+".neighbors", "list the routers to announce to, e.g. neighbors: [{address: 192.0.2.254, peerAsn: 65000}]", "at least one neighbor is required")
	}
	seen := map[netip.Addr]int{}
	for i := range b.Neighbors {
		np := at("%s.neighbors[%d]", p, i)
		if a, ok := v.bgpNeighbor(np, &b.Neighbors[i]); ok {
			if first, dup := seen[a]; dup {
				v.add(np+".address", "list each router once", "%s is already neighbors[%d]", a, first)
			} else {
				seen[a] = i
			}
		}
	}
}

// bgpNeighbor validates one neighbor and returns its address.
func (v *validator) bgpNeighbor(np string, n *BGPNeighbor) (netip.Addr, bool) {
	v.asn(np+".peerAsn", n.PeerASN)
	if n.Port != 0 {
		v.port(np+".port", n.Port)
	}
	if h := n.HoldTimeSec; h != nil && *h != 0 && (*h < 3 || *h > 65535) {
		v.add(np+".holdTimeSec", "use 0 (no keepalives) or 3 to 65535 seconds (RFC 4271 §4.2)", "%d is out of range", *h)
	}
	if strings.ContainsRune(n.PasswordFile, 0) {
		v.add(np+".passwordFile", "write the path of a file holding the TCP MD5 password", "%q is not a file path", n.PasswordFile)
	}
	a, err := netip.ParseAddr(n.Address)
	if n.Address == "" {
		v.add(np+".address", "give the router's IP address, e.g. 192.0.2.254", "an address is required")
		return a, false
	}
	if err != nil || a.Zone() != "" {
		v.add(np+".address", "write an IPv4 or IPv6 address, e.g. 192.0.2.254 or 2001:db8::1", "%q is not an IP address", n.Address)
		return a, false
	}
	if n.LocalAddress != "" {
		la, err := netip.ParseAddr(n.LocalAddress)
		switch {
		case err != nil:
			v.add(np+".localAddress", "write one of this host's IP addresses, or leave it out", "%q is not an IP address", n.LocalAddress)
		case la.Is4() != a.Is4():
			v.add(np+".localAddress", "use an address of the neighbor's family", "%s and the neighbor %s are of different families", la, a)
		}
	}
	return a, true
}

// bgpDegraded validates spillway.bgp.degraded.
func (v *validator) bgpDegraded(b *BGP) {
	d := b.Degraded
	if d == nil {
		return
	}
	const p = "spillway.bgp.degraded"
	below := d.BelowHealthyCapacityPercent
	switch {
	case below <= 0 || below > 100:
		v.add(p+".belowHealthyCapacityPercent", "use a percentage above 0 and at most 100, e.g. 50", "%s is out of range", fmtFloat(below))
	case below <= b.MinHealthyPercent():
		v.add(p+".belowHealthyCapacityPercent", "make it greater than spillway.bgp.minHealthyCapacityPercent, or the prefix is never degraded", "%s is not above minHealthyCapacityPercent (%s)", fmtFloat(below), fmtFloat(b.MinHealthyPercent()))
	}
	v.exactlyOne(p, "way to announce a degraded prefix", []string{"asPathPrepend", "med"}, d.ASPathPrepend != 0, d.MED != nil)
	if d.ASPathPrepend != 0 {
		v.inRange(p+".asPathPrepend", int64(d.ASPathPrepend), 1, 16)
	}
	if d.MED != nil {
		v.inRange(p+".med", *d.MED, 0, 4294967295)
	}
}

// anycastPrefixes validates frontends[].anycastPrefixes against b.
func (v *validator) anycastPrefixes(b *BGP) {
	for i := range v.c.Frontends {
		f := &v.c.Frontends[i]
		if len(f.AnycastPrefixes) == 0 {
			continue
		}
		fp := at("frontends[%d].anycastPrefixes", i)
		if b == nil {
			v.add(fp, "add spillway.bgp (localAsn, routerId, neighbors) to announce them, or remove anycastPrefixes", "anycast prefixes need spillway.bgp")
		}
		seen := map[netip.Prefix]int{}
		for j, s := range f.AnycastPrefixes {
			pp := at("%s[%d]", fp, j)
			pfx, err := netip.ParsePrefix(s)
			switch {
			case err != nil:
				v.add(pp, "write an IPv4 or IPv6 prefix, e.g. 203.0.113.0/24 or 2001:db8:1::/48", "%q is not a prefix", s)
				continue
			case pfx != pfx.Masked():
				v.add(pp, "write the prefix without host bits: "+pfx.Masked().String(), "%s has host bits set", s)
				continue
			}
			if first, dup := seen[pfx]; dup {
				v.add(pp, "list each prefix once", "%s is already anycastPrefixes[%d]", pfx, first)
			}
			seen[pfx] = j
		}
	}
}

// frontendIP returns a frontend address's IP when it names one that is
// not the unspecified address (0.0.0.0, ::, or no host).
func frontendIP(address string) (netip.Addr, bool) {
	i := strings.LastIndexByte(address, ':')
	if i < 0 {
		return netip.Addr{}, false
	}
	host := strings.TrimSuffix(strings.TrimPrefix(address[:i], "["), "]")
	a, err := netip.ParseAddr(host)
	if err != nil || a.IsUnspecified() {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// bgpWarnings: prefixes of a family that no neighbor carries, and
// prefixes that do not hold the address their frontend is bound to (a
// warning, not an error: the host may forward the prefix's traffic to
// the listener itself, e.g. with NAT).
func (c *Config) bgpWarnings() []string {
	if c.Spillway == nil || c.Spillway.BGP == nil {
		return nil
	}
	has := map[bool]bool{}
	for _, n := range c.Spillway.BGP.Neighbors {
		if a, err := netip.ParseAddr(n.Address); err == nil {
			has[a.Is4()] = true
		}
	}
	var w []string
	for i := range c.Frontends {
		addr, specific := frontendIP(c.Frontends[i].Address)
		for j, p := range c.Frontends[i].Prefixes() {
			if specific && p.Addr().Is4() == addr.Is4() && !p.Contains(addr) {
				w = append(w, fmt.Sprintf("frontends[%d].anycastPrefixes[%d]: %s does not contain the frontend's address %s: routers will send it traffic for addresses it does not listen on, unless this host forwards them to it; bind the frontend to an address in the prefix, or to 0.0.0.0 / [::]", i, j, p, addr))
			}
			if !has[p.Addr().Is4()] {
				fam := map[bool]string{true: "IPv4", false: "IPv6"}[p.Addr().Is4()]
				w = append(w, fmt.Sprintf("frontends[%d].anycastPrefixes[%d]: %s is announced to no neighbor: %s prefixes go over %s sessions; add the router's %s address to spillway.bgp.neighbors", i, j, p, fam, fam, fam))
			}
		}
	}
	return w
}

// String names the neighbor as address:port (for logs, get-health and
// metrics).
func (n BGPNeighbor) String() string {
	a, err := netip.ParseAddr(n.Address)
	if err != nil {
		return n.Address
	}
	return netip.AddrPortFrom(a, uint16(n.RemotePort())).String()
}
