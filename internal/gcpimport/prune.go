package gcpimport

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spillwaylb/spillway/internal/config"
)

// outputOnly reports whether a top-level field of a resource is one that
// Google Cloud sets and a config has no use for: dropped silently (and
// counted in the header).
func outputOnly(name string) bool {
	switch name {
	case "id", "kind", "selfLink", "selfLinkWithId", "creationTimestamp", "fingerprint", "region", "ruleTupleCount", "labelFingerprint",
		"usedBy", "createTime", "updateTime", "size", "network", "subnetwork", "isManaged",
		// terraform bookkeeping
		"project", "create_time", "update_time", "generated_id", "map_id", "timeouts", "effective_labels", "terraform_labels", "location", "self_link", "creation_timestamp":
		return true
	}
	return false
}

// pruner walks a resource against the config type it becomes.
type pruner struct {
	im  *importer
	src string
	// tf marks terraform attributes: snake_case names, nested blocks as
	// lists, and every unset attribute written as "", 0, false, [] or null.
	tf bool
	// name is the resource's name.
	name string
}

// prune returns n reduced to what type t accepts, or nil when nothing is
// left. top marks a resource's own mapping, where output-only fields are.
func (p *pruner) prune(n *yaml.Node, t reflect.Type, path string, top bool) *yaml.Node {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[config.Ignored]():
		return nil
	case t.Kind() == reflect.Struct:
		if p.tf && n.Kind == yaml.SequenceNode {
			// A terraform nested block: a list of at most one.
			switch len(n.Content) {
			case 0:
				return nil
			case 1:
				return p.prune(n.Content[0], t, path, top)
			}
			p.im.note(p.src, path, "%d blocks where Spillway takes one; kept the first", len(n.Content))
			return p.prune(n.Content[0], t, path, top)
		}
		if n.Kind != yaml.MappingNode {
			return n // config.Parse reports the type error
		}
		return p.mapping(n, t, path, top)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return n
		}
		out := &yaml.Node{Kind: yaml.SequenceNode, Style: n.Style}
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			if name := scalar(get(resolve(item), "name")); name != "" {
				ip = fmt.Sprintf("%s[%s]", path, name)
			}
			if v := p.prune(item, t.Elem(), ip, false); v != nil {
				out.Content = append(out.Content, v)
			}
		}
		if len(out.Content) == 0 {
			return nil
		}
		return out
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
			return nil
		}
		return n
	}
	if p.tf && zero(n) && !strings.HasSuffix(path, ".capacityScaler") && !strings.HasSuffix(path, ".priority") &&
		!strings.HasSuffix(path, ".requestCoalescing") {
		return nil // terraform writes every unset attribute
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && isInt(t.Kind()) && strings.Contains(path, ".cdnPolicy.") {
		// Google's int64 fields are strings in JSON: gcloud writes
		// signedUrlCacheMaxAgeSec: '3600', which config reads as an int.
		if _, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			c := *n
			c.Tag, c.Style = "!!int", 0
			return &c
		}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == "" {
		return nil // gcloud writes description: '' for "not set"
	}
	return n
}

// mapping prunes a mapping against struct type t.
func (p *pruner) mapping(n *yaml.Node, t reflect.Type, path string, top bool) *yaml.Node {
	names, index := fields(t)
	out := &yaml.Node{Kind: yaml.MappingNode, Style: n.Style}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, resolve(n.Content[i+1])
		if top && outputOnly(key) && !(key == "region" && t == reflect.TypeFor[config.NetworkEndpointGroup]()) {
			// A NEG's region is where a serverless (or other regional)
			// group is, not output only: the config needs it.
			if !zero(val) {
				p.im.dropped[key]++
			}
			continue
		}
		if p.special(out, t, key, val, path) {
			continue
		}
		name := key
		if p.tf {
			name = restName(key, names)
		}
		idx, ok := index[name]
		if !ok || (top && isOutputOnlyField(t, idx)) {
			if !zero(val) && !offByDefault(name, val) {
				p.im.note(p.src, path+"."+name, "Spillway does not support this field; dropped (it behaves as if the field were unset)")
			}
			continue
		}
		if v := p.prune(val, t.FieldByIndex(idx).Type, path+"."+name, false); v != nil {
			set(out, name, v)
		}
	}
	if len(out.Content) == 0 {
		return nil
	}
	return out
}

