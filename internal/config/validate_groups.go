package config

import "net/netip"

// networkEndpointGroups validates networkEndpointGroups[].
func (v *validator) networkEndpointGroups() {
	for i := range v.c.NetworkEndpointGroups {
		g := &v.c.NetworkEndpointGroups[i]
		p := at("networkEndpointGroups[%d]", i)
		switch g.NetworkEndpointType {
		case "", "GCE_VM_IP_PORT", "NON_GCP_PRIVATE_IP_PORT":
			v.zone(p, g.Zone, g.Region)
		case "SERVERLESS":
			v.serverlessGroup(p, g)
			continue
		case "INTERNET_FQDN_PORT":
			v.fqdnGroup(p, g)
			continue
		case "INTERNET_IP_PORT", "PRIVATE_SERVICE_CONNECT", "GCE_VM_IP":
			v.zone(p, g.Zone, g.Region)
			v.add(p+".networkEndpointType", "use GCE_VM_IP_PORT, NON_GCP_PRIVATE_IP_PORT, INTERNET_FQDN_PORT or SERVERLESS",
				"%s network endpoint groups are not supported", g.NetworkEndpointType)
		default:
			v.zone(p, g.Zone, g.Region)
			v.enum(p+".networkEndpointType", g.NetworkEndpointType, "GCE_VM_IP_PORT", "NON_GCP_PRIVATE_IP_PORT", "INTERNET_FQDN_PORT", "SERVERLESS")
		}
		v.serverlessBlocksAbsent(p, g)
		if g.DefaultPort != 0 {
			v.port(p+".defaultPort", g.DefaultPort)
		}
		v.ipEndpoints(p, g)
	}
}

// ipEndpoints validates the ip:port endpoints of a group.
func (v *validator) ipEndpoints(p string, g *NetworkEndpointGroup) {
	seen := map[netip.AddrPort]int{}
	for j, ep := range g.Endpoints {
		ep.Port = effectivePort(ep.Port, g.DefaultPort)
		epPath := at("%s.endpoints[%d]", p, j)
		if ep.Fqdn != "" {
			v.add(epPath+".fqdn", "use networkEndpointType: INTERNET_FQDN_PORT for endpoints named by fqdn, or write ipAddress",
				"fqdn is only valid in INTERNET_FQDN_PORT groups")
			continue
		}
		addr, ok := v.ipAddress(epPath+".ipAddress", ep.IPAddress)
		if ep.Port == 0 {
			v.add(epPath+".port", "set port on the endpoint, or defaultPort on the group", "a port is required")
			continue
		}
		if ep.Port < 0 || ep.Port > 65535 {
			v.port(epPath+".port", ep.Port)
			continue
		}
		if !ok {
			continue
		}
		ap := netip.AddrPortFrom(addr, uint16(ep.Port))
		if first, dup := seen[ap]; dup {
			v.add(epPath, "remove the duplicate endpoint",
				"%s is already endpoints[%d] of this group", ap, first)
			continue
		}
		seen[ap] = j
	}
}

// effectivePort is an endpoint's port, or the group's default port.
func effectivePort(port, defaultPort int) int {
	if port != 0 {
		return port
	}
	return defaultPort
}

// instanceGroups validates instanceGroups[].
func (v *validator) instanceGroups() {
	for i := range v.c.InstanceGroups {
		g := &v.c.InstanceGroups[i]
		p := at("instanceGroups[%d]", i)
		v.zone(p, g.Zone, g.Region)
		ports := map[string]int{}
		for j, np := range g.NamedPorts {
			pp := at("%s.namedPorts[%d]", p, j)
			if v.name(pp+".name", np.Name, "named port", "http") {
				if first, dup := ports[np.Name]; dup {
					v.add(pp+".name", "give each named port its own name", "%q is already namedPorts[%d]", np.Name, first)
				}
				ports[np.Name] = j
			}
			v.port(pp+".port", np.Port)
		}
		names := map[string]int{}
		for j, in := range g.Instances {
			ip := at("%s.instances[%d]", p, j)
			if v.name(ip+".name", in.Name, "instance", "vm-1") {
				if first, dup := names[in.Name]; dup {
					v.add(ip+".name", "give each instance its own name", "%q is already instances[%d]", in.Name, first)
				}
				names[in.Name] = j
			}
			v.ipAddress(ip+".ipAddress", in.IPAddress)
		}
	}
}

// zone checks a group's zone: required unless region is given, and shaped
// like us-south1-a.
func (v *validator) zone(p, zone, region string) {
	if zone == "" {
		if region == "" {
			v.add(p+".zone", "set zone, e.g. zone: us-east1-b (or region, for a group that spans a region)", "a zone is required")
		}
		return
	}
	z := RefName(zone)
	if RegionOfZone(z) == z || !isRFC1035(z) {
		v.add(p+".zone", "write a zone as <region>-<letter>, e.g. us-south1-a, or set region explicitly",
			"%q is not a zone name", zone)
	}
}

// ipAddress checks an IPv4 or IPv6 literal.
func (v *validator) ipAddress(path, s string) (netip.Addr, bool) {
	if s == "" {
		v.add(path, "write the endpoint's IP address, e.g. 10.0.0.5", "an IP address is required")
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		v.add(path, "write an IPv4 or IPv6 address such as 10.0.0.5 or 2001:db8::5, without a port", "%q is not an IP address", s)
		return netip.Addr{}, false
	}
	return addr.Unmap(), true
}

// groupKind tells instance groups from network endpoint groups.
type groupKind int

const (
	kindUnknown groupKind = iota
	kindInstanceGroup
	kindNEG
)

// groupRef resolves backends[].group.
func (v *validator) groupRef(path, ref string) (groupKind, string) {
	if ref == "" {
		v.add(path, "name an instance group or network endpoint group", "a group is required")
		return kindUnknown, ""
	}
	coll, name := v.ref(path, ref, "instance group or network endpoint group", map[string]map[string]int{
		"instanceGroups":        v.igs,
		"networkEndpointGroups": v.negs,
	})
	switch coll {
	case "instanceGroups":
		return kindInstanceGroup, name
	case "networkEndpointGroups":
		return kindNEG, name
	}
	return kindUnknown, ""
}
