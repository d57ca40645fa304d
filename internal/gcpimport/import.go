// Package gcpimport turns what Google Cloud tooling writes about a global
// external Application Load Balancer into a Spillway config: gcloud's
// `export` and `describe` YAML (URL maps, backend services, health checks,
// service LB policies, network endpoint and instance groups), gcloud's
// `list-network-endpoints`, `instance-groups list-instances` and
// `instances list` JSON, and a `terraform show -json` state.
//
// It keeps every field Spillway understands (checked against the types of
// package config by reflection, so a field the config learns is carried
// without a change here), drops output-only fields and disabled features,
// and reports, as Notes, everything it could not carry and why. The
// package is pure: it reads the bytes it is given and returns bytes.
package gcpimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spillwaylb/spillway/internal/config"
)

// Source is one input file.
type Source struct {
	// Name names the file in notes and errors.
	Name string
	Data []byte
}

// Endpoints is the member list of one group: the JSON that
// `gcloud compute network-endpoint-groups list-network-endpoints
// --format=json` or `gcloud compute instance-groups list-instances
// --format=json` writes, which does not say which group it lists.
type Endpoints struct {
	// Group is the group's name.
	Group string
	// Zone is the group's zone; empty takes it from the group's describe
	// output or from a backend service's reference to the group.
	Zone string
	Source
}

// Options is what to import.
type Options struct {
	// Files are resource files, recognised by content: YAML or JSON, one
	// resource, several (YAML documents separated by ---) or a list.
	Files []Source
	// Endpoints are group member lists.
	Endpoints []Endpoints
	// Frontend is the address of the frontend to generate
	// ("127.0.0.1:8080"); empty leaves a commented template.
	Frontend string
	// Region is the generated frontend's region (where its clients are).
	Region string
	// InternetNEGRegion is the region given to INTERNET_FQDN_PORT groups,
	// which are global in Google Cloud and need one in Spillway (default:
	// Region).
	InternetNEGRegion string
	// Serverless says where each region's serverless services run
	// (spillway.serverless); a region with serverless groups and no entry
	// gets a placeholder base URL, reported in the notes.
	Serverless []config.ServerlessTarget
}

// Note is one thing the import could not carry into the config.
type Note struct {
	// Source names the file.
	Source string
	// Path is where, e.g. backendServices[bs-web].securityPolicy.
	Path string
	// Reason says what was dropped and what that changes.
	Reason string
}

func (n Note) String() string {
	return fmt.Sprintf("%s: %s: %s", n.Source, n.Path, n.Reason)
}

// Result is an imported config.
type Result struct {
	// Config is the Spillway config, YAML, with a header comment that
	// lists what was dropped.
	Config []byte
	// Notes lists what was not carried, each with the reason.
	Notes []Note
	// Dropped counts the output-only fields and disabled features
	// dropped silently, by name.
	Dropped map[string]int
}

// collection is a config list and its element type.
type collection struct {
	name string
	typ  reflect.Type
}

// collections lists the imported collections in the order a config
// lists them.
func collections() []collection {
	return []collection{
		{"healthChecks", reflect.TypeFor[config.HealthCheck]()},
		{"serviceLbPolicies", reflect.TypeFor[config.ServiceLbPolicy]()},
		{"networkEndpointGroups", reflect.TypeFor[config.NetworkEndpointGroup]()},
		{"instanceGroups", reflect.TypeFor[config.InstanceGroup]()},
		{"backendServices", reflect.TypeFor[config.BackendService]()},
		{"backendBuckets", reflect.TypeFor[config.BackendBucket]()},
		{"urlMaps", reflect.TypeFor[config.URLMap]()},
		{"securityPolicies", reflect.TypeFor[config.SecurityPolicy]()},
	}
}

func typeOf(name string) reflect.Type {
	for _, c := range collections() {
		if c.name == name {
			return c.typ
		}
	}
	return nil
}

// resource is one imported resource, pruned to what the config accepts.
type resource struct {
	coll, name, src string
	node            *yaml.Node // a mapping in REST shape
}

// member is one instance of an instance group, by reference.
type member struct{ name, zone string }

// address is where an instance is.
type address struct{ ip, src string }

