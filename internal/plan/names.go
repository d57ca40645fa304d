package plan

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
)

// Names lists, sorted and without duplicates, the DNS names c's endpoints
// are named by: INTERNET_FQDN_PORT fqdns and the host names of
// spillway.serverless base URLs that SERVERLESS groups use (IP addresses
// are not listed). A resolver turns them into CompileWith's Resolved.
func Names(c *config.Config) []string {
	var out []string
	for i := range c.NetworkEndpointGroups {
		n := &c.NetworkEndpointGroups[i]
		for _, t := range negTargets(c, n) {
			if _, err := netip.ParseAddr(t.host); err != nil && t.host != "" {
				out = append(out, t.host)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// negTarget is one named target of a NEG: a host (DNS name or IP
// address) and port.
type negTarget struct {
	host string
	port int
}

// negTargets lists an INTERNET_FQDN_PORT group's fqdn:port endpoints or
// a SERVERLESS group's base URL host and port (nothing for other groups
// or when the mapping is missing).
func negTargets(c *config.Config, n *config.NetworkEndpointGroup) []negTarget {
	switch n.NetworkEndpointType {
	case "INTERNET_FQDN_PORT":
		var out []negTarget
		for _, ep := range n.Endpoints {
			port := ep.Port
			if port == 0 {
				port = n.DefaultPort
			}
			if port == 0 {
				port = config.DefaultFqdnPort
			}
			out = append(out, negTarget{FqdnKey(ep.Fqdn), port})
		}
		return out
	case "SERVERLESS":
		if t, ok := serverlessTarget(c, n); ok {
			return []negTarget{t}
		}
	}
	return nil
}

// FqdnKey is the form a DNS name is resolved and reported in: lower
// case, without the final dot.
func FqdnKey(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// serverlessTarget maps a SERVERLESS group through spillway.serverless.
func serverlessTarget(c *config.Config, n *config.NetworkEndpointGroup) (negTarget, bool) {
	if c.Spillway == nil {
		return negTarget{}, false
	}
	svc := n.CloudRun
	if svc == nil {
		svc = n.AppEngine
	}
	if svc == nil {
		svc = n.CloudFunction
	}
	if svc == nil {
		return negTarget{}, false
	}
	for _, st := range c.Spillway.Serverless {
		if st.Region != config.RefName(n.Region) {
			continue
		}
		hp, err := config.ServerlessURL(st.BaseURL, svc)
		if err != nil {
			return negTarget{}, false
		}
		host, port := splitHostPort(hp)
		pn := 0
		for _, ch := range port {
			pn = pn*10 + int(ch-'0')
		}
		return negTarget{FqdnKey(strings.Trim(host, "[]")), pn}, true
	}
	return negTarget{}, false
}

// negEndpoints compiles a NEG's endpoints: ip:port ones as written; an
// fqdn into one endpoint per resolved address (Host set to the name); a
// serverless group into one endpoint, its base URL's address (the first
// resolved one for a name), so that ejecting it ejects the group as
// Google's outlier detection ejects a serverless NEG.
func (cc *compiler) negEndpoints(g *Group, n *config.NetworkEndpointGroup, hc *HealthCheck) []*Endpoint {
	var out []*Endpoint
	switch n.NetworkEndpointType {
	case "INTERNET_FQDN_PORT", "SERVERLESS":
		for _, t := range negTargets(cc.p.Config, n) {
			addrs := cc.addrs(t.host)
			if n.NetworkEndpointType == "SERVERLESS" && len(addrs) > 1 {
				addrs = addrs[:1]
			}
			for _, a := range addrs {
				out = append(out, cc.endpoint(g, joinHostPort(a.String(), t.port), t.host, hc))
			}
		}
		return out
	}
	for _, ep := range n.Endpoints {
		port := ep.Port
		if port == 0 {
			port = n.DefaultPort
		}
		out = append(out, cc.endpoint(g, joinHostPort(ep.IPAddress, port), ep.Instance, hc))
	}
	return out
}

// addrs returns a host's addresses: itself when it is an IP address,
// else its resolved addresses, sorted.
func (cc *compiler) addrs(host string) []netip.Addr {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}
	}
	out := slices.Clone(cc.resolved[host])
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}
