package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Load reads the configuration file at path and parses it with Parse.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes a YAML or JSON configuration strictly and validates it.
// file names the source in error messages. On failure the error is an
// Errors value listing up to 20 problems with file, line, column, field
// path (elements named, see FieldError.Path), a fix and the source line
// (for Explain), a mistake repeated in several list elements reported
// once with its other places; decoding problems (unknown fields, wrong types, duplicate keys) are
// reported without validating, because a half-decoded file would only add
// follow-on noise. Parse does not fill in defaults: absent fields stay at
// their zero value (see defaults.go).
func Parse(data []byte, file string) (*Config, error) {
	cfg := &Config{}
	d := &decoder{file: file, pos: map[string]position{}, budget: aliasBudget}
	d.document(data, cfg)
	if len(d.errs) > 0 {
		errs := sortAndCap(d.errs)
		newNamer(cfg).errors(errs)
		return nil, withSource(errs, data)
	}
	cfg.File = file
	shortenResourceNames(cfg)
	if errs := validate(cfg, d.pos); len(errs) > 0 {
		return nil, withSource(errs, data)
	}
	return cfg, nil
}

// withSource sets each error's Source from data, its line, unless it has
// one (a syntax error's shows the line before it too).
func withSource(es Errors, data []byte) Errors {
	lines := strings.Split(string(data), "\n")
	for _, e := range es {
		if e.Line < 1 || e.Line > len(lines) {
			continue
		}
		if e.Source == nil {
			e.Source = []string{strings.TrimRight(lines[e.Line-1], "\r")}
		}
	}
	return es
}

// shortenResourceNames reduces the full resource names that describe
// writes for networkservices, networksecurity and certificatemanager
// resources (name: projects/P/locations/global/serviceLbPolicies/NAME) to
// NAME, so that such output loads as it is. A name whose collection is not
// the list's own is left alone, for validation to report.
func shortenResourceNames(cfg *Config) {
	shorten := func(name *string, collection string) {
		if strings.Contains(*name, "/") && refCollection(*name) == collection {
			*name = RefName(*name)
		}
	}
	for i := range cfg.ServiceLbPolicies {
		shorten(&cfg.ServiceLbPolicies[i].Name, "serviceLbPolicies")
	}
	for i := range cfg.ServerTLSPolicies {
		shorten(&cfg.ServerTLSPolicies[i].Name, "serverTlsPolicies")
	}
	for i := range cfg.TrustConfigs {
		shorten(&cfg.TrustConfigs[i].Name, "trustConfigs")
	}
	for i := range cfg.SslCertificates {
		shorten(&cfg.SslCertificates[i].Name, "sslCertificates")
	}
}

// aliasBudget bounds how many values one Parse decodes through aliases
// and merge keys, so that a small file of nested aliases ("billion
// laughs") cannot make Parse run for ever. Values written out in the file
// do not count: the file's size bounds them.
const aliasBudget = 100_000

// position is where a field was written.
type position struct{ line, col int }

// decoder walks a yaml.Node tree against Go types, strictly.
type decoder struct {
	file   string
	errs   Errors
	pos    map[string]position // field path → position of its key or item
	budget int                 // values left to decode through aliases
	// expanding is > 0 while decoding the target of an alias or merge key.
	expanding int
	// merging holds the mappings whose merge keys are being expanded, to
	// detect cycles (a: &a {<<: *a}).
	merging []*yaml.Node
}

// spend takes one value from the alias budget and reports whether any
// was left; it reports the error once, when the budget runs out.
func (d *decoder) spend(n *yaml.Node, path string) bool {
	if d.budget--; d.budget >= 0 {
		return true
	}
	if d.budget == -1 {
		d.errorf(n, path, "write the values out instead of nesting aliases",
			"the document expands to too many values through aliases (more than %d)", aliasBudget)
	}
	return false
}

func (d *decoder) errorf(n *yaml.Node, path, fix, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	e := &FieldError{File: d.file, Path: path, Msg: fmt.Sprintf(format, args...), Fix: fix}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// document decodes the single YAML document in data into cfg.
func (d *decoder) document(data []byte, cfg *Config) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) {
			d.syntaxError(data, err)
		}
		return // an empty file is an empty configuration
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.errorf(&extra, "", "keep one configuration per file, or merge the documents",
			"the file holds more than one YAML document (a second one starts here)")
		return
	case !errors.Is(err, io.EOF):
		d.syntaxError(data, err)
		return
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return
		}
		root = root.Content[0]
	}
	d.pos[""] = position{root.Line, root.Column}
	d.value(root, reflect.ValueOf(cfg).Elem(), "")
}