// importer accumulates resources across files.
type importer struct {
	notes     []Note
	dropped   map[string]int
	resources []*resource
	// instances maps "zone/name" and "name" to the instance's address.
	instances map[string]address
	// members and endpoints hold group members by group name.
	members   map[string][]member
	endpoints map[string][]*yaml.Node
	// memberPorts are the namedPorts list-instances reported, by group.
	memberPorts map[string]*yaml.Node
	// listed records the groups whose members were given, with the kind
	// of list (networkEndpointGroups or instanceGroups) and zone.
	listed map[string]listedGroup
	order  []string // group names in the order their lists came
}

type listedGroup struct{ coll, zone, src string }

// Import reads the inputs and builds a config. The error is for input it
// cannot read at all (not YAML or JSON, or a resource it cannot
// recognise), naming the file and the fix; everything else it cannot
// carry becomes a Note.
func Import(o Options) (*Result, error) {
	im := &importer{
		dropped:     map[string]int{},
		instances:   map[string]address{},
		members:     map[string][]member{},
		endpoints:   map[string][]*yaml.Node{},
		memberPorts: map[string]*yaml.Node{},
		listed:      map[string]listedGroup{},
	}
	for _, f := range o.Files {
		if err := im.file(f); err != nil {
			return nil, err
		}
	}
	for _, e := range o.Endpoints {
		if err := im.endpointList(e); err != nil {
			return nil, err
		}
	}
	im.groups(o)
	im.internetBackendModes()
	out, err := im.render(o)
	if err != nil {
		return nil, err
	}
	return &Result{Config: out, Notes: im.notes, Dropped: im.dropped}, nil
}

func (im *importer) note(src, path, format string, args ...any) {
	im.notes = append(im.notes, Note{Source: src, Path: path, Reason: fmt.Sprintf(format, args...)})
}

// documents decodes every YAML (or JSON) document of data.
func documents(s Source) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(s.Data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not YAML or JSON (%w); give the file gcloud or terraform wrote, unchanged", s.Name, err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		if hasAlias(&doc) {
			return nil, fmt.Errorf("%s: uses YAML anchors and aliases (& and *), which gcloud and terraform never write (and which can make a small file expand without bound); give the file they wrote, unchanged", s.Name)
		}
		root := resolve(doc.Content[0])
		if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			continue
		}
		docs = append(docs, root)
	}
}

// hasAlias reports whether the tree under n has an alias node. It does
// not follow aliases, so it visits each node of the file once.
func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}

// resolve returns n, or a null node for nil. (Files with aliases are
// refused by documents, so there are none to follow.)
func resolve(n *yaml.Node) *yaml.Node {
	if n == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

// file imports every resource of one file.
func (im *importer) file(s Source) error {
	docs, err := documents(s)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return fmt.Errorf("%s: the file is empty; give the output of gcloud ... export, describe or list --format=json, or terraform show -json", s.Name)
	}
	for i, doc := range docs {
		items := []*yaml.Node{doc}
		if doc.Kind == yaml.SequenceNode {
			items = doc.Content
		}
		for j, item := range items {
			item = resolve(item)
			where := s.Name
			if len(docs) > 1 {
				where = fmt.Sprintf("%s (document %d)", where, i+1)
			}
			if doc.Kind == yaml.SequenceNode {
				where = fmt.Sprintf("%s[%d]", where, j)
			}
			if err := im.item(s.Name, where, item); err != nil {
				return err
			}
		}
	}
	return nil
}

// item imports one resource of a file.
func (im *importer) item(src, where string, n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: want a resource (a mapping of fields), got %s; give gcloud's or terraform's output unchanged", where, kindName(n))
	}
	if get(n, "format_version") != nil || get(n, "values") != nil {
		return im.terraform(src, n)
	}
	switch classify(n) {
	case "instance":
		im.instance(src, n)
	case "networkEndpoint", "member":
		return fmt.Errorf("%s: a group member list does not say which group it lists; pass it as --endpoints GROUP[@ZONE]=%s", where, src)
	case "":
		return fmt.Errorf("%s: cannot tell which resource this is (no kind, and none of the fields that identify a URL map, backend service, backend bucket, health check, service LB policy, network endpoint group, instance group or instance); give gcloud's export or describe output, or add kind: compute#backendService (or compute#urlMap, compute#healthCheck, ...)", where)
	case "ignore":
		im.note(src, where, "kind %s is not a resource Spillway imports; skipped", scalar(get(n, "kind")))
	default:
		im.resource(src, classify(n), n, false)
	}
	return nil
}

// kindCollection maps the kind field of gcloud output to a collection
// (or instance, member, networkEndpoint).
func kindCollection(kind string) (string, bool) {
	switch kind {
	case "compute#urlMap":
		return "urlMaps", true
	case "compute#backendService":
		return "backendServices", true
	case "compute#healthCheck":
		return "healthChecks", true
	case "compute#networkEndpointGroup":
		return "networkEndpointGroups", true
	case "compute#instanceGroup", "compute#instanceGroupManager":
		return "instanceGroups", true
	case "compute#instance":
		return "instance", true
	case "compute#instanceWithNamedPorts":
		return "member", true
	case "compute#networkEndpointWithHealthStatus":
		return "networkEndpoint", true
	case "networkservices#serviceLbPolicy":
		return "serviceLbPolicies", true
	case "compute#securityPolicy":
		return "securityPolicies", true
	case "compute#backendBucket":
		return "backendBuckets", true
	}
	return "", false
}

// signature is the fields that identify a resource without a kind.
type signature struct {
	coll   string
	fields []string
}

// signatures lists the signatures in the order they are tried.
func signatures() []signature {
	return []signature{
		{"networkEndpoint", []string{"networkEndpoint"}},
		{"instance", []string{"networkInterfaces"}},
		{"serviceLbPolicies", []string{"loadBalancingAlgorithm", "autoCapacityDrain", "failoverConfig", "isolationConfig"}},
		{"securityPolicies", []string{"rules", "adaptiveProtectionConfig", "advancedOptionsConfig"}},
		{"backendBuckets", []string{"bucketName"}},
		{"backendServices", []string{"backends", "loadBalancingScheme", "healthChecks", "sessionAffinity", "localityLbPolicy", "enableCDN", "connectionDraining"}},
		{"urlMaps", []string{"defaultService", "hostRules", "pathMatchers", "defaultRouteAction", "defaultUrlRedirect"}},
		{"healthChecks", []string{"httpHealthCheck", "httpsHealthCheck", "http2HealthCheck", "tcpHealthCheck", "sslHealthCheck", "grpcHealthCheck", "grpcTlsHealthCheck", "checkIntervalSec", "healthyThreshold", "unhealthyThreshold"}},
		{"networkEndpointGroups", []string{"networkEndpointType", "defaultPort"}},
		{"instanceGroups", []string{"namedPorts", "isManaged", "instanceTemplate", "targetSize"}},
		{"member", []string{"instance"}},
	}
}

// classify returns the collection of a gcloud resource, "instance",
// "member", "networkEndpoint", "ignore" for a known kind Spillway does not
// import, or "" when it cannot tell.
func classify(n *yaml.Node) string {
	if k := scalar(get(n, "kind")); k != "" {
		if c, ok := kindCollection(k); ok {
			return c
		}
		if strings.HasPrefix(k, "compute#") {
			return "ignore"
		}
	}
	for _, s := range signatures() {
		for _, f := range s.fields {
			if get(n, f) != nil {
				return s.coll
			}
		}
	}
	return ""
}

// resource prunes and records one resource of collection coll.
func (im *importer) resource(src, coll string, n *yaml.Node, tf bool) *resource {
	// networkservices resources are named in full:
	// projects/P/locations/global/serviceLbPolicies/NAME.
	name := config.RefName(scalar(get(n, "name")))
	if name == "" {
		name = fmt.Sprintf("#%d", len(im.resources))
	}
	path := fmt.Sprintf("%s[%s]", coll, name)
	p := &pruner{im: im, src: src, tf: tf, name: name}
	out := p.prune(n, typeOf(coll), path, true)
	if out == nil {
		out = &yaml.Node{Kind: yaml.MappingNode}
	}
	if nm := get(out, "name"); nm != nil {
		nm.Value = name
	}
	if coll == "backendServices" || coll == "backendBuckets" {
		im.cdn(src, path, out)
	}
	if coll == "networkEndpointGroups" || coll == "instanceGroups" {
		for _, k := range []string{"zone", "region"} {
			if z := get(out, k); z != nil {
				z.Value = config.RefName(z.Value) // a link in gcloud's output
			}
		}
	}
	r := &resource{coll: coll, name: name, src: src, node: out}
	im.resources = append(im.resources, r)
	return r
}

