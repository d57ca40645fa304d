package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Validate checks every documented range and reference of c and returns
// nil or an Errors value (up to 20 problems). Parse calls it and adds line
// numbers; call it directly for configurations built in code. Validate
// does not fill in defaults, it reads absent fields as their defaults.
func (c *Config) Validate() error {
	if errs := validate(c, nil); len(errs) > 0 {
		return errs
	}
	return nil
}

// validate checks c; pos maps field paths to where they were written (nil
// when c was not decoded from a file).
func validate(c *Config, pos map[string]position) Errors {
	v := &validator{c: c, pos: pos}
	v.index()
	v.healthChecks()
	v.serviceLbPolicies()
	v.networkEndpointGroups()
	v.instanceGroups()
	v.backendServices()
	v.backendBuckets()
	v.cdnTuning(c.Spillway)
	v.bucketMappings()
	v.urlMaps()
	v.regions()
	v.sslPolicies()
	v.serverTLSPolicies()
	v.trustConfigs()
	v.sslCertificates()
	v.frontends()
	v.tuning()
	v.bgp()
	v.dnsZones()
	v.securityPolicies()
	if len(v.errs) == 0 {
		return nil
	}
	errs := sortAndCap(v.errs)
	newNamer(c).errors(errs)
	return errs
}

// validator collects the problems of one configuration.
type validator struct {
	c    *Config
	pos  map[string]position
	errs Errors

	// Name → index, per kind, for resolving references.
	hcs, policies, negs, igs, services, buckets, urlMapNames, regionNames map[string]int
	sslPolicyNames, serverTLSPolicyNames, trustConfigNames                map[string]int
	securityPolicyNames                                                   map[string]int
}

// add records a problem at path. The position is that of path or, when
// path was not written (a missing field), of its nearest written parent.
func (v *validator) add(path, fix, format string, args ...any) {
	e := &FieldError{File: v.c.File, Path: path, Msg: fmt.Sprintf(format, args...), Fix: fix}
	for p := path; v.pos != nil; p = parentPath(p) {
		if at, ok := v.pos[p]; ok {
			e.Line, e.Column = at.line, at.col
			break
		}
		if p == "" {
			break
		}
	}
	v.errs = append(v.errs, e)
}