// syntaxError turns a YAML parser error ("yaml: line 3: did not find …")
// into a FieldError at the line and column where the file stops being
// YAML (see locateSyntaxError; yaml.v3's own line is often that of the
// enclosing collection's start).
func (d *decoder) syntaxError(data []byte, err error) {
	msg := bareMessage(err.Error())
	line, col := locateSyntaxError(data, err)
	e := &FieldError{File: d.file, Line: line, Column: col, Msg: "invalid YAML: " + msg}
	// The line before shows the indentation the culprit breaks.
	lines := strings.Split(string(data), "\n")
	for i := max(line-2, 0); i < line && i < len(lines); i++ {
		e.Source = append(e.Source, strings.TrimRight(lines[i], "\r"))
	}
	if len(e.Source) > 0 {
		e.Column, e.Fix = syntaxFix(msg, e.Source[len(e.Source)-1], col)
	}
	d.errs = append(d.errs, e)
}

// syntaxFix says how to fix the YAML syntax error msg found at column
// col of line text, and moves the column to the culprit's start: the
// token before a space that decided the error, the line's first token
// where its indentation is wrong, the key before the ':' where a ','
// was missing.
func syntaxFix(msg, text string, col int) (int, string) {
	const indent = "indent this line as its siblings are: the keys of one mapping, and the items of one list, start in the same column"
	line := []rune(text)
	at := min(col, len(line)) - 1 // 0-based; -1 for an empty line
	for at > 0 && (line[at] == ' ' || line[at] == '\t') {
		at--
	}
	first := firstNonBlank([]byte(text))
	switch {
	case indentationError(msg):
		return first, indent
	case msg == "mapping values are not allowed in this context":
		// "key: value" whose key is the line's first token, indented
		// deeper than the line above: YAML reads it as more of the value
		// above, where a ':' cannot follow. Else a plain value holds ": ".
		if key, _, ok := strings.Cut(string(line[first-1:]), ":"); ok && at+1 == first+utf8.RuneCountInString(key) {
			return first, "this line is indented deeper than the keys above it, so YAML reads it as more of the value above: indent it as its siblings are"
		}
		return at + 1, `quote the value: a plain value cannot hold ": " (e.g. description: "a: b")`
	case strings.Contains(msg, "tab character"):
		return at + 1, "indent with spaces: YAML does not allow tabs in indentation"
	case strings.HasPrefix(msg, "did not find expected ','") && at > 0 && line[at] == ':':
		return tokenStart(line, at-1) + 1, "put a ',' between two entries, and close each '[' with ']' and '{' with '}'"
	}
	return at + 1, "check indentation, quoting and brackets near this line"
}

// tokenStart is the 0-based start of the token that ends at or before
// line[i] (spaces skipped): a quoted string, or a run of characters up to
// a space or a flow indicator.
func tokenStart(line []rune, i int) int {
	for i > 0 && line[i] == ' ' {
		i--
	}
	if q := line[i]; q == '"' || q == '\'' {
		for j := i - 1; j >= 0; j-- {
			if line[j] == q {
				return j
			}
		}
		return i
	}
	for i > 0 && !strings.ContainsRune(" \t,[]{}", line[i-1]) {
		i--
	}
	return i
}

// value decodes n into v (which must be settable); path is v's field path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.errorf(n, path, "define the anchor before using it", "alias to an unknown anchor")
			return
		}
		d.expanding++
		defer func() { d.expanding-- }()
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
	}
	if d.expanding > 0 && !d.spend(n, path) {
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // null means "not set", as in JSON exports
	}
	if v.Type() == reflect.TypeFor[Ignored]() {
		return // any content: see Ignored
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		d.value(n, elem.Elem(), path)
		v.Set(elem)
	case reflect.Struct:
		d.structValue(n, v, path)
	case reflect.Slice:
		d.sliceValue(n, v, path)
	case reflect.Map:
		d.mapValue(n, v, path)
	default:
		d.scalarValue(n, v, path)
	}
}

// sliceValue decodes sequence n into slice v.
func (d *decoder) sliceValue(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.typeError(n, path, v.Type())
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.pos[p] = position{item.Line, item.Column}
		d.value(item, s.Index(i), p)
	}
	v.Set(s)
}

