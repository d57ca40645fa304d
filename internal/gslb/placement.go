package gslb

import (
	"net/netip"
	"strings"
)

// Placement is how a GEO or LATENCY name places one client address.
type Placement struct {
	// Places reports whether the name places clients at all (GEO and
	// LATENCY); WEIGHTED and FAILOVER answers do not depend on the client.
	Places bool `json:"places"`
	// Matched reports whether a locations[] entry (or the geoDatabase)
	// placed the address; when it is false the name answers as WEIGHTED
	// over all members.
	Matched bool `json:"matched"`
	// Entry is what placed it: "cidr 203.0.113.0/24", or "geoDatabase".
	Entry string `json:"entry,omitempty"`
	// Region is the client region the entry names (the member regions
	// are tried nearest first from it).
	Region string `json:"region,omitempty"`
}

// Placement returns how GSLB name `name` (any case, with or without
// the trailing dot) places a client at addr: the address of an EDNS
// Client Subnet, or without one the resolver's own source address, as
// the query path does. An unknown name gives the zero Placement.
func (s *Server) Placement(name string, addr netip.Addr) Placement {
	owner := strings.ToLower(strings.TrimSuffix(name, ".")) + "."
	for _, n := range s.names {
		if n.owner != owner {
			continue
		}
		if !n.placesClients() {
			return Placement{}
		}
		pl := Placement{Places: true}
		if pfx, ladder, ok := n.table.match(addr); ok {
			pl.Matched, pl.Entry, pl.Region = true, "cidr "+pfx.String(), n.ladderRegion(ladder)
		} else if n.geo != nil && addr.IsValid() {
			if ladder, _ := n.geoLadder(addr); ladder >= 0 {
				pl.Matched, pl.Entry, pl.Region = true, "geoDatabase", n.ladderRegion(ladder)
			}
		}
		return pl
	}
	return Placement{}
}

// ladderRegion is the client region of ladder l of a GEO or LATENCY name.
func (n *gname) ladderRegion(l int) string {
	if l >= 0 && l < len(n.clientRegions) {
		return n.clientRegions[l]
	}
	return ""
}

// match returns the most specific entry containing addr and its region.
func (t *locationTable) match(addr netip.Addr) (netip.Prefix, int, bool) {
	if !addr.IsValid() {
		return netip.Prefix{}, -1, false
	}
	addr = addr.Unmap()
	for _, e := range t.entries {
		if e.prefix.Addr().Is4() == addr.Is4() && e.prefix.Contains(addr) {
			return e.prefix, e.region, true
		}
	}
	return netip.Prefix{}, -1, false
}
