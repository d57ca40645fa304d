package gcpimport

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spillwaylb/spillway/internal/config"
)

// placeholderHost is the host of a placeholder spillway.serverless base
// URL: .invalid never resolves (RFC 6761), so a config served before the
// placeholder is replaced fails visibly (get-health shows the lookup
// error) instead of sending traffic somewhere.
const placeholderHost = ".serverless.invalid"

// stub records a group known only from a member list or a backend
// service's link: a zone from either; an INTERNET_FQDN_PORT group for a
// global link or fqdn members; a region, with a note asking for the
// describe output, for another regional link (a serverless NEG's service
// is only in its describe output).
func (im *importer) stub(coll, name, zone, src, link string) *resource {
	n := &yaml.Node{Kind: yaml.MappingNode}
	set(n, "name", str(name))
	r := &resource{coll: coll, name: name, src: src, node: n}
	im.resources = append(im.resources, r)
	path := fmt.Sprintf("%s[%s]", coll, name)
	eps := im.endpoints[name]
	switch {
	case coll == "networkEndpointGroups" && (hasField(eps, "fqdn") || linkSegment(link, "global") != ""):
		typ := "INTERNET_FQDN_PORT"
		if hasField(eps, "ipAddress") && !hasField(eps, "fqdn") {
			typ = "INTERNET_IP_PORT" // refused by the config, with its reason
		}
		set(n, "networkEndpointType", str(typ))
	case zone != "":
		set(n, "zone", str(zone))
	case linkSegment(link, "regions") != "":
		region := linkSegment(link, "regions")
		set(n, "region", str(region))
		im.note(src, path, "a regional group known only from a backend service's link: give `gcloud compute network-endpoint-groups describe %s --region %s --format json` (a serverless NEG's cloudRun, appEngine or cloudFunction is only there)", name, region)
	default:
		set(n, "zone", str(""))
		im.note(src, path+".zone", "the zone is unknown; pass the list as --endpoints %s@ZONE=FILE", name)
	}
	return r
}

// hasField reports whether any member has key.
func hasField(members []*yaml.Node, key string) bool {
	return slices.ContainsFunc(members, func(n *yaml.Node) bool { return get(n, key) != nil })
}

// linkSegment returns the segment after key in a link (…/regions/R/…),
// or "".
func linkSegment(link, key string) string {
	parts := strings.Split(link, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == key {
			return parts[i+1]
		}
	}
	return ""
}

// negMembers completes a network endpoint group: its members from
// list-network-endpoints, the region of an INTERNET_FQDN_PORT group, and
// notes on what a serverless group cannot carry.
func (im *importer) negMembers(r *resource, o Options) {
	path := "networkEndpointGroups[" + r.name + "]"
	eps := im.endpoints[r.name]
	lg, listed := im.listed[r.name]
	if listed && lg.coll == "instanceGroups" {
		im.note(lg.src, path, "the list given for this network endpoint group is an instance group's list-instances output; ignored")
	}
	where := "--zone=ZONE"
	switch scalar(get(r.node, "networkEndpointType")) {
	case "SERVERLESS":
		if len(eps) > 0 {
			im.note(lg.src, path+".endpoints", "a serverless group has no endpoints (spillway.serverless says where its service runs); the list is ignored")
		}
		im.urlMaskNotes(r, path)
		return
	case "INTERNET_FQDN_PORT":
		im.internetRegion(r, o, path)
		where = "--global"
	}
	if len(eps) > 0 {
		set(r.node, "endpoints", &yaml.Node{Kind: yaml.SequenceNode, Content: eps})
	} else if get(r.node, "endpoints") == nil {
		im.note(r.src, path+".endpoints", "no endpoints: pass `gcloud compute network-endpoint-groups list-network-endpoints %s %s --format=json` as --endpoints %s=FILE", r.name, where, r.name)
	}
}

// internetRegion places a global INTERNET_FQDN_PORT group in
// --internet-neg-region, else in the frontend's --region (where its
// clients are: Google reaches an internet NEG from the edge nearest the
// client), else says what to pass.
func (im *importer) internetRegion(r *resource, o Options, path string) {
	if get(r.node, "zone") != nil || get(r.node, "region") != nil {
		return
	}
	region := o.InternetNEGRegion
	if region == "" {
		region = o.Region
	}
	if region == "" {
		im.note(r.src, path+".region", "Google's internet NEGs are global and Spillway needs a region to place this one: pass --internet-neg-region REGION (the region whose clients it should be nearest to), or --frontend with --region")
		return
	}
	set(r.node, "region", str(region))
}

