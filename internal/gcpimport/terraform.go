package gcpimport

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/spillwaylb/spillway/internal/config"
)

// terraform imports the resources of a `terraform show -json` document:
// values.root_module.resources[] and its child_modules, recursively.
func (im *importer) terraform(src string, n *yaml.Node) error {
	values := get(n, "values")
	if values == nil {
		values = get(n, "planned_values")
	}
	root := get(values, "root_module")
	if root == nil {
		return fmt.Errorf("%s: a terraform JSON document without values.root_module; give the output of `terraform show -json` (a state) unchanged", src)
	}
	im.module(src, root, 0)
	return nil
}

// module imports one module's resources, then its child modules'.
func (im *importer) module(src string, m *yaml.Node, depth int) {
	if depth > 32 {
		im.note(src, "child_modules", "modules nested more than 32 deep; the deeper ones are skipped")
		return
	}
	for _, r := range seq(get(m, "resources")) {
		im.tfResource(src, r)
	}
	for _, c := range seq(get(m, "child_modules")) {
		im.module(src, c, depth+1)
	}
}

// tfResource imports one terraform resource.
func (im *importer) tfResource(src string, r *yaml.Node) {
	typ := scalar(get(r, "type"))
	addr := scalar(get(r, "address"))
	if addr == "" {
		addr = typ + "." + scalar(get(r, "name"))
	}
	v := get(r, "values")
	if v == nil || v.Kind != yaml.MappingNode {
		return
	}
	if scalar(get(r, "mode")) == "data" && typ != "google_compute_instance" {
		return // data sources only help with addresses
	}
	if coll := tfCollection(typ); coll != "" {
		im.resource(src, coll, v, true)
		return
	}
	switch typ {
	case "google_compute_instance_group_manager":
		// A managed group: its name, zone and named ports; its instances
		// are not in the state.
		g := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range []string{"name", "zone", "named_port"} {
			if val := get(v, k); val != nil {
				set(g, k, val)
			}
		}
		im.resource(src, "instanceGroups", g, true)
	case "google_compute_instance":
		ip := ""
		if nics := seq(get(v, "network_interface")); len(nics) > 0 {
			ip = scalar(get(nics[0], "network_ip"))
		}
		im.addInstance(src, scalar(get(v, "name")), config.RefName(scalar(get(v, "zone"))), ip)
	case "google_compute_network_endpoint":
		im.tfEndpoint(src, config.RefName(scalar(get(v, "network_endpoint_group"))), v)
	case "google_compute_network_endpoints":
		neg := config.RefName(scalar(get(v, "network_endpoint_group")))
		for _, ep := range seq(get(v, "network_endpoints")) {
			im.tfEndpoint(src, neg, ep)
		}
	case "google_compute_region_network_endpoint_group":
		im.tfRegionalGroup(src, addr, v)
	case "google_compute_global_network_endpoint_group":
		// An internet NEG (INTERNET_FQDN_PORT; INTERNET_IP_PORT is
		// refused by the config, with its reason): placed in a region as
		// the gcloud path does.
		im.resource(src, "networkEndpointGroups", v, true)
	case "google_compute_global_network_endpoint":
		im.tfEndpoint(src, config.RefName(scalar(get(v, "global_network_endpoint_group"))), v)
	case "google_compute_region_url_map", "google_compute_region_backend_service", "google_compute_region_health_check",
		"google_compute_region_target_http_proxy", "google_compute_region_target_https_proxy":
		im.note(src, addr, "a regional load balancer's resource: Spillway implements the global external Application Load Balancer; not imported")
	case "google_compute_global_forwarding_rule", "google_compute_target_http_proxy", "google_compute_target_https_proxy", "google_compute_global_address":
		im.note(src, addr, "Spillway's frontends[] take the place of forwarding rules, target proxies and addresses: use --frontend ADDRESS; not imported")
	case "google_compute_managed_ssl_certificate", "google_compute_ssl_certificate", "google_certificate_manager_certificate":
		im.note(src, addr, "certificates are PEM files in Spillway (frontends[].certificates); not imported")
	case "google_compute_ssl_policy":
		im.note(src, addr, "SSL policies are not imported yet: copy it into sslPolicies[] by hand (the REST field names apply)")
	default:
		im.note(src, addr, "not a load balancer resource Spillway imports; skipped")
	}
}

// tfCollection maps a terraform resource type to a config collection.
func tfCollection(typ string) string {
	switch typ {
	case "google_compute_url_map":
		return "urlMaps"
	case "google_compute_backend_service":
		return "backendServices"
	case "google_compute_health_check":
		return "healthChecks"
	case "google_network_services_service_lb_policies":
		return "serviceLbPolicies"
	case "google_compute_network_endpoint_group":
		return "networkEndpointGroups"
	case "google_compute_instance_group":
		return "instanceGroups"
	case "google_compute_security_policy":
		return "securityPolicies"
	case "google_compute_backend_bucket":
		return "backendBuckets"
	}
	return ""
}

// tfRegionalGroup imports a regional network endpoint group that is
// serverless (its cloud_run, app_engine or cloud_function block and its
// region, as the gcloud path carries them); the other types serve
// regional load balancers or Private Service Connect.
func (im *importer) tfRegionalGroup(src, addr string, v *yaml.Node) {
	if typ := scalar(get(v, "network_endpoint_type")); typ != "SERVERLESS" {
		im.note(src, addr, "a regional network endpoint group of type %s: of the regional types the global external Application Load Balancer takes only SERVERLESS ones; not imported", typ)
		return
	}
	im.resource(src, "networkEndpointGroups", v, true)
}

// tfEndpoint adds one terraform network endpoint to its group.
func (im *importer) tfEndpoint(src, neg string, v *yaml.Node) {
	ep := &yaml.Node{Kind: yaml.MappingNode}
	if ip := scalar(get(v, "ip_address")); ip != "" {
		set(ep, "ipAddress", str(ip))
	}
	if fqdn := scalar(get(v, "fqdn")); fqdn != "" {
		set(ep, "fqdn", str(fqdn)) // an internet NEG's endpoint
	}
	if port := get(v, "port"); port != nil && !zero(port) {
		set(ep, "port", port)
	}
	if in := scalar(get(v, "instance")); in != "" {
		set(ep, "instance", str(config.RefName(in)))
	}
	if neg == "" || len(ep.Content) == 0 {
		im.note(src, "google_compute_network_endpoint", "an endpoint without a group or an address; skipped")
		return
	}
	im.endpoints[neg] = append(im.endpoints[neg], ep)
}