// instance records the address of a compute#instance (gcloud compute
// instances list/describe): its first network interface's networkIP.
func (im *importer) instance(src string, n *yaml.Node) {
	name := scalar(get(n, "name"))
	zone := config.RefName(scalar(get(n, "zone")))
	ip := ""
	if nics := get(n, "networkInterfaces"); nics != nil && nics.Kind == yaml.SequenceNode && len(nics.Content) > 0 {
		ip = scalar(get(resolve(nics.Content[0]), "networkIP"))
	}
	im.addInstance(src, name, zone, ip)
}

func (im *importer) addInstance(src, name, zone, ip string) {
	if name == "" || ip == "" {
		return
	}
	a := address{ip: ip, src: src}
	im.instances[zone+"/"+name] = a
	im.instances[name] = a
}

// endpointList reads one group's member list.
func (im *importer) endpointList(e Endpoints) error {
	if e.Group == "" {
		return fmt.Errorf("%s: no group name; write --endpoints GROUP[@ZONE]=FILE", e.Name)
	}
	docs, err := documents(e.Source)
	if err != nil {
		return err
	}
	var items []*yaml.Node
	for _, d := range docs {
		if d.Kind == yaml.SequenceNode {
			items = append(items, d.Content...)
		} else {
			items = append(items, d)
		}
	}
	lg := listedGroup{zone: e.Zone, src: e.Name}
	for i, item := range items {
		item = resolve(item)
		where := fmt.Sprintf("%s[%d]", e.Name, i)
		if item.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: want a list entry (a mapping), got %s; give the JSON of list-network-endpoints or list-instances unchanged", where, kindName(item))
		}
		switch memberKind(item) {
		case "networkEndpoint":
			lg.coll = "networkEndpointGroups"
			ep := resolve(get(item, "networkEndpoint"))
			p := &pruner{im: im, src: e.Name}
			if out := p.prune(ep, reflect.TypeFor[config.NetworkEndpoint](), fmt.Sprintf("networkEndpointGroups[%s].endpoints[%d]", e.Group, i), false); out != nil {
				im.endpoints[e.Group] = append(im.endpoints[e.Group], out)
			}
		case "member":
			lg.coll = "instanceGroups"
			link := scalar(get(item, "instance"))
			im.members[e.Group] = append(im.members[e.Group], member{name: config.RefName(link), zone: zoneOfLink(link)})
			if np := get(item, "namedPorts"); np != nil && im.memberPorts[e.Group] == nil {
				im.memberPorts[e.Group] = np
			}
		case "instance":
			// instances list output passed as a member list: take the
			// addresses and the members at once.
			lg.coll = "instanceGroups"
			im.instance(e.Name, item)
			im.members[e.Group] = append(im.members[e.Group], member{name: scalar(get(item, "name")), zone: config.RefName(scalar(get(item, "zone")))})
		default:
			return fmt.Errorf("%s: not an entry of list-network-endpoints ({networkEndpoint: {...}}) or instance-groups list-instances ({instance: LINK, status: ...}) output", where)
		}
	}
	if _, dup := im.listed[e.Group]; dup {
		return fmt.Errorf("%s: group %s is given twice with --endpoints; give each group's list once", e.Name, e.Group)
	}
	im.listed[e.Group] = lg
	im.order = append(im.order, e.Group)
	return nil
}

// memberKind classifies an entry of a member list: networkEndpoint
// (list-network-endpoints), member (list-instances, which may carry
// namedPorts too) or instance (instances list).
func memberKind(n *yaml.Node) string {
	switch {
	case get(n, "networkEndpoint") != nil:
		return "networkEndpoint"
	case get(n, "instance") != nil:
		return "member"
	case get(n, "networkInterfaces") != nil:
		return "instance"
	}
	return ""
}

// zoneOfLink returns the zone segment of a link (…/zones/Z/…), or "".
func zoneOfLink(link string) string { return linkSegment(link, "zones") }

// groupRef is a backend's reference to a group.
type groupRef struct{ coll, zone, src, service, link string }