// parentPath strips the last ".name" or "[i]" of a field path.
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// at builds a path from a format, e.g. at("backendServices[%d].backends", i).
func at(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// index records the names of every kind; it also checks the names.
func (v *validator) index() {
	c := v.c
	v.hcs = v.names("healthChecks", "health check", "hc-web", len(c.HealthChecks), func(i int) string { return c.HealthChecks[i].Name })
	v.policies = v.names("serviceLbPolicies", "service LB policy", "policy-web", len(c.ServiceLbPolicies), func(i int) string { return c.ServiceLbPolicies[i].Name })
	v.negs = v.names("networkEndpointGroups", "network endpoint group", "neg-us-east1-b", len(c.NetworkEndpointGroups), func(i int) string { return c.NetworkEndpointGroups[i].Name })
	v.igs = v.names("instanceGroups", "instance group", "ig-us-east1-b", len(c.InstanceGroups), func(i int) string { return c.InstanceGroups[i].Name })
	v.services = v.names("backendServices", "backend service", "bs-web", len(c.BackendServices), func(i int) string { return c.BackendServices[i].Name })
	v.buckets = v.names("backendBuckets", "backend bucket", "bb-static", len(c.BackendBuckets), func(i int) string { return c.BackendBuckets[i].Name })
	v.urlMapNames = v.names("urlMaps", "URL map", "web-map", len(c.URLMaps), func(i int) string { return c.URLMaps[i].Name })
	v.regionNames = v.names("regions", "region", "us-east1", len(c.Regions), func(i int) string { return c.Regions[i].Name })
	v.sslPolicyNames = v.names("sslPolicies", "SSL policy", "tls12-modern", len(c.SslPolicies), func(i int) string { return c.SslPolicies[i].Name })
	v.serverTLSPolicyNames = v.names("serverTlsPolicies", "server TLS policy", "mtls-web", len(c.ServerTLSPolicies), func(i int) string { return c.ServerTLSPolicies[i].Name })
	v.names("sslCertificates", "SSL certificate", "cert-web", len(c.SslCertificates), func(i int) string { return c.SslCertificates[i].Name })
	v.trustConfigNames = v.names("trustConfigs", "trust config", "client-cas", len(c.TrustConfigs), func(i int) string { return c.TrustConfigs[i].Name })
	v.securityPolicyNames = v.names("securityPolicies", "security policy", "armor-web", len(c.SecurityPolicies), func(i int) string { return c.SecurityPolicies[i].Name })
	v.names("frontends", "frontend", "web", len(c.Frontends), func(i int) string { return c.Frontends[i].Name })
}

// names checks the n names of list (required, RFC 1035, unique) and
// returns name → index.
func (v *validator) names(list, what, example string, n int, name func(int) string) map[string]int {
	idx := make(map[string]int, n)
	for i := range n {
		p := at("%s[%d].name", list, i)
		nm := name(i)
		valid := v.name(p, nm, what, example)
		if nm == "" {
			continue
		}
		if first, dup := idx[nm]; dup {
			if valid {
				v.add(p, "give each "+what+" its own name",
					"%q is already the name of %s[%d]", nm, list, first)
			}
			continue
		}
		// Invalid names are indexed too, so that references to them do
		// not add a second, misleading error.
		idx[nm] = i
	}
	return idx
}

// name checks that nm is present and an RFC 1035 label; it reports
// whether nm is usable.
func (v *validator) name(path, nm, what, example string) bool {
	if nm == "" {
		v.add(path, fmt.Sprintf("give the %s a name, e.g. name: %s", what, example), "a name is required")
		return false
	}
	if !isRFC1035(nm) {
		v.add(path, fmt.Sprintf("use 1-63 lowercase letters, digits and '-', starting with a letter and not ending with '-', e.g. %q", example),
			"%q is not a valid name", nm)
		return false
	}
	return true
}

// isRFC1035 reports whether s matches [a-z]([-a-z0-9]*[a-z0-9])? and has
// at most 63 characters.
func isRFC1035(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-') {
			return false
		}
	}
	return true
}

// ref resolves a reference to one of the kinds in known, keyed by the
// collection a link names (e.g. "backendServices"). It reports problems
// at path and returns the collection and name, or "" when unresolved.
// what names the kind for messages ("backend service").
func (v *validator) ref(path, ref, what string, known map[string]map[string]int) (collection, name string) {
	name = RefName(ref)
	if name == "" {
		v.add(path, "write the name, or a link ending in /NAME", "%q does not end in a name", ref)
		return "", ""
	}
	if coll := refCollection(ref); coll != "" {
		if _, ok := known[coll]; !ok {
			colls := slices.Sorted(mapKeys(known))
			want := colls[0]
			for _, c := range colls {
				if _, ok := known[c][name]; ok {
					want = c
				}
			}
			v.add(path, fmt.Sprintf("link to …/%s/%s, or write just the name", want, name),
				"%q is a link into %s, not to %s", ref, coll, article(what))
			return "", ""
		}
		if _, ok := known[coll][name]; ok {
			return coll, name
		}
		v.unknownRef(path, name, what, coll, known[coll])
		return "", ""
	}
	var found []string
	for coll, names := range known {
		if _, ok := names[name]; ok {
			found = append(found, coll)
		}
	}
	switch len(found) {
	case 1:
		return found[0], name
	case 0:
		all := map[string]int{}
		var colls []string
		for coll, names := range known {
			colls = append(colls, coll)
			for n := range names {
				all[n] = 0
			}
		}
		slices.Sort(colls)
		v.unknownRef(path, name, what, strings.Join(colls, " or "), all)
		return "", ""
	}
	slices.Sort(found)
	v.add(path, fmt.Sprintf("write a link that names the kind, e.g. …/%s/%s", found[0], name),
		"%q is ambiguous: it names a resource in %s", name, strings.Join(found, " and "))
	return "", ""
}

