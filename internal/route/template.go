package route

import (
	"fmt"
	"strings"
)

// Path templates (pathTemplateMatch, pathTemplateRewrite), docs/semantics.md §1.1.
//
// A match template is flattened into tokens: literal text, '*' (one
// non-empty segment), '**' (zero or more characters including '/'), and
// variable start/end markers. Because '*' never crosses '/', '**' is the last
// operator, and literal text may follow an operator inside its segment only
// after the last operator, every operator's extent is determined by the text
// that must follow it: matching is a single left-to-right pass with no
// backtracking and no allocation. Captures are byte offsets into the path.

// maxTemplateOps is Google's limit on operators in one pathTemplateMatch; it
// also bounds the number of variables, so captures fit in a fixed array.
const maxTemplateOps = 5

type tokenKind uint8

const (
	tokLiteral tokenKind = iota
	tokStar
	tokStarStar
	tokVarStart
	tokVarEnd
)

type token struct {
	kind tokenKind
	lit  string // tokLiteral: the text; tokStar: the literal that must end its segment; tokStarStar: the literal that must end the path
	v    int    // tokVarStart, tokVarEnd: variable index
}

// pathTemplate is a compiled pathTemplateMatch.
type pathTemplate struct {
	src    string
	tokens []token
	vars   []string // variable names, by index
}

// captures holds [start, end) offsets of each variable in the matched path.
type captures [maxTemplateOps][2]int

func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '_'):
		default:
			return false
		}
	}
	return true
}

// compileTemplate parses a pathTemplateMatch value.
func compileTemplate(src string) (*pathTemplate, error) {
	if !strings.HasPrefix(src, "/") {
		return nil, fmt.Errorf("path template %q must start with '/'", src)
	}
	if len(src) > 1024 {
		return nil, fmt.Errorf("path template is longer than 1024 characters")
	}
	if strings.IndexByte(src, 0) >= 0 {
		return nil, fmt.Errorf("path template %q contains a NUL byte", src)
	}
	tp := &templateParser{t: &pathTemplate{src: src}, src: src, inVar: -1}
	if err := tp.parse(); err != nil {
		return nil, err
	}
	t := tp.t
	if len(t.vars) > maxTemplateOps {
		return nil, fmt.Errorf("path template %q: more than %d variables", t.src, maxTemplateOps)
	}
	t.recordFollows()
	return t, nil
}

// templateParser is compileTemplate's tokenizer: one left-to-right pass
// over src in which a variable's braces are replaced by its pattern and a
// NUL that ends it, so the pattern is tokenized by the same loop.
type templateParser struct {
	t          *pathTemplate
	src        string // the template, variables spliced in as parsed
	lit        strings.Builder
	segStart   bool // the previous character was '/'
	ops        int
	sawStarStr bool
	inVar      int // the variable being parsed; -1 outside one
}

// parse tokenizes the whole template into t.tokens and t.vars.
func (p *templateParser) parse() error {
	for i := 0; i < len(p.src); i++ {
		var err error
		switch c := p.src[i]; c {
		case '{':
			i, err = p.openVar(i)
		case 0:
			p.flush()
			p.t.tokens = append(p.t.tokens, token{kind: tokVarEnd, v: p.inVar})
			p.inVar = -1
		case '}':
			err = fmt.Errorf("path template %q: unmatched '}'", p.t.src)
		case '*':
			i, err = p.operator(i)
		default:
			p.segStart = c == '/'
			p.lit.WriteByte(c)
		}
		if err != nil {
			return err
		}
	}
	p.flush()
	return nil
}

// flush ends the literal text collected so far as a token.
func (p *templateParser) flush() {
	if p.lit.Len() > 0 {
		p.t.tokens = append(p.t.tokens, token{kind: tokLiteral, lit: p.lit.String()})
		p.lit.Reset()
	}
}

// openVar parses the variable "{name}" or "{name=pattern}" at src[i]
// and splices its pattern (default "*") and an end marker in place of the
// braces. It returns the index the loop continues after: the pattern is
// parsed next.
func (p *templateParser) openVar(i int) (int, error) {
	t := p.t
	if p.inVar >= 0 {
		return i, fmt.Errorf("path template %q: nested '{'", t.src)
	}
	end := strings.IndexByte(p.src[i:], '}')
	if end < 0 {
		return i, fmt.Errorf("path template %q: unclosed '{'", t.src)
	}
	name, pattern, hasPattern := strings.Cut(p.src[i+1:i+end], "=")
	if !isVarName(name) {
		return i, fmt.Errorf("path template %q: invalid variable name %q (want [a-zA-Z][a-zA-Z0-9_]*)", t.src, name)
	}
	for _, v := range t.vars {
		if v == name {
			return i, fmt.Errorf("path template %q: variable %q used twice", t.src, name)
		}
	}
	if !hasPattern {
		pattern = "*"
	}
	if pattern == "" || strings.ContainsAny(pattern, "{}") {
		return i, fmt.Errorf("path template %q: invalid pattern %q for variable %q", t.src, pattern, name)
	}
	if !p.segStart {
		return i, fmt.Errorf("path template %q: variable %q must start a path segment", t.src, name)
	}
	p.flush()
	p.inVar = len(t.vars)
	t.vars = append(t.vars, name)
	t.tokens = append(t.tokens, token{kind: tokVarStart, v: p.inVar})
	p.src = p.src[:i] + pattern + "\x00" + p.src[i+end+1:]
	return i - 1, nil
}

