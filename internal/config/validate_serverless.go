package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// DefaultFqdnPort is the port of an INTERNET_FQDN_PORT endpoint that
// names none when its group has no defaultPort (Google's default, 443).
const DefaultFqdnPort = 443

// Resolver defaults (spillway.resolver).
const (
	DefaultResolverMinTTLSec = 5
	DefaultResolverMaxTTLSec = 300
)

// serverlessPlaceholders are what a spillway.serverless baseUrl may hold.
var serverlessPlaceholders = []string{"{service}", "{tag}", "{version}", "{function}"}

// fqdnGroup validates an INTERNET_FQDN_PORT group: endpoints named by
// fqdn (a DNS name, no IP address), each with a port or the group's
// defaultPort (443 when neither is set). Spillway needs a region or
// zone to place the group (Google's internet NEGs are global).
func (v *validator) fqdnGroup(p string, g *NetworkEndpointGroup) {
	if g.Zone == "" && g.Region == "" {
		v.add(p+".region", "set region: to the region whose clients this group should be nearest to (a Spillway extension: Google's internet NEGs are global), e.g. region: us-east1",
			"an INTERNET_FQDN_PORT group needs a region in Spillway")
	} else {
		v.zone(p, g.Zone, g.Region)
	}
	v.serverlessBlocksAbsent(p, g)
	if g.DefaultPort != 0 {
		v.port(p+".defaultPort", g.DefaultPort)
	}
	seen := map[string]int{}
	for j, ep := range g.Endpoints {
		epPath := at("%s.endpoints[%d]", p, j)
		if ep.IPAddress != "" {
			v.add(epPath+".ipAddress", "write the endpoint as fqdn: NAME (INTERNET_IP_PORT groups are not supported)",
				"an INTERNET_FQDN_PORT endpoint has an fqdn, not an ipAddress")
		}
		if !IsHostName(strings.TrimSuffix(ep.Fqdn, ".")) || !strings.Contains(ep.Fqdn, ".") {
			v.add(epPath+".fqdn", "write a fully qualified DNS name such as backend.example.com", "%q is not a DNS name", ep.Fqdn)
			continue
		}
		port := effectivePort(ep.Port, g.DefaultPort)
		if port != 0 {
			v.port(epPath+".port", port)
		}
		key := fmt.Sprintf("%s:%d", strings.ToLower(strings.TrimSuffix(ep.Fqdn, ".")), port)
		if first, dup := seen[key]; dup {
			v.add(epPath, "remove the duplicate endpoint", "%s is already endpoints[%d] of this group", key, first)
		}
		seen[key] = j
	}
}

// serverlessGroup validates a SERVERLESS group: regional, no endpoints,
// exactly one of cloudRun, appEngine and cloudFunction with its fixed
// fields, and a spillway.serverless mapping for its region.
func (v *validator) serverlessGroup(p string, g *NetworkEndpointGroup) {
	if g.Zone != "" || g.Region == "" {
		v.add(p+".region", "set region (serverless NEGs are regional) and remove zone", "a SERVERLESS group needs a region and no zone")
	}
	if len(g.Endpoints) > 0 || g.DefaultPort != 0 {
		v.add(p+".endpoints", "remove endpoints and defaultPort; spillway.serverless says where the service runs",
			"a SERVERLESS group has no endpoints")
	}
	blocks := 0
	for _, b := range []struct {
		field string
		s     *ServerlessService
		need  string
	}{{"cloudRun", g.CloudRun, "service"}, {"appEngine", g.AppEngine, "service"}, {"cloudFunction", g.CloudFunction, "function"}} {
		if b.s == nil {
			continue
		}
		blocks++
		v.serverlessService(p+"."+b.field, b.field, b.s, b.need)
	}
	if blocks != 1 {
		v.add(p, "set exactly one of cloudRun, appEngine and cloudFunction", "%d serverless blocks are set", blocks)
	}
	if g.Region != "" && v.serverlessTarget(RefName(g.Region)) == nil {
		v.add(p+".region", fmt.Sprintf("add spillway: {serverless: [{region: %s, baseUrl: \"https://...\"}]} saying where this region's serverless services run (docs/extensions.md)", RefName(g.Region)),
			"no spillway.serverless entry maps region %s", RefName(g.Region))
	}
}

// serverlessService checks one cloudRun/appEngine/cloudFunction block.
func (v *validator) serverlessService(p, field string, s *ServerlessService, need string) {
	value := s.Service
	if need == "function" {
		value = s.Function
	}
	if value == "" {
		fix := fmt.Sprintf("set %s: NAME; Spillway maps a fixed %s only", need, need)
		if s.URLMask != "" {
			fix += " (it does not derive one from each request through urlMask)"
		}
		v.add(p+"."+need, fix, "%s.%s is required", field, need)
	}
	if field != "cloudRun" && s.Tag != "" {
		v.add(p+".tag", "remove it: tag is a cloudRun field", "tag is not a field of %s", field)
	}
	if field != "appEngine" && s.Version != "" {
		v.add(p+".version", "remove it: version is an appEngine field", "version is not a field of %s", field)
	}
	if field != "cloudFunction" && s.Function != "" {
		v.add(p+".function", "remove it: function is a cloudFunction field", "function is not a field of %s", field)
	}
	if field == "cloudFunction" && s.Service != "" {
		v.add(p+".service", "remove it, or use function", "service is not a field of cloudFunction")
	}
}

