package cdnpolicy

import (
	"strconv"
	"strings"
	"time"
)

// Directives are the Cache-Control directives a shared cache reads.
// A delta-seconds directive that is absent or malformed is -1.
type Directives struct {
	NoStore, NoCache, Private, Public, MustRevalidate bool
	MaxAge, SMaxAge                                   int64
	StaleWhileRevalidate, StaleIfError                int64
}

// maxDelta caps delta-seconds (RFC 9111 §1.2.2: 2^31).
const maxDelta = 1 << 31

// ParseCacheControl parses Cache-Control field values (RFC 9111 §5.2).
// Unknown directives are ignored; a malformed delta-seconds value is
// treated as absent, except max-age and s-maxage, where RFC 9111
// §4.2.1 has a cache treat an invalid value as stale (0). Directive
// names are case-insensitive. A directive that appears twice keeps the
// smallest value (the most conservative reading).
func ParseCacheControl(values []string) Directives {
	d := Directives{MaxAge: -1, SMaxAge: -1, StaleWhileRevalidate: -1, StaleIfError: -1}
	for _, v := range values {
		for v != "" {
			var item string
			item, v = nextDirective(v)
			name, arg, hasArg := strings.Cut(item, "=")
			name = strings.ToLower(strings.TrimSpace(name))
			arg = strings.Trim(strings.TrimSpace(arg), `"`)
			d.apply(name, arg, hasArg)
		}
	}
	return d
}

// nextDirective splits off the first comma-separated item of v, minding
// quoted strings (private="Set-Cookie, X").
func nextDirective(v string) (item, rest string) {
	inQuote := false
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			inQuote = !inQuote
		case '\\':
			if inQuote {
				i++
			}
		case ',':
			if !inQuote {
				return v[:i], v[i+1:]
			}
		}
	}
	return v, ""
}

func (d *Directives) apply(name, arg string, hasArg bool) {
	switch name {
	case "no-store":
		d.NoStore = true
	case "no-cache":
		// no-cache="field" only forbids sending those fields unvalidated;
		// Spillway revalidates the whole response (conservative).
		d.NoCache = true
	case "private":
		d.Private = true
	case "public":
		d.Public = true
	case "must-revalidate", "proxy-revalidate":
		d.MustRevalidate = true
	case "max-age":
		d.MaxAge = minDelta(d.MaxAge, delta(arg, hasArg, 0))
	case "s-maxage":
		d.SMaxAge = minDelta(d.SMaxAge, delta(arg, hasArg, 0))
	case "stale-while-revalidate":
		d.StaleWhileRevalidate = minDelta(d.StaleWhileRevalidate, delta(arg, hasArg, -1))
	case "stale-if-error":
		d.StaleIfError = minDelta(d.StaleIfError, delta(arg, hasArg, -1))
	}
}

// delta parses delta-seconds; bad is returned for a missing or
// malformed value.
func delta(arg string, hasArg bool, bad int64) int64 {
	if !hasArg || arg == "" {
		return bad
	}
	for i := 0; i < len(arg); i++ {
		if arg[i] < '0' || arg[i] > '9' {
			return bad
		}
	}
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || n > maxDelta {
		return maxDelta
	}
	return n
}

func minDelta(old, n int64) int64 {
	if old < 0 || (n >= 0 && n < old) {
		return n
	}
	return old
}

// ParseHTTPDate parses an HTTP date (RFC 9110 §5.6.7: IMF-fixdate and
// the two obsolete forms). ok is false for anything else, which RFC
// 9111 §5.3 has a cache treat as a time in the past.
func ParseHTTPDate(s string) (t time.Time, ok bool) {
	for _, layout := range []string{time.RFC1123, "Monday, 02-Jan-06 15:04:05 MST", time.ANSIC} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
