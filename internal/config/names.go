package config

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// namer renames the index selectors of field paths after the elements'
// names: backendServices[0].backends[1] becomes
// backendServices[bs-web].backends[mig-a]. It reads the configuration
// the paths are about (decoded as far as it went).
type namer struct {
	root reflect.Value
	// labels caches each list's element labels, by the list's first
	// element's address and length.
	labels map[[2]uintptr][]string
}

func newNamer(c *Config) *namer {
	return &namer{root: reflect.ValueOf(c).Elem(), labels: map[[2]uintptr][]string{}}
}

// errors renames the paths of es and of their other places, and the
// paths that their messages and fixes mention.
func (n *namer) errors(es Errors) {
	for _, e := range es {
		orig := e.Path
		e.Path = n.path(e.Path)
		for i := range e.Also {
			e.Also[i].Path = n.path(e.Also[i].Path)
		}
		e.Msg, e.Fix = n.text(e.Msg, orig), n.text(e.Fix, orig)
	}
}

// pathInText matches what may be a field path with an index in a
// message, e.g. dnsZones[0].records[4] or backends[0].
var pathInText = regexp.MustCompile(`\b[a-z][A-Za-z]*\[\d+\](?:\.[A-Za-z]+|\[\d+\])*`)

// text renames the paths in s, a message about the field at path (with
// indexes): those from the top of the configuration ("at
// dnsZones[0].records[4]"), and those relative to an element of path
// ("cannot be mixed with … of backends[0]" about
// backendServices[1].backends[2]).
func (n *namer) text(s, path string) string {
	return pathInText.ReplaceAllStringFunc(s, func(p string) string {
		list, _, _ := strings.Cut(p, "[")
		if _, index := structFields(n.root.Type()); index[list] != nil {
			return n.path(p)
		}
		i := strings.LastIndex(path, "."+list+"[")
		if i < 0 {
			return p
		}
		prefix := n.path(path[:i+1])
		if abs := n.path(path[:i+1] + p); strings.HasPrefix(abs, prefix) {
			return abs[len(prefix):]
		}
		return p
	})
}

// path renames path's index selectors where the element has a label
// (see label) that no sibling shares. A part of path that does not
// match the configuration (a map key with a dot, an index past the end)
// ends the renaming: the rest is kept as it is.
func (n *namer) path(path string) string {
	var b strings.Builder
	v := n.root
	rest := path
	for rest != "" {
		var part string
		var ok bool
		switch rest[0] {
		case '.':
			part, rest, ok = ".", rest[1:], true
		case '[':
			part, v, rest, ok = n.index(v, rest)
		default:
			part, v, rest, ok = field(v, rest)
		}
		if !ok {
			break
		}
		b.WriteString(part)
	}
	return b.String() + rest
}

// index follows "[i]…" from the list v: the selector renamed, the
// element and the rest of the path.
func (n *namer) index(v reflect.Value, rest string) (string, reflect.Value, string, bool) {
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return "", v, rest, false
	}
	i, err := strconv.Atoi(rest[1:end])
	v, ok := deref(v)
	if err != nil || !ok || v.Kind() != reflect.Slice || i < 0 || i >= v.Len() {
		return "", v, rest, false
	}
	sel := strconv.Itoa(i)
	if l := n.listLabels(v)[i]; l != "" {
		sel = l
	}
	return "[" + sel + "]", v.Index(i), rest[end+1:], true
}

// field follows "name…" from the struct or map v.
func field(v reflect.Value, rest string) (string, reflect.Value, string, bool) {
	end := strings.IndexAny(rest, ".[")
	if end < 0 {
		end = len(rest)
	}
	name := rest[:end]
	v, ok := deref(v)
	if !ok {
		return "", v, rest, false
	}
	switch v.Kind() {
	case reflect.Struct:
		_, index := structFields(v.Type())
		i, found := index[name]
		if !found {
			return "", v, rest, false
		}
		return name, v.FieldByIndex(i), rest[end:], true
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return "", v, rest, false
		}
		mv := v.MapIndex(reflect.ValueOf(name).Convert(v.Type().Key()))
		if !mv.IsValid() {
			return "", v, rest, false
		}
		return name, mv, rest[end:], true
	}
	return "", v, rest, false
}

// deref follows pointers; it reports false for a nil one.
func deref(v reflect.Value) (reflect.Value, bool) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	return v, v.IsValid()
}

// listLabels returns the labels of list's elements: an element's label,
// or "" where it has none or shares it with another element.
func (n *namer) listLabels(list reflect.Value) []string {
	if list.Len() == 0 {
		return nil
	}
	key := [2]uintptr{list.Index(0).Addr().Pointer(), uintptr(list.Len())}
	if ls, ok := n.labels[key]; ok {
		return ls
	}
	ls := make([]string, list.Len())
	count := map[string]int{}
	for i := range ls {
		ls[i] = label(list.Index(i))
		count[ls[i]]++
	}
	for i, l := range ls {
		if count[l] > 1 {
			ls[i] = ""
		}
	}
	n.labels[key] = ls
	return ls
}

// label names a list element: a backend by its group, a weighted
// backend service by its backend service, a route rule by its priority
// ("priority=1", as the access log does), anything with a name field by
// its name; "" when it has none, or one that could be taken for an
// index or would make the path ambiguous.
func label(v reflect.Value) string {
	v, ok := deref(v)
	if !ok || v.Kind() != reflect.Struct {
		return ""
	}
	var s string
	switch x := v.Interface().(type) {
	case Backend:
		s = RefName(x.Group)
	case WeightedBackendService:
		s = RefName(x.BackendService)
	case HTTPRouteRule:
		return "priority=" + strconv.Itoa(x.Priority)
	default:
		_, index := structFields(v.Type())
		i, found := index["name"]
		if !found {
			return ""
		}
		if f := v.FieldByIndex(i); f.Kind() == reflect.String {
			s = f.String()
		}
	}
	if !plainLabel(s) {
		return ""
	}
	return s
}

// plainLabel reports whether s can stand between brackets in a path: at
// most 80 printable characters without spaces or brackets, and not a
// number (which would read as an index).
func plainLabel(s string) bool {
	if s == "" || len(s) > 80 {
		return false
	}
	if _, err := strconv.Atoi(s); err == nil {
		return false
	}
	for _, r := range s {
		if r == '[' || r == ']' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