// serverlessTarget returns region's spillway.serverless entry, or nil.
func (v *validator) serverlessTarget(region string) *ServerlessTarget {
	if v.c.Spillway == nil {
		return nil
	}
	for i := range v.c.Spillway.Serverless {
		if v.c.Spillway.Serverless[i].Region == region {
			return &v.c.Spillway.Serverless[i]
		}
	}
	return nil
}

// serverlessNEG reports whether name is a SERVERLESS network endpoint
// group.
func (v *validator) serverlessNEG(name string) bool {
	i, ok := v.negs[name]
	return ok && v.c.NetworkEndpointGroups[i].NetworkEndpointType == "SERVERLESS"
}

// serverlessBlocksAbsent refuses cloudRun/appEngine/cloudFunction on a
// group that is not SERVERLESS.
func (v *validator) serverlessBlocksAbsent(p string, g *NetworkEndpointGroup) {
	if g.CloudRun != nil || g.AppEngine != nil || g.CloudFunction != nil {
		v.add(p+".networkEndpointType", "set networkEndpointType: SERVERLESS", "cloudRun, appEngine and cloudFunction need networkEndpointType SERVERLESS")
	}
}

// serverlessTuning validates spillway.serverless and spillway.resolver.
func (v *validator) serverlessTuning(t *Tuning) {
	seen := map[string]int{}
	for i, st := range t.Serverless {
		p := at("spillway.serverless[%d]", i)
		if RegionOfZone(st.Region) != st.Region || !isRFC1035(st.Region) {
			v.add(p+".region", "write a region such as asia-northeast1", "%q is not a region name", st.Region)
		}
		if first, dup := seen[st.Region]; dup {
			v.add(p+".region", "map each region once", "region %s is already spillway.serverless[%d]", st.Region, first)
		}
		seen[st.Region] = i
		if _, err := ServerlessURL(st.BaseURL, &ServerlessService{Service: "s", Tag: "t", Version: "v", Function: "f"}); err != nil {
			v.add(p+".baseUrl", "write an https:// URL with a host and optional port, no path, e.g. https://{service}.run.internal:8443", "%v", err)
		}
	}
	if r := t.Resolver; r != nil {
		if r.Address != "" {
			if u, err := url.Parse("dns://" + r.Address); err != nil || u.Hostname() == "" || u.Port() == "" || u.Path != "" {
				v.add("spillway.resolver.address", "write host:port, e.g. 127.0.0.1:53", "%q is not host:port", r.Address)
			}
		}
		v.intRange("spillway.resolver.minTtlSec", r.MinTTLSec, 0, 86400)
		v.intRange("spillway.resolver.maxTtlSec", r.MaxTTLSec, 1, 86400)
		if r.MinTTLSec != nil && r.MaxTTLSec != nil && *r.MinTTLSec > *r.MaxTTLSec {
			v.add("spillway.resolver.minTtlSec", "make minTtlSec at most maxTtlSec", "minTtlSec %d is above maxTtlSec %d", *r.MinTTLSec, *r.MaxTTLSec)
		}
	}
}

// ServerlessURL expands a spillway.serverless baseUrl for one serverless
// service: the placeholders in its host replaced. It returns the URL's
// host:port (port 443 when the URL names none).
func ServerlessURL(base string, s *ServerlessService) (hostPort string, err error) {
	host := base
	if after, ok := strings.CutPrefix(base, "https://"); ok {
		host = after
	} else {
		return "", fmt.Errorf("%q does not start with https://", base)
	}
	host = strings.TrimSuffix(host, "/")
	if strings.ContainsAny(host, "/?#@") {
		return "", fmt.Errorf("%q has a path, query, fragment or user", base)
	}
	r := strings.NewReplacer("{service}", s.Service, "{tag}", s.Tag, "{version}", s.Version, "{function}", s.Function)
	host = r.Replace(host)
	if strings.ContainsAny(host, "{}") {
		return "", fmt.Errorf("%q has a placeholder other than %s", base, strings.Join(serverlessPlaceholders, ", "))
	}
	u, err := url.Parse("https://" + host)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("%q has no valid host", base)
	}
	port := 443
	if u.Port() != "" {
		if port, err = strconv.Atoi(u.Port()); err != nil || port < 1 || port > 65535 {
			return "", fmt.Errorf("%q has port %q out of range", base, u.Port())
		}
	}
	return joinHostPort(u.Hostname(), port), nil
}

// joinHostPort joins a host (IPv6 in brackets) and a port.
func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

// serverlessBackend refuses health checks on a service with a SERVERLESS
// group: Google Cloud does not health-check serverless NEGs (outlier
// detection is what takes a failing one out).
func (v *validator) serverlessBackend(p, bp string, bs *BackendService, neg string) {
	i, ok := v.negs[neg]
	if !ok || v.c.NetworkEndpointGroups[i].NetworkEndpointType != "SERVERLESS" || len(bs.HealthChecks) == 0 {
		return
	}
	v.add(p+".healthChecks", "remove healthChecks; use outlierDetection to eject a failing serverless group",
		"%s uses SERVERLESS group %q, and serverless network endpoint groups take no health checks", bp, neg)
}