// operator parses the '*' or '**' at src[i]; it returns the index of its
// last character.
func (p *templateParser) operator(i int) (int, error) {
	t := p.t
	if !p.segStart {
		return i, fmt.Errorf("path template %q: '*' must start a path segment", t.src)
	}
	if p.sawStarStr {
		return i, fmt.Errorf("path template %q: '**' must be the last operator", t.src)
	}
	p.ops++
	if p.ops > maxTemplateOps {
		return i, fmt.Errorf("path template %q: more than %d operators", t.src, maxTemplateOps)
	}
	p.flush()
	kind := tokStar
	if i+1 < len(p.src) && p.src[i+1] == '*' {
		kind, p.sawStarStr = tokStarStar, true
		i++
	}
	if i+1 < len(p.src) && p.src[i+1] == '*' {
		return i, fmt.Errorf("path template %q: '***' is not an operator", t.src)
	}
	t.tokens = append(t.tokens, token{kind: kind})
	p.segStart = false
	return i, nil
}

// recordFollows records, for each operator, the literal text that must
// follow it: up to the next operator, and for '*' only up to the end of
// its segment.
func (t *pathTemplate) recordFollows() {
	for i := range t.tokens {
		k := t.tokens[i].kind
		if k != tokStar && k != tokStarStar {
			continue
		}
		var follow strings.Builder
		for j := i + 1; j < len(t.tokens); j++ {
			if t.tokens[j].kind == tokStar || t.tokens[j].kind == tokStarStar {
				break
			}
			if t.tokens[j].kind == tokLiteral {
				follow.WriteString(t.tokens[j].lit)
			}
		}
		f := follow.String()
		if k == tokStar {
			f, _, _ = strings.Cut(f, "/")
		}
		t.tokens[i].lit = f
	}
}

// match reports whether path matches the template, recording variable
// offsets in caps (which may be nil).
func (t *pathTemplate) match(path string, caps *captures) bool {
	pos := 0
	for i := range t.tokens {
		tk := &t.tokens[i]
		switch tk.kind {
		case tokLiteral:
			if !strings.HasPrefix(path[pos:], tk.lit) {
				return false
			}
			pos += len(tk.lit)
		case tokStar:
			seg := path[pos:]
			if j := strings.IndexByte(seg, '/'); j >= 0 {
				seg = seg[:j]
			}
			if len(seg) <= len(tk.lit) || !strings.HasSuffix(seg, tk.lit) {
				return false
			}
			pos += len(seg) - len(tk.lit)
		case tokStarStar:
			rest := path[pos:]
			if len(rest) < len(tk.lit) || !strings.HasSuffix(rest, tk.lit) {
				return false
			}
			pos += len(rest) - len(tk.lit)
		case tokVarStart:
			if caps != nil {
				caps[tk.v][0] = pos
			}
		case tokVarEnd:
			if caps != nil {
				caps[tk.v][1] = pos
			}
		}
	}
	return pos == len(path)
}

// rewritePiece is literal text or a reference to a captured variable.
type rewritePiece struct {
	lit string
	v   int // -1 for literal
}

// compileRewriteTemplate parses a pathTemplateRewrite against the variables
// of the template it rewrites.
func compileRewriteTemplate(src string, m *pathTemplate) ([]rewritePiece, error) {
	if !strings.HasPrefix(src, "/") {
		return nil, fmt.Errorf("pathTemplateRewrite %q must start with '/'", src)
	}
	if m == nil || len(m.vars) == 0 {
		return nil, fmt.Errorf("pathTemplateRewrite %q needs a pathTemplateMatch with at least one variable", src)
	}
	var pieces []rewritePiece
	rest := src
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			pieces = append(pieces, rewritePiece{lit: rest, v: -1})
			break
		}
		if rest[open] == '}' {
			return nil, fmt.Errorf("pathTemplateRewrite %q: unmatched '}'", src)
		}
		if open > 0 {
			pieces = append(pieces, rewritePiece{lit: rest[:open], v: -1})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("pathTemplateRewrite %q: unclosed '{'", src)
		}
		name := rest[open+1 : open+end]
		idx := -1
		for i, v := range m.vars {
			if v == name {
				idx = i
			}
		}
		if idx < 0 {
			return nil, fmt.Errorf("pathTemplateRewrite %q: variable %q is not captured by pathTemplateMatch %q", src, name, m.src)
		}
		pieces = append(pieces, rewritePiece{v: idx})
		rest = rest[open+end+1:]
	}
	return pieces, nil
}

// render builds the rewritten path from the pieces and the captures of path.
func render(pieces []rewritePiece, path string, caps *captures) string {
	n := 0
	for _, p := range pieces {
		if p.v < 0 {
			n += len(p.lit)
		} else {
			n += caps[p.v][1] - caps[p.v][0]
		}
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range pieces {
		if p.v < 0 {
			b.WriteString(p.lit)
		} else {
			b.WriteString(path[caps[p.v][0]:caps[p.v][1]])
		}
	}
	return b.String()
}