// urlMaskNotes reports a serverless group's urlMask: Spillway maps the
// fixed service (or function) only.
func (im *importer) urlMaskNotes(r *resource, path string) {
	for _, b := range []struct{ field, need string }{{"cloudRun", "service"}, {"appEngine", "service"}, {"cloudFunction", "function"}} {
		block := get(r.node, b.field)
		mask := scalar(get(block, "urlMask"))
		if mask == "" {
			continue
		}
		reason := fmt.Sprintf("URL mask %q is not applied: Spillway sends every request to the fixed %s (docs/extensions.md)", mask, b.need)
		if scalar(get(block, b.need)) == "" {
			reason += fmt.Sprintf(", and this group names none, so the config does not validate: set %s.%s to the one to serve, or split the group per %s", b.field, b.need, b.need)
		}
		im.note(r.src, path+"."+b.field+".urlMask", "%s", reason)
	}
}

// serverlessMapping is the spillway block with one spillway.serverless
// entry per region of the serverless groups: the --serverless base URL,
// else a placeholder that is reported. It returns nil when there are no
// serverless groups; placeholder tells whether any entry is one.
func (im *importer) serverlessMapping(o Options) (block *yaml.Node, placeholder bool) {
	var regions []string
	srcs := map[string]string{}
	for _, r := range im.resources {
		region := scalar(get(r.node, "region"))
		if r.coll != "networkEndpointGroups" || scalar(get(r.node, "networkEndpointType")) != "SERVERLESS" || region == "" || srcs[region] != "" {
			continue
		}
		regions = append(regions, region)
		srcs[region] = r.src
	}
	if len(regions) == 0 {
		return nil, false
	}
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for _, region := range regions {
		base := ""
		for _, t := range o.Serverless {
			if t.Region == region {
				base = t.BaseURL
			}
		}
		if base == "" {
			base = "https://" + region + placeholderHost
			placeholder = true
			im.note(srcs[region], fmt.Sprintf("spillway.serverless[%s].baseUrl", region), "where %s's serverless services run outside Google Cloud is not in any export: %s is a placeholder that never resolves; pass --serverless %s=https://HOST[:PORT] or edit baseUrl (docs/extensions.md)", region, base, region)
		}
		e := &yaml.Node{Kind: yaml.MappingNode}
		set(e, "region", str(region))
		set(e, "baseUrl", str(base))
		list.Content = append(list.Content, e)
	}
	block = &yaml.Node{Kind: yaml.MappingNode}
	set(block, "serverless", list)
	return block, placeholder
}

// serverlessComment heads the spillway block.
func serverlessComment(placeholder bool) string {
	c := "spillway.serverless (a Spillway extension, docs/extensions.md): where each region's\nserverless services (cloudRun, appEngine, cloudFunction) run outside Google Cloud."
	if placeholder {
		c += "\nPLACEHOLDER: replace each baseUrl ending in " + placeholderHost + " (it never resolves),\nor run spillway import again with --serverless REGION=https://HOST[:PORT]."
	}
	return c
}

// internetBackendModes drops balancingMode UTILIZATION from the backends
// that are INTERNET_FQDN_PORT groups: Terraform's state writes its
// default UTILIZATION for every backend, Google applies no balancing
// mode to an internet NEG, and the config refuses UTILIZATION for
// network endpoint groups. Counted among the dropped fields.
func (im *importer) internetBackendModes() {
	internet := map[string]bool{}
	for _, r := range im.resources {
		if r.coll == "networkEndpointGroups" && scalar(get(r.node, "networkEndpointType")) == "INTERNET_FQDN_PORT" {
			internet[r.name] = true
		}
	}
	for _, r := range im.resources {
		if r.coll != "backendServices" {
			continue
		}
		for _, b := range seq(get(r.node, "backends")) {
			if internet[config.RefName(scalar(get(b, "group")))] && scalar(get(b, "balancingMode")) == "UTILIZATION" {
				del(b, "balancingMode")
				im.dropped["balancingMode UTILIZATION of an internet NEG backend"]++
			}
		}
	}
}