// unknownRef reports a reference to a name that is not defined.
func (v *validator) unknownRef(path, name, what, where string, names map[string]int) {
	known := slices.Sorted(mapKeys(names))
	fix := didYouMean(name, known, "")
	if len(known) == 0 {
		fix = fmt.Sprintf("define a %s named %q under %s", what, name, where)
	}
	v.add(path, fix, "unknown %s %q", what, name)
}

// mapKeys returns an iterator over the keys of m.
func mapKeys[V any](m map[string]V) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// serviceRef resolves a reference to a backend service.
func (v *validator) serviceRef(path, ref string) {
	v.ref(path, ref, "backend service", map[string]map[string]int{"backendServices": v.services})
}

// intRange checks an optional integer against [lo, hi].
func (v *validator) intRange(path string, p *int, lo, hi int) {
	if p != nil {
		v.inRange(path, int64(*p), int64(lo), int64(hi))
	}
}

// inRange checks n against [lo, hi].
func (v *validator) inRange(path string, n, lo, hi int64) bool {
	if n < lo || n > hi {
		v.add(path, fmt.Sprintf("use a value between %d and %d", lo, hi), "%d is out of range", n)
		return false
	}
	return true
}

// floatRange checks an optional number against [lo, hi].
func (v *validator) floatRange(path string, p *float64, lo, hi float64) {
	if p != nil && (*p < lo || *p > hi) {
		v.add(path, fmt.Sprintf("use a value between %s and %s", fmtFloat(lo), fmtFloat(hi)), "%s is out of range", fmtFloat(*p))
	}
}

// fmtFloat renders a number the way it was most likely written.
func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// enum checks that value (when set) is one of allowed.
func (v *validator) enum(path, value string, allowed ...string) bool {
	if value == "" || slices.Contains(allowed, value) {
		return true
	}
	v.add(path, oneOf(value, allowed), "unknown value %q", value)
	return false
}

// port checks a port number (1..65535).
func (v *validator) port(path string, n int) {
	if n < 1 || n > 65535 {
		v.add(path, "use a port between 1 and 65535", "port %d is out of range", n)
	}
}

// duration checks a protobuf Duration: non-negative, nanos < 1e9.
func (v *validator) duration(path string, d *Duration) {
	if d == nil {
		return
	}
	if d.Seconds < 0 || d.Seconds > 315576000000 {
		v.add(path+".seconds", "use a value between 0 and 315576000000", "%d is out of range", d.Seconds)
	}
	if d.Nanos < 0 || d.Nanos > 999999999 {
		v.add(path+".nanos", "use a value between 0 and 999999999 (carry whole seconds into seconds)", "%d is out of range", d.Nanos)
	}
}

// setNames returns the names whose flag is true.
func setNames(names []string, flags ...bool) []string {
	var out []string
	for i, f := range flags {
		if f {
			out = append(out, names[i])
		}
	}
	return out
}

// exactlyOne checks that exactly one of the named alternatives is set;
// path is the object holding them.
func (v *validator) exactlyOne(path, what string, names []string, flags ...bool) {
	switch set := setNames(names, flags...); len(set) {
	case 1:
	case 0:
		v.add(path, "set one of "+strings.Join(names, ", "), "no %s is set", what)
	case 2:
		v.add(path, "keep exactly one of "+strings.Join(names, ", "), "%s are both set; they exclude each other", joinAnd(set))
	default:
		v.add(path, "keep exactly one of "+strings.Join(names, ", "), "%s are all set; they exclude each other", joinAnd(set))
	}
}

// article prefixes a noun with "a" or "an".
func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiouAEIOU", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

// joinAnd joins words as "a, b and c".
func joinAnd(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
