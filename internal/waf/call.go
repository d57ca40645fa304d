package waf

import (
	"fmt"
	"strconv"
	"strings"
)

// Function names as Cloud Armor's rules language spells them.
const (
	FuncWaf  = "evaluatePreconfiguredWaf"
	FuncExpr = "evaluatePreconfiguredExpr"
)

// maxCallBytes bounds ParseCall's input (Google bounds a whole
// expression to 2,048 characters).
const maxCallBytes = 64 << 10

// ParseCall parses one call written in Cloud Armor's rules language,
// alone in text (surrounding spaces aside):
//
//	evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1, 'opt_out_rule_ids': ['owasp-crs-v030301-id942251-sqli']})
//	evaluatePreconfiguredExpr('xss-stable', ['owasp-crs-v030001-id941110-xss'])
//
// Strings are quoted with ' or " (escapes \\, \' and \" only). A list as
// evaluatePreconfiguredWaf's second argument is taken as its opt-outs, as
// Google's troubleshooting guide writes it. The config loader, which
// parses whole expressions with cel-go, calls ParseWaf and ParseExpr with
// the arguments instead.
func ParseCall(text string) (SetRef, error) {
	if len(text) > maxCallBytes {
		return SetRef{}, fmt.Errorf("%w: %d bytes; at most %d", errCall, len(text), maxCallBytes)
	}
	p := &callParser{s: text}
	ref, err := p.call()
	if err == nil && p.skipSpace() < len(p.s) {
		err = p.errorf("unexpected %q after the call", p.rest())
	}
	if err != nil {
		return SetRef{}, err
	}
	return ref, nil
}

// callParser reads a call; every method advances pos and is bounded by
// len(s) (the grammar nests at most map → list).
type callParser struct {
	s   string
	pos int
}

func (p *callParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", errCall, p.pos, fmt.Sprintf(format, args...))
}

func (p *callParser) rest() string {
	r := p.s[p.pos:]
	if len(r) > 20 {
		r = r[:20] + "..."
	}
	return r
}

func (p *callParser) skipSpace() int {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
	return p.pos
}

// accept consumes c (after spaces) if it is next.
func (p *callParser) accept(c byte) bool {
	if p.skipSpace() < len(p.s) && p.s[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *callParser) expect(c byte) error {
	if !p.accept(c) {
		return p.errorf("want %q, have %q", c, p.rest())
	}
	return nil
}

func (p *callParser) call() (SetRef, error) {
	start := p.skipSpace()
	for p.pos < len(p.s) && isIdentByte(p.s[p.pos]) {
		p.pos++
	}
	fn := p.s[start:p.pos]
	if fn != FuncWaf && fn != FuncExpr {
		return SetRef{}, p.errorf("want %s(...) or %s(...), have %q", FuncWaf, FuncExpr, fn)
	}
	if err := p.expect('('); err != nil {
		return SetRef{}, err
	}
	set, err := p.str()
	if err != nil {
		return SetRef{}, err
	}
	var opts map[string]any
	var optOut []string
	if p.accept(',') && !p.peek(')') {
		opts, optOut, err = p.secondArg(fn)
		if err != nil {
			return SetRef{}, err
		}
	}
	if err := p.expect(')'); err != nil {
		return SetRef{}, err
	}
	if fn == FuncWaf && opts != nil {
		return ParseWaf(set, opts)
	}
	return ParseExpr(set, optOut)
}

// secondArg reads evaluatePreconfiguredExpr's list, or
// evaluatePreconfiguredWaf's map (or list of opt-outs).
func (p *callParser) secondArg(fn string) (map[string]any, []string, error) {
	if fn == FuncWaf && p.peek('{') {
		m, err := p.mapLit()
		return m, nil, err
	}
	if !p.peek('[') {
		return nil, nil, p.errorf("%s's second argument is a list of rule IDs, have %q", fn, p.rest())
	}
	l, err := p.list()
	return nil, l, err
}

func (p *callParser) peek(c byte) bool {
	return p.skipSpace() < len(p.s) && p.s[p.pos] == c
}

func isIdentByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// str reads a quoted string.
func (p *callParser) str() (string, error) {
	if p.skipSpace() >= len(p.s) || (p.s[p.pos] != '\'' && p.s[p.pos] != '"') {
		return "", p.errorf("want a quoted string, have %q", p.rest())
	}
	q := p.s[p.pos]
	p.pos++
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch {
		case c == q:
			return b.String(), nil
		case c == '\n' || c == '\r':
			return "", p.errorf("a string does not span lines")
		case c == '\\':
			if p.pos >= len(p.s) || strings.IndexByte(`\'"`, p.s[p.pos]) < 0 {
				return "", p.errorf(`unsupported escape; only \\, \' and \" are read`)
			}
			c = p.s[p.pos]
			p.pos++
		}
		b.WriteByte(c)
	}
	return "", p.errorf("unterminated string")
}

// list reads ['a', 'b', ...] (a trailing comma allowed, as in CEL).
func (p *callParser) list() ([]string, error) {
	if err := p.expect('['); err != nil {
		return nil, err
	}
	var out []string
	for !p.accept(']') {
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		if !p.accept(',') {
			if err := p.expect(']'); err != nil {
				return nil, err
			}
			break
		}
	}
	return out, nil
}

// mapLit reads {'key': value, ...}, values being integers or lists.
func (p *callParser) mapLit() (map[string]any, error) {
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	m := map[string]any{}
	for !p.accept('}') {
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, p.errorf("key %q twice", k)
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		if m[k], err = p.value(); err != nil {
			return nil, err
		}
		if !p.accept(',') {
			if err := p.expect('}'); err != nil {
				return nil, err
			}
			break
		}
	}
	return m, nil
}

// value reads an integer or a list of strings.
func (p *callParser) value() (any, error) {
	if p.peek('[') {
		l, err := p.list()
		return l, err
	}
	start := p.pos
	if p.pos < len(p.s) && p.s[p.pos] == '-' {
		p.pos++
	}
	for p.pos < len(p.s) && '0' <= p.s[p.pos] && p.s[p.pos] <= '9' && p.pos-start < 12 {
		p.pos++
	}
	n, err := strconv.ParseInt(p.s[start:p.pos], 10, 64)
	if err != nil {
		p.pos = start
		return nil, p.errorf("want an integer or a list, have %q", p.rest())
	}
	return n, nil
}
