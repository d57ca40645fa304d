package route

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spillwaylb/spillway/internal/config"
)

type pseudoHeader uint8

const (
	pseudoNone pseudoHeader = iota
	pseudoAuthority
	pseudoMethod
	pseudoPath
)

type valueKind uint8

const (
	matchExact valueKind = iota
	matchPrefix
	matchSuffix
	matchRegex
	matchPresent
	matchRange
)

// headerMatch is a compiled HTTPHeaderMatch.
type headerMatch struct {
	canonical string // name passed to Request.Header
	pseudo    pseudoHeader
	kind      valueKind
	value     string
	re        *regexp.Regexp
	present   bool
	lo, hi    int64 // rangeMatch [lo, hi)
	invert    bool
}

func compileHeaderMatch(h *config.HTTPHeaderMatch) (headerMatch, error) {
	c := headerMatch{canonical: canonicalHeaderKey(h.HeaderName), invert: h.InvertMatch}
	if h.HeaderName == "" {
		return c, fmt.Errorf("headerName is empty")
	}
	switch strings.ToLower(h.HeaderName) {
	case ":authority", "host":
		c.pseudo = pseudoAuthority
	case ":method":
		c.pseudo = pseudoMethod
	case ":path":
		c.pseudo = pseudoPath
	}
	n := 0
	if h.ExactMatch != nil {
		n++
		c.kind, c.value = matchExact, *h.ExactMatch
	}
	if h.PrefixMatch != nil {
		n++
		c.kind, c.value = matchPrefix, *h.PrefixMatch
	}
	if h.SuffixMatch != nil {
		n++
		c.kind, c.value = matchSuffix, *h.SuffixMatch
	}
	if h.RegexMatch != nil {
		n++
		re, err := anchored(*h.RegexMatch)
		if err != nil {
			return c, fmt.Errorf("regexMatch: %v", err)
		}
		c.kind, c.re = matchRegex, re
	}
	if h.PresentMatch != nil {
		n++
		c.kind, c.present = matchPresent, *h.PresentMatch
	}
	if h.RangeMatch != nil {
		n++
		c.kind, c.lo, c.hi = matchRange, h.RangeMatch.RangeStart, h.RangeMatch.RangeEnd
	}
	if n != 1 {
		return c, fmt.Errorf("set exactly one of exactMatch, prefixMatch, suffixMatch, regexMatch, presentMatch, rangeMatch")
	}
	return c, nil
}

// matches evaluates the predicate. An absent header fails every predicate
// but presentMatch: false, before invertMatch is applied.
func (h *headerMatch) matches(r *Request) bool {
	v, ok := r.header(h)
	var res bool
	switch {
	case h.kind == matchPresent:
		res = ok == h.present
	case !ok:
		res = false
	case h.kind == matchExact:
		res = v == h.value
	case h.kind == matchPrefix:
		res = strings.HasPrefix(v, h.value)
	case h.kind == matchSuffix:
		res = strings.HasSuffix(v, h.value)
	case h.kind == matchRegex:
		res = h.re.MatchString(v)
	case h.kind == matchRange:
		n, isInt := parseInt64(v)
		res = isInt && h.lo <= n && n < h.hi
	}
	return res != h.invert
}

// parseInt64 parses an optionally signed decimal integer without
// allocating (strconv allocates its error).
func parseInt64(s string) (int64, bool) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true // -(1<<63) wraps to itself: correct
	}
	if n == 1<<63 {
		return 0, false
	}
	return int64(n), true
}

// queryMatch is a compiled HTTPQueryParameterMatch.
type queryMatch struct {
	name    string
	kind    valueKind // matchExact, matchRegex or matchPresent
	value   string
	re      *regexp.Regexp
	present bool
}

func compileQueryMatch(q *config.HTTPQueryParameterMatch) (queryMatch, error) {
	c := queryMatch{name: q.Name}
	if q.Name == "" {
		return c, fmt.Errorf("name is empty")
	}
	n := 0
	if q.ExactMatch != nil {
		n++
		c.kind, c.value = matchExact, *q.ExactMatch
	}
	if q.RegexMatch != nil {
		n++
		re, err := anchored(*q.RegexMatch)
		if err != nil {
			return c, fmt.Errorf("regexMatch: %v", err)
		}
		c.kind, c.re = matchRegex, re
	}
	if q.PresentMatch != nil {
		n++
		c.kind, c.present = matchPresent, *q.PresentMatch
	}
	if n != 1 {
		return c, fmt.Errorf("set exactly one of exactMatch, presentMatch, regexMatch")
	}
	return c, nil
}

// matches evaluates the predicate against a raw query string. The
// parameter must be present (except for presentMatch: false).
func (q *queryMatch) matches(rawQuery string) bool {
	v, ok := queryParam(rawQuery, q.name)
	switch {
	case q.kind == matchPresent:
		return ok == q.present
	case !ok:
		return false
	case q.kind == matchExact:
		return decodedEqual(v, q.value)
	default:
		return q.re.MatchString(decode(v))
	}
}

// queryParam returns the still-encoded value of the first parameter whose
// decoded name is name.
func queryParam(raw, name string) (string, bool) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if decodedEqual(k, name) {
			return v, true
		}
	}
	return "", false
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// nextDecoded returns the decoded byte at s[i] and the index after it:
// "%XX" is one byte, '+' is a space, a malformed escape is literal.
func nextDecoded(s string, i int) (byte, int) {
	c := s[i]
	switch c {
	case '+':
		return ' ', i + 1
	case '%':
		if i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				return hi<<4 | lo, i + 3
			}
		}
	}
	return c, i + 1
}

// decodedEqual reports whether the percent-decoded enc equals want,
// without allocating.
func decodedEqual(enc, want string) bool {
	i, j := 0, 0
	for i < len(enc) {
		if j == len(want) {
			return false
		}
		var c byte
		c, i = nextDecoded(enc, i)
		if c != want[j] {
			return false
		}
		j++
	}
	return j == len(want)
}

// decode percent-decodes enc, allocating only when it contains escapes.
func decode(enc string) string {
	if !strings.ContainsAny(enc, "%+") {
		return enc
	}
	b := make([]byte, 0, len(enc))
	for i := 0; i < len(enc); {
		var c byte
		c, i = nextDecoded(enc, i)
		b = append(b, c)
	}
	return string(b)
}