// scalarValue decodes scalar n into v, a string, bool, integer or float.
func (d *decoder) scalarValue(n *yaml.Node, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.typeError(n, path, v.Type())
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.typeError(n, path, v.Type())
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		i, ok := scalarInt(n)
		if !ok {
			d.typeError(n, path, v.Type())
			return
		}
		if v.OverflowInt(i) {
			d.errorf(n, path, "use a smaller number", "%s does not fit in a %d-bit integer", n.Value, v.Type().Bits())
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, ok := scalarFloat(n)
		if !ok {
			d.typeError(n, path, v.Type())
			return
		}
		v.SetFloat(f)
	default:
		// Unreachable for the types in types.go; fail loudly for new ones.
		panic(fmt.Sprintf("config: decoder does not support %s at %s", v.Type(), path))
	}
}

// scalarInt reads an integer from a plain number, a quoted decimal string
// (Google's REST JSON writes int64 as "1024") or a float with no fraction.
func scalarInt(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false
	}
	switch n.ShortTag() {
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return 0, false
		}
		return i, true
	case "!!str":
		i, err := strconv.ParseInt(strings.TrimSpace(n.Value), 10, 64)
		return i, err == nil
	case "!!float":
		f, ok := scalarFloat(n)
		if !ok || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

// scalarFloat reads a finite number, plain or quoted.
func scalarFloat(n *yaml.Node) (float64, bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false
	}
	var f float64
	switch n.ShortTag() {
	case "!!int", "!!float":
		if err := n.Decode(&f); err != nil {
			return 0, false
		}
	case "!!str":
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(n.Value), 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return f, !math.IsInf(f, 0) && !math.IsNaN(f)
}

// typeError reports that n cannot be decoded into a value of type t.
func (d *decoder) typeError(n *yaml.Node, path string, t reflect.Type) {
	want, fix := describeType(t)
	d.errorf(n, path, fix, "want %s, got %s", want, describeNode(n))
}

// describeType names a Go type for a YAML author, with an example.
func describeType(t reflect.Type) (want, fix string) {
	switch t.Kind() {
	case reflect.Struct:
		return "a mapping of fields", "write the fields indented under the key, one `name: value` per line"
	case reflect.Map:
		return "a mapping", "write `key: value` pairs indented under the key"
	case reflect.Slice:
		return "a list", "write each item on its own line starting with `- `, or as [a, b]"
	case reflect.String:
		return "a string", "write a single value, quoted if it contains special characters"
	case reflect.Bool:
		return "true or false", "write true or false, without quotes"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "an integer", "write a whole number such as 30"
	case reflect.Float64:
		return "a number", "write a number such as 0.5"
	}
	return t.String(), ""
}

// describeNode renders what the author wrote, briefly.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(v)
	}
	return v
}

// structValue decodes a mapping into the struct v, field by field, using
// the names of the json tags.
func (d *decoder) structValue(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, path, v.Type())
		return
	}
	names, index := structFields(v.Type())
	seen := map[string]int{}
	for _, kv := range d.entries(n, path) {
		key := kv.key.Value
		i, ok := index[key]
		if !ok && path == "" && strings.HasPrefix(key, "x-") {
			continue // top-level x-… keys hold YAML anchors; see Config
		}
		if !ok {
			d.unknownField(kv.key, path, key, names)
			continue
		}
		p := joinPath(path, key)
		if !d.firstTime(seen, kv, key, p) {
			continue
		}
		d.entryValue(kv, v.FieldByIndex(i), p)
	}
}

// structFields lists the decoded names of struct type t's fields, in
// order, with each one's index. The fields of an embedded struct without
// a json name (OutputOnly) count as t's own, after t's direct fields, and
// a direct field shadows an embedded one of the same name, as in
// encoding/json.
func structFields(t reflect.Type) (names []string, index map[string][]int) {
	index = map[string][]int{}
	var embedded []int
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && strings.Split(f.Tag.Get("json"), ",")[0] == "" {
			embedded = append(embedded, i)
			continue
		}
		name := jsonName(f)
		if name == "" {
			continue
		}
		names = append(names, name)
		index[name] = []int{i}
	}
	for _, i := range embedded {
		inner, innerIndex := structFields(t.Field(i).Type)
		for _, name := range inner {
			if _, shadowed := index[name]; shadowed {
				continue
			}
			names = append(names, name)
			index[name] = append([]int{i}, innerIndex[name]...)
		}
	}
	return names, index
}

// jsonName is the decoded name of a struct field: the json tag before the
// comma, or "" for fields that are not decoded.
func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}

// unknownField reports a key that the struct at path does not have.
func (d *decoder) unknownField(key *yaml.Node, path, name string, known []string) {
	if c := closest(name, known); c != "" {
		d.errorf(key, path, fmt.Sprintf("did you mean %q?", c), "unknown field %q", name)
		return
	}
	if unsupportedGoogleField(name) {
		d.errorf(key, path, "remove it", "field %q is a Google Cloud field that Spillway does not support yet", name)
		return
	}
	d.errorf(key, path, "remove it; fields here are: "+strings.Join(known, ", "), "unknown field %q", name)
}

// unsupportedGoogleField reports whether name is a field of the Google
// Cloud resources that Spillway knowingly does not implement, so that
// pasted exports get a clearer message than "unknown field".
func unsupportedGoogleField(name string) bool {
	switch name {
	case "corsPolicy",
		"circuitBreakers", "compressionMode", "ipAddressSelectionPolicy", "maxStreamDuration",
		"customErrorResponsePolicy", "defaultCustomErrorResponsePolicy", "metadataFilters",
		"strongSessionAffinityCookie", "localityLbPolicies", "customMetrics", "subsetting",
		"tlsSettings", "sourceRegions", "sslHealthCheck",
		"maxInFlightRequests", "maxInFlightRequestsPerInstance", "maxInFlightRequestsPerEndpoint",
		"trafficDuration", "cachePolicy":
		return true
	}
	return false
}

// entry is one key/value pair of a mapping; merged marks pairs that come
// from a YAML merge key (<<), which explicit keys override.
type entry struct {
	key, value *yaml.Node
	merged     bool
}

// entries lists the pairs of mapping n with merge keys (<<: *anchor)
// expanded; explicit keys come first so that they win over merged ones.
func (d *decoder) entries(n *yaml.Node, path string) []entry {
	var explicit, merged []entry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergeEntries(val, path)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "use plain names as keys", "want a field name, got %s as a key", describeNode(k))
			continue
		}
		explicit = append(explicit, entry{key: k, value: val})
	}
	return append(explicit, merged...)
}

// mergeEntries expands the value of a merge key: a mapping, an alias to
// one, or a list of those.
func (d *decoder) mergeEntries(n *yaml.Node, path string) []entry {
	if !d.spend(n, path) {
		return nil
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	var out []entry
	switch n.Kind {
	case yaml.MappingNode:
		if slices.Contains(d.merging, n) {
			d.errorf(n, path, "do not merge a mapping into itself", "merge key refers back to the mapping that contains it")
			return nil
		}
		d.merging = append(d.merging, n)
		defer func() { d.merging = d.merging[:len(d.merging)-1] }()
		for _, e := range d.entries(n, path) {
			if !d.spend(n, path) {
				return out // chains of merges copy entries: bound them too
			}
			e.merged = true
			out = append(out, e)
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			out = append(out, d.mergeEntries(item, path)...)
		}
	default:
		d.errorf(n, path, "merge a mapping: <<: *anchor", "want a mapping to merge, got %s", describeNode(n))
	}
	return out
}

// entryValue decodes the value of a mapping entry; values that come from
// a merge key count against the alias budget.
func (d *decoder) entryValue(kv entry, v reflect.Value, path string) {
	if kv.merged {
		d.expanding++
		defer func() { d.expanding-- }()
	}
	d.value(kv.value, v, path)
}

// mapValue decodes a mapping into a map with string keys.
func (d *decoder) mapValue(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, path, v.Type())
		return
	}
	m := reflect.MakeMap(v.Type())
	seen := map[string]int{}
	for _, kv := range d.entries(n, path) {
		key := kv.key.Value
		p := joinPath(path, key)
		if !d.firstTime(seen, kv, key, p) {
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.entryValue(kv, elem, p)
		m.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), elem)
	}
	v.Set(m)
}

// joinPath appends a field name to a path.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// firstTime records that key was set at kv and reports whether this is its
// first occurrence in the mapping; a repeated key is an error, unless it
// came from a YAML merge (<<), where the later value legitimately yields.
func (d *decoder) firstTime(seen map[string]int, kv entry, key, p string) bool {
	if first, dup := seen[key]; dup {
		if !kv.merged {
			d.errorf(kv.key, p, fmt.Sprintf("keep only one %q", key), "duplicate key (first set on line %d)", first)
		}
		return false
	}
	seen[key] = kv.key.Line
	d.pos[p] = position{kv.key.Line, kv.key.Column}
	return true
}
