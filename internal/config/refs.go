package config

import "strings"

// RefName returns the name a reference points at: its last path segment.
// References may be plain names ("bs-web") or links such as
// https://www.googleapis.com/compute/v1/projects/P/global/backendServices/bs-web,
// projects/P/locations/global/serviceLbPolicies/N,
// //networkservices.googleapis.com/projects/P/locations/global/serviceLbPolicies/N
// or projects/P/zones/Z/networkEndpointGroups/N.
func RefName(ref string) string {
	if i := strings.LastIndexByte(ref, '/'); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// refCollection returns the collection segment of a link (the segment
// before the name, e.g. "backendServices"), or "" for a plain name.
func refCollection(ref string) string {
	i := strings.LastIndexByte(ref, '/')
	if i < 0 {
		return ""
	}
	return RefName(ref[:i])
}

// RegionOfZone returns the region of a zone: the zone without its final
// "-x" single-letter suffix ("us-south1-a" → "us-south1"). A link to a
// zone (…/zones/us-south1-a) is reduced to its name first. A name without
// such a suffix is returned unchanged.
func RegionOfZone(zone string) string {
	z := RefName(zone)
	if n := len(z); n >= 3 && z[n-2] == '-' && z[n-1] >= 'a' && z[n-1] <= 'z' {
		return z[:n-2]
	}
	return z
}

// RegionName returns the region of the group: its explicit region (the
// name, if given as a link) or else the region of its zone.
func (g *NetworkEndpointGroup) RegionName() string {
	if g.Region != "" {
		return RefName(g.Region)
	}
	return RegionOfZone(g.Zone)
}

// RegionName returns the region of the group: its explicit region (the
// name, if given as a link) or else the region of its zone.
func (g *InstanceGroup) RegionName() string {
	if g.Region != "" {
		return RefName(g.Region)
	}
	return RegionOfZone(g.Zone)
}