// groups completes the network endpoint and instance groups: members from
// lists, addresses from instances, zones from references, and a stub for
// every group a backend service names but no describe output gave.
func (im *importer) groups(o Options) {
	refs := map[string]groupRef{}
	var refOrder []string
	ports := map[string]int{} // group → a backend service's port, for namedPorts
	portNames := map[string]string{}
	for _, r := range im.resources {
		if r.coll != "backendServices" {
			continue
		}
		port, _ := intValue(get(r.node, "port"))
		portName := scalar(get(r.node, "portName"))
		for _, b := range seq(get(r.node, "backends")) {
			link := scalar(get(b, "group"))
			name := config.RefName(link)
			if name == "" {
				continue
			}
			coll := refCollectionOf(link)
			if _, ok := refs[name]; !ok {
				refs[name] = groupRef{coll: coll, zone: zoneOfLink(link), src: r.src, service: r.name, link: link}
				refOrder = append(refOrder, name)
			}
			if port > 0 && portName != "" {
				ports[name], portNames[name] = port, portName
			}
		}
	}
	have := map[string]*resource{}
	for _, r := range im.resources {
		if r.coll == "networkEndpointGroups" || r.coll == "instanceGroups" {
			have[r.name] = r
		}
	}
	// Stubs: groups known only from a list or a reference.
	for _, name := range append(slices.Clone(im.order), refOrder...) {
		if have[name] != nil {
			continue
		}
		lg, listed := im.listed[name]
		ref := refs[name]
		coll := lg.coll
		if coll == "" {
			coll = ref.coll
		}
		if coll != "networkEndpointGroups" && coll != "instanceGroups" {
			src := lg.src
			if src == "" {
				src = ref.src
			}
			im.note(src, "group "+name, "cannot tell whether it is a network endpoint group or an instance group (its list is empty and no backend service links to it); not imported")
			continue
		}
		zone := lg.zone
		if zone == "" {
			zone = ref.zone
		}
		src := lg.src
		if !listed {
			src = ref.src
		}
		r := im.stub(coll, name, zone, src, ref.link)
		have[name] = r
	}
	for _, r := range im.resources {
		switch r.coll {
		case "networkEndpointGroups":
			im.negMembers(r, o)
		case "instanceGroups":
			if lg, ok := im.listed[r.name]; ok && lg.coll == "networkEndpointGroups" {
				im.note(lg.src, "instanceGroups["+r.name+"]", "the list given for this instance group is a network endpoint group's list-network-endpoints output; ignored")
			}
			im.instanceGroup(r, ports[r.name], portNames[r.name])
		}
	}
}

// instanceGroup fills in the instances and named ports of an instance
// group.
func (im *importer) instanceGroup(r *resource, port int, portName string) {
	zone := scalar(get(r.node, "zone"))
	path := "instanceGroups[" + r.name + "]"
	if get(r.node, "namedPorts") == nil {
		switch {
		case im.memberPorts[r.name] != nil:
			p := &pruner{im: im, src: r.src}
			if np := p.prune(im.memberPorts[r.name], reflect.TypeFor[[]config.NamedPort](), path+".namedPorts", false); np != nil {
				set(r.node, "namedPorts", np)
			}
		case port > 0:
			np := &yaml.Node{Kind: yaml.MappingNode}
			set(np, "name", str(portName))
			set(np, "port", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: fmt.Sprint(port)})
			set(r.node, "namedPorts", &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{np}})
			im.note(r.src, path+".namedPorts", "not in the input: took %s: %d from a backend service's portName and port; give `gcloud compute instance-groups describe` output to carry the group's own", portName, port)
		default:
			im.note(r.src, path+".namedPorts", "not in the input and no backend service gives a port: give `gcloud compute instance-groups describe` output")
		}
	}
	members, ok := im.members[r.name]
	if !ok {
		if get(r.node, "instances") == nil {
			im.note(r.src, path+".instances", "no instances: pass `gcloud compute instance-groups list-instances %s --zone=ZONE --format=json` as --endpoints %s=FILE, and `gcloud compute instances list --format=json` for their addresses", r.name, r.name)
		}
		return
	}
	var out []*yaml.Node
	for _, m := range members {
		z := m.zone
		if z == "" {
			z = zone
		}
		a, ok := im.instances[z+"/"+m.name]
		if !ok {
			a, ok = im.instances[m.name]
		}
		if !ok {
			im.note(r.src, path+".instances["+m.name+"]", "no address: the instance is not in any `gcloud compute instances list --format=json` output (or terraform google_compute_instance) given; not imported")
			continue
		}
		in := &yaml.Node{Kind: yaml.MappingNode}
		set(in, "name", str(m.name))
		set(in, "ipAddress", str(a.ip))
		out = append(out, in)
	}
	if len(out) > 0 {
		set(r.node, "instances", &yaml.Node{Kind: yaml.SequenceNode, Content: out})
	}
}