// offByDefault reports whether an unsupported field holds the value
// that means "off", so dropping it changes nothing.
func offByDefault(name string, val *yaml.Node) bool {
	return name == "compressionMode" && scalar(val) == "DISABLED"
}

// isOutputOnlyField reports whether the field at idx is in an embedded
// config.OutputOnly (a field such as selfLinkWithId not caught above).
func isOutputOnlyField(t reflect.Type, idx []int) bool {
	return len(idx) > 1 && t.Field(idx[0]).Type == reflect.TypeFor[config.OutputOnly]()
}

// special handles the fields of features Spillway does not have: dropped
// silently when disabled, reported when enabled. It reports whether it
// handled key.
func (p *pruner) special(out *yaml.Node, t reflect.Type, key string, val *yaml.Node, path string) bool {
	if p.tf {
		key = snakeToCamel(key)
	}
	block := val
	if p.tf && val.Kind == yaml.SequenceNode && len(val.Content) > 0 {
		block = resolve(val.Content[0])
	}
	switch t {
	case reflect.TypeFor[config.BackendService]():
		switch key {
		case "iap":
			if truthy(get(block, "enabled")) {
				p.im.note(p.src, path+".iap", "Identity-Aware Proxy is on: Spillway has no IAP, so the backends would be reachable without the identity check (put an authenticating proxy in front, or keep this service in Google Cloud)")
			} else if !isNull(val) {
				p.im.dropped["iap (enabled: false)"]++
			}
			return true
		case "securityPolicy", "edgeSecurityPolicy":
			// Carried by name; render drops it, with a note, when the
			// input does not hold the policy.
			if !zero(val) {
				set(out, key, str(config.RefName(scalar(val))))
			}
			return true
		case "logConfig":
			// Carried: it decides what serve's access log keeps. Built
			// here because enable: false is a Terraform zero value the
			// generic pruning would drop, and without it the service
			// would be logged at the default rate.
			if !isNull(val) {
				set(out, "logConfig", logConfigNode(block))
			}
			return true
		case "connectionDrainingTimeoutSec":
			if v, ok := intValue(val); ok && v > 0 {
				cd := &yaml.Node{Kind: yaml.MappingNode}
				set(cd, "drainingTimeoutSec", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)})
				set(out, "connectionDraining", cd)
			}
			return true
		}
	case reflect.TypeFor[config.BackendBucket]():
		return p.bucketField(out, key, val, path)
	case reflect.TypeFor[config.HealthCheck]():
		if key == "logConfig" {
			p.logConfig(block, val, path)
			return true
		}
	case reflect.TypeFor[config.InstanceGroup]():
		if key == "instances" && p.tf {
			// terraform google_compute_instance_group: instance links.
			for _, l := range seq(val) {
				p.im.members[p.name] = append(p.im.members[p.name], member{name: config.RefName(scalar(l)), zone: zoneOfLink(scalar(l))})
			}
			return true
		}
	}
	return false
}

// logConfigNode is a backend service's logConfig as Spillway reads it:
// enable, and sampleRate when enabled (optionalMode and optionalFields
// change nothing: every log line has every field).
func logConfigNode(block *yaml.Node) *yaml.Node {
	lc := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	on := truthy(get(block, "enable"))
	set(lc, "enable", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(on)})
	if !on {
		return lc // sampleRate means nothing then (Terraform writes 0)
	}
	for _, k := range []string{"sampleRate", "sample_rate"} {
		if v := get(block, k); v != nil && scalar(v) != "" {
			set(lc, "sampleRate", &yaml.Node{Kind: yaml.ScalarNode, Value: scalar(v)})
		}
	}
	return lc
}

// logConfig prunes a health check's logConfig: Spillway writes no health
// check logs. (A backend service's is carried: it decides what serve's
// access log keeps.)
func (p *pruner) logConfig(block, val *yaml.Node, path string) {
	if truthy(get(block, "enable")) {
		p.im.note(p.src, path+".logConfig", "health check logging is on: Spillway writes no health check logs (probe results are in get-health and /metrics)")
	} else if !isNull(val) {
		p.im.dropped["logConfig (enable: false)"]++
	}
}

