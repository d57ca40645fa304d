package cdnpolicy

import (
	"strings"
)

// KeyInput is what a cache key is built from.
type KeyInput struct {
	// Backend is the backend service or bucket name: keys of different
	// backends never meet (docs/cdn.md).
	Backend string
	Scheme  string // "http" or "https"
	Host    string
	// Path is the request path as forwarded (normalised, escaped).
	Path     string
	RawQuery string
	// Header is the request header (canonical keys).
	Header map[string][]string
}

// signedParams are the query parameters of signed URLs, which are never
// part of the key: every valid signature of one URL shares its entry.
func signedParam(name string) bool {
	switch name {
	case "Expires", "KeyName", "Signature", "URLPrefix":
		return true
	}
	return false
}

// Key returns the cache key of a request: backend, protocol, host, path
// and query string as the cacheKeyPolicy includes them, then the named
// headers' and cookies' values. Host names are lower-cased. Query
// parameters keep the order they came in.
func (k *KeyPolicy) Key(in KeyInput) string {
	var b strings.Builder
	b.Grow(len(in.Backend) + len(in.Host) + len(in.Path) + len(in.RawQuery) + 16)
	b.WriteString(in.Backend)
	b.WriteByte('\x00')
	if k.IncludeProtocol {
		b.WriteString(in.Scheme)
		b.WriteString("://")
	}
	if k.IncludeHost {
		writeLower(&b, in.Host)
	}
	b.WriteString(in.Path)
	if k.IncludeQuery && in.RawQuery != "" {
		k.writeQuery(&b, in.RawQuery)
	}
	for _, h := range k.Headers {
		b.WriteByte('\x00')
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(strings.Join(in.Header[h], ","))
	}
	for _, c := range k.Cookies {
		b.WriteByte('\x00')
		b.WriteString("cookie:")
		b.WriteString(c)
		b.WriteByte('=')
		v, _ := Cookie(in.Header, c)
		b.WriteString(v)
	}
	return b.String()
}

// writeQuery writes the kept query parameters, '?' first.
func (k *KeyPolicy) writeQuery(b *strings.Builder, q string) {
	sep := byte('?')
	for q != "" {
		var part string
		part, q, _ = strings.Cut(q, "&")
		if part == "" {
			continue
		}
		name, _, _ := strings.Cut(part, "=")
		if signedParam(name) || (k.Whitelist != nil && !k.Whitelist[name]) || k.Blacklist[name] {
			continue
		}
		b.WriteByte(sep)
		sep = '&'
		b.WriteString(part)
	}
}

func writeLower(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
}

// Cookie returns the value of the named cookie in the request header h.
func Cookie(h map[string][]string, name string) (string, bool) {
	for _, line := range h["Cookie"] {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			n, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if ok && n == name {
				return strings.Trim(v, `"`), true
			}
		}
	}
	return "", false
}

// VaryKey returns the part of a variant's key made of the request's
// values of the Vary headers names. Accept-Encoding is reduced to the
// codings Spillway knows a backend may choose (br, gzip, zstd, in that
// order), so that the many ways browsers write it make few variants;
// other values are kept as sent. ok is false when a value is over 256
// bytes (such a request is not served from, nor stored in, the cache:
// the bound keeps one URL from filling the store with variants).
func VaryKey(names []string, h map[string][]string) (key string, ok bool) {
	if len(names) == 0 {
		return "", true
	}
	var b strings.Builder
	for _, n := range names {
		v := strings.Join(h[n], ",")
		if len(v) > 256 {
			return "", false
		}
		if n == "Accept-Encoding" {
			v = codings(v)
		}
		b.WriteByte('\x01')
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(v)
	}
	return b.String(), true
}

// codings reduces an Accept-Encoding value to the codings a backend may
// have chosen among br, gzip and zstd (q=0 excluded).
func codings(v string) string {
	var have [3]bool
	for _, part := range strings.Split(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if q := strings.ReplaceAll(params, " ", ""); strings.HasPrefix(q, "q=0") && strings.Trim(q[3:], ".0") == "" {
			continue
		}
		switch name {
		case "br":
			have[0] = true
		case "gzip", "x-gzip":
			have[1] = true
		case "zstd":
			have[2] = true
		}
	}
	out := make([]string, 0, 3)
	for i, n := range []string{"br", "gzip", "zstd"} {
		if have[i] {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}