// refCollectionOf returns the collection segment of a group link.
func refCollectionOf(link string) string {
	i := strings.LastIndexByte(link, '/')
	if i < 0 {
		return ""
	}
	return config.RefName(link[:i])
}

// render writes the config.
func (im *importer) render(o Options) ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	byColl, names := im.collect()
	im.checkPolicyRefs(names["securityPolicies"])
	spillway, placeholder := im.serverlessMapping(o)
	if spillway != nil {
		set(root, "spillway", spillway)
	}
	for _, c := range collections() {
		if items := byColl[c.name]; len(items) > 0 {
			set(root, c.name, &yaml.Node{Kind: yaml.SequenceNode, Content: items})
		}
	}
	template, err := im.frontend(root, o, names["urlMaps"])
	if err != nil {
		return nil, err
	}
	plain(root)
	if spillway != nil {
		root.Content[0].HeadComment = serverlessComment(placeholder)
	}
	root.Style = 0
	root.HeadComment = im.header(o)
	root.FootComment = template
	if len(root.Content) == 0 {
		// An empty mapping would be written as {}: write the comments only.
		return []byte(commentLines(root.HeadComment) + "\n" + commentLines(template) + "\n"), nil
	}
	return encodeYAML(root)
}

// collect groups the resources by collection, first one of a name kept
// (a later one is noted), and returns the names seen per collection with
// where each came from.
func (im *importer) collect() (byColl map[string][]*yaml.Node, names map[string]map[string]string) {
	byColl, names = map[string][]*yaml.Node{}, map[string]map[string]string{}
	for _, r := range im.resources {
		if names[r.coll] == nil {
			names[r.coll] = map[string]string{}
		}
		if first, dup := names[r.coll][r.name]; dup {
			im.note(r.src, fmt.Sprintf("%s[%s]", r.coll, r.name), "also given in %s; the first one is kept", first)
			continue
		}
		names[r.coll][r.name] = r.src
		byColl[r.coll] = append(byColl[r.coll], nameFirst(r.node))
	}
	return byColl, names
}

// frontend adds the frontend --frontend asks for to root, or returns the
// commented template that tells how to add one.
func (im *importer) frontend(root *yaml.Node, o Options, urlMapNames map[string]string) (template string, err error) {
	urlMaps := slices.Sorted(maps.Keys(urlMapNames))
	for _, r := range im.resources {
		if r.coll == "urlMaps" {
			urlMaps = []string{r.name} // the first, in input order
			break
		}
	}
	if o.Frontend == "" {
		um := "URL_MAP"
		if len(urlMaps) > 0 {
			um = urlMaps[0]
		}
		region := "us-central1"
		for _, r := range im.resources {
			if z := scalar(get(r.node, "zone")); z != "" {
				region = config.RegionOfZone(z) // the first group's, as a guess
				break
			}
		}
		return fmt.Sprintf("frontends (a Spillway extension: a forwarding rule plus a target proxy in\nGoogle Cloud) cannot come from gcloud's exports; serve needs one. Uncomment\nand edit, or run spillway import again with --frontend ADDRESS --region REGION:\nfrontends:\n- {name: fe-http, address: \"127.0.0.1:8080\", protocol: HTTP, urlMap: %s, region: %s}", um, region), nil
	}
	if len(urlMaps) == 0 {
		return "", errors.New("--frontend: there is no URL map for the frontend to serve; give a URL map export too")
	}
	fe := &yaml.Node{Kind: yaml.MappingNode}
	set(fe, "name", str("fe-http"))
	set(fe, "address", str(o.Frontend))
	set(fe, "protocol", str("HTTP"))
	set(fe, "urlMap", str(urlMaps[0]))
	if o.Region != "" {
		set(fe, "region", str(o.Region))
	}
	set(root, "frontends", &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{fe}})
	if len(urlMapNames) > 1 {
		im.note("--frontend", "frontends[fe-http]", "the input has %d URL maps; the frontend serves the first, %s: add a frontend for each other one", len(urlMapNames), urlMaps[0])
	}
	return "", nil
}

// encodeYAML writes root as a YAML document, 2-space indented.
func encodeYAML(root *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		return nil, fmt.Errorf("writing the config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("writing the config: %w", err)
	}
	return buf.Bytes(), nil
}

// nameFirst moves a resource's name to the front, where a reader looks.
func nameFirst(n *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && i > 0 {
			kv := slices.Clone(n.Content[i : i+2])
			n.Content = slices.Delete(n.Content, i, i+2)
			n.Content = slices.Insert(n.Content, 0, kv...)
			break
		}
	}
	return n
}

func commentLines(s string) string {
	if s == "" {
		return ""
	}
	return "# " + strings.ReplaceAll(s, "\n", "\n# ")
}

// header is the comment at the top of the config.
func (im *importer) header(o Options) string {
	var b strings.Builder
	var srcs []string
	for _, f := range o.Files {
		srcs = append(srcs, f.Name)
	}
	for _, e := range o.Endpoints {
		srcs = append(srcs, e.Name)
	}
	fmt.Fprintf(&b, "Generated by spillway import from %s.\n", strings.Join(srcs, ", "))
	if len(im.dropped) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(im.dropped)) {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, im.dropped[k]))
		}
		fmt.Fprintf(&b, "Dropped (output only, bookkeeping or disabled; no effect): %s.\n", strings.Join(parts, ", "))
	}
	if len(im.notes) == 0 {
		b.WriteString("Everything else was carried.")
		return b.String()
	}
	b.WriteString("Not carried:")
	for _, n := range im.notes {
		b.WriteString("\n  " + strings.ReplaceAll(n.String(), "\n", " "))
	}
	return b.String()
}

// plain sets one layout whatever the input's: short mappings of scalars
// (an endpoint, a named port, autoCapacityDrain) on one line, everything
// else in block style, and no comments from the input.
func plain(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		n.Style = 0
		if short(n) {
			n.Style = yaml.FlowStyle
		}
	case yaml.SequenceNode:
		n.Style = 0
	case yaml.ScalarNode:
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			n.Style = 0 // the encoder quotes what needs quoting
		}
	}
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	for _, c := range n.Content {
		plain(c)
	}
}

// short reports whether mapping n holds at most four scalars, 72
// characters in all, which read well on one line.
func short(n *yaml.Node) bool {
	if len(n.Content) > 8 {
		return false
	}
	size := 0
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return false
		}
		size += len(c.Value) + 2
	}
	return size <= 72
}

// checkPolicyRefs drops a backend service's reference to a security
// policy the input does not hold, saying so: the config would not load
// with it, and the policy is then not enforced.
func (im *importer) checkPolicyRefs(policies map[string]string) {
	for _, r := range im.resources {
		if r.coll != "backendServices" {
			continue
		}
		for _, key := range []string{"securityPolicy", "edgeSecurityPolicy"} {
			name := scalar(get(r.node, key))
			if name == "" || policies[name] != "" {
				continue
			}
			del(r.node, key)
			im.note(r.src, fmt.Sprintf("backendServices[%s].%s", r.name, key), "Cloud Armor policy %s is not in the input, so it is not enforced: give its export too (gcloud compute security-policies export %s --file-name %s.yaml)", name, name, name)
		}
	}
}

// del removes key from mapping n.
func del(n *yaml.Node, key string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content = append(n.Content[:i], n.Content[i+2:]...)
			return
		}
	}
}

// get returns the value of key in mapping n, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := resolve(n.Content[i+1])
			if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
				return nil
			}
			return v
		}
	}
	return nil
}

// set sets key in mapping n, replacing a value already there.
func set(n *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content[i+1] = v
			return
		}
	}
	n.Content = append(n.Content, str(key), v)
}

// str is a string scalar.
func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// scalar returns the value of a scalar node, or "".
func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// seq returns the items of a sequence node (resolved), or nil.
func seq(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = resolve(c)
	}
	return out
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return fmt.Sprintf("%q", n.Value)
}