// fields lists the decoded names of struct t with their indexes, the
// fields of an embedded config.OutputOnly included (as package config's
// decoder reads them).
func fields(t reflect.Type) ([]string, map[string][]int) {
	var names []string
	index := map[string][]int{}
	var embedded []int
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && f.Type.Kind() == reflect.Struct && tag == "" {
			embedded = append(embedded, i)
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		names = append(names, tag)
		index[tag] = []int{i}
	}
	for _, i := range embedded {
		inner, innerIndex := fields(t.Field(i).Type)
		for _, name := range inner {
			if _, shadowed := index[name]; !shadowed {
				names = append(names, name)
				index[name] = append([]int{i}, innerIndex[name]...)
			}
		}
	}
	return names, index
}

// restName maps a terraform attribute name to the REST field of the same
// meaning among names: weighted_backend_services → weightedBackendServices,
// enable_cdn → enableCDN, and terraform's singular block names (backend,
// host_rule, path_matcher, path_rule, named_port, test) to the plural
// REST lists. A name with no match comes back camelCased.
func restName(key string, names []string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	for _, suffix := range []string{"", "s"} {
		for _, n := range names {
			if norm(n) == norm(key)+suffix {
				return n
			}
		}
	}
	return snakeToCamel(key)
}

func snakeToCamel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// zero reports whether n says "not set": null, "", 0, false, an empty
// list or mapping, or a list or mapping of nothing but those.
func zero(n *yaml.Node) bool {
	n = resolve(n)
	switch {
	case isNull(n):
		return true
	case n.Kind == yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return n.Value == ""
		case "!!bool":
			return n.Value == "false"
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			return err == nil && f == 0
		}
		return false
	case n.Kind == yaml.SequenceNode:
		for _, c := range n.Content {
			if !zero(c) {
				return false
			}
		}
		return true
	case n.Kind == yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if !zero(n.Content[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// truthy reports whether n is the boolean true.
func truthy(n *yaml.Node) bool {
	n = resolve(n)
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" && n.Value == "true"
}

// intValue reads an integer scalar (plain or quoted).
func intValue(n *yaml.Node) (int, bool) {
	if n == nil || n.Kind != yaml.ScalarNode {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64)
	if err != nil || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// bucketField handles the backend bucket fields Spillway reads
// differently: bucketName (a Cloud Storage bucket in Google Cloud, a
// local directory or a name spillway.buckets maps in Spillway: carried,
// with a note), an edge security
// policy (not supported on buckets) and compressionMode other than
// DISABLED. It reports whether it handled key.
func (p *pruner) bucketField(out *yaml.Node, key string, val *yaml.Node, path string) bool {
	switch key {
	case "bucketName":
		if b := scalar(val); b != "" {
			set(out, key, str(b))
			p.im.note(p.src, path+".bucketName", "%q is a Cloud Storage bucket: map it in spillway.buckets to an S3-compatible bucket holding its objects, or copy them to a directory (gcloud storage rsync -r gs://%s DIR) and set bucketName to DIR (docs/cdn.md)", b, b)
		}
		return true
	case "edgeSecurityPolicy":
		if !zero(val) {
			p.im.note(p.src, path+".edgeSecurityPolicy", "security policies on backend buckets are not supported yet: the bucket is served without %s", config.RefName(scalar(val)))
		}
		return true
	case "compressionMode":
		if m := scalar(val); m != "" && m != "DISABLED" {
			p.im.note(p.src, path+".compressionMode", "%s: Spillway does not compress responses; served uncompressed", m)
		}
		return true
	}
	return false
}

// cdn finishes a backend service's or bucket's Cloud CDN fields: a
// cdnPolicy with Cloud CDN off is dropped (it does nothing), and signed
// URL key names, which gcloud lists but never exports the keys of, get a
// note saying where the keys go.
func (im *importer) cdn(src, path string, out *yaml.Node) {
	on := truthy(get(out, "enableCDN")) || truthy(get(out, "enableCdn"))
	if !on {
		del(out, "enableCDN") // false: Cloud CDN off, as when unset
		del(out, "enableCdn")
	}
	pol := get(out, "cdnPolicy")
	if pol == nil {
		return
	}
	if !on {
		del(out, "cdnPolicy")
		im.dropped["cdnPolicy (Cloud CDN off)"]++
		return
	}
	if keys := seq(get(pol, "signedUrlKeyNames")); len(keys) > 0 {
		var names []string
		for _, k := range keys {
			names = append(names, scalar(k))
		}
		im.note(src, path+".cdnPolicy.signedUrlKeyNames", "signed URL keys %s are not in any export: add each under spillway.signedUrlKeys (backend, keyName, keyFile) or signed requests are refused with 403 (docs/cdn.md)", strings.Join(names, ", "))
	}
}
