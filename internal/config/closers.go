package config

// closer reads YAML roughly, as far as needed to say what is open at the
// end of a prefix of a file: quoted strings and flow collections ([...],
// {...}), so that locateSyntaxError can close them and a prefix that
// stops inside one does not fail for that alone. It knows where a node
// may start (where a quote or a bracket is syntax, not part of a plain
// value such as "it's" or "/a[1]"), comments, and block scalars (| and
// >), whose lines are text. A wrong guess only makes the location less
// precise: the prefix then fails otherwise, and the search moves on.
type closer struct {
	stack       []byte // the closing brackets of the open flow collections
	quote       byte   // the open quoted string's quote, or 0
	escaped     bool   // a backslash in a double-quoted string was last
	nodeStart   bool   // a node may start here
	lineStart   bool   // only spaces so far on this line
	indent      int    // this line's indentation
	blockIndent int    // ≥ 0: in a block scalar under a line so indented
	skipLine    bool   // the rest of the line is a comment or text
	props       bool   // in an anchor, tag or alias before a node
	afterSpace  bool   // the byte before is a space or a line start
}

// closing returns what closes the quoted string and the flow
// collections open at the end of prefix, innermost first.
func closing(prefix []byte) []byte {
	c := &closer{nodeStart: true, lineStart: true, blockIndent: -1, afterSpace: true}
	for i, b := range prefix {
		var next byte = '\n'
		if i+1 < len(prefix) {
			next = prefix[i+1]
		}
		c.step(b, next)
		c.afterSpace = b == ' ' || b == '\t' || b == '\n'
	}
	var out []byte
	if c.quote != 0 {
		if c.escaped {
			out = append(out, '\\')
		}
		out = append(out, c.quote)
	}
	for i := len(c.stack) - 1; i >= 0; i-- {
		out = append(out, c.stack[i])
	}
	return out
}

// step reads byte b; next is the byte after it ('\n' at the end).
func (c *closer) step(b, next byte) {
	switch {
	case c.quote != 0:
		c.inQuote(b, next)
	case b == '\n':
		c.lineStart, c.indent, c.skipLine = true, 0, false
		if len(c.stack) == 0 {
			c.nodeStart = true
		}
	case c.skipLine:
	case c.lineStart && b == ' ':
		c.indent++
	default:
		if c.lineStart {
			c.lineStart = false
			if c.blockIndent >= 0 && c.indent > c.blockIndent {
				c.skipLine = true // a line of a block scalar
				return
			}
			c.blockIndent = -1
		}
		c.token(b, next)
	}
}

// inQuote reads b inside a quoted string; next is the byte after it.
func (c *closer) inQuote(b, next byte) {
	switch {
	case c.escaped:
		c.escaped = false
	case c.quote == '"' && b == '\\', c.quote == '\'' && b == '\'' && next == '\'':
		c.escaped = true // \x, or '' in a single-quoted string
	case b == c.quote:
		c.quote, c.nodeStart = 0, false
	}
}

// token reads b outside quotes, comments and block scalars.
func (c *closer) token(b, next byte) {
	flow := len(c.stack) > 0
	switch {
	case c.props:
		c.props = !blank(next)
	case blank(b):
	case b == '#' && c.afterSpace:
		c.skipLine = true
	case c.nodeStart && (b == '"' || b == '\''):
		c.quote = b
	case (b == '[' || b == '{') && (c.nodeStart || flow):
		c.stack = append(c.stack, b+2) // '[' + 2 == ']', '{' + 2 == '}'
		c.nodeStart = true
	case (b == ']' || b == '}') && flow:
		if c.stack[len(c.stack)-1] == b {
			c.stack = c.stack[:len(c.stack)-1]
		}
		c.nodeStart = false
	default:
		c.indicator(b, blank(next), flow)
	}
}

// indicator reads b, which neither quotes nor brackets; spaceNext says a
// blank follows it.
func (c *closer) indicator(b byte, spaceNext, flow bool) {
	switch {
	case flow && b == ',', b == ':' && (flow || spaceNext):
		c.nodeStart = true
	case !c.nodeStart:
	case (b == '-' || b == '?') && spaceNext:
		// A block list item or an explicit key: a node starts after it.
	case !flow && (b == '|' || b == '>'):
		c.blockIndent, c.skipLine = c.indent, true
	case b == '&' || b == '!' || b == '*':
		// An anchor, tag or alias: the node (if any) starts after it.
		c.props = !spaceNext
	default:
		c.nodeStart = false
	}
}

// blank reports whether b is a space, tab or line break.
func blank(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }
