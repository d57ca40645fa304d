package armor

import (
	"net/netip"
	"regexp"
	"strings"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// A native evaluator runs the common shapes of Cloud Armor expressions —
// attributes, string literals, ==, !=, &&, ||, !, headers['name'],
// startsWith, endsWith, contains, matches, lower, upper and inIpRange —
// as Go closures, without the CEL interpreter's per-evaluation values
// and allocations. An expression with anything else runs on cel-go.
// Both follow CEL's rules for errors (a missing header): && and || absorb
// an error when the other side decides, anything else propagates it, and
// an expression that ends in an error does not match.
// TestNativeMatchesCEL checks the two agree.

// nval is a value during native evaluation: a string or a bool, or an
// error.
type nval struct {
	s   string
	b   bool
	err bool
}

// nfn evaluates one node.
type nfn func(a *activation) nval

// nativeCompiler compiles a checked AST to closures.
type nativeCompiler struct {
	refs map[int64]*ast.ReferenceInfo
}

// compileNative returns the closure of a checked expression, nil when it
// has a shape the native evaluator does not cover.
func compileNative(checked *ast.AST) nfn {
	c := nativeCompiler{refs: checked.ReferenceMap()}
	fn, ok := c.node(checked.Expr())
	if !ok {
		return nil
	}
	return fn
}

func (c *nativeCompiler) node(e ast.Expr) (nfn, bool) {
	if r, ok := c.refs[e.ID()]; ok && r.Value == nil {
		if i, ok := attrIndex[r.Name]; ok && i != attrHeaders {
			return attrFn(i), true
		}
	}
	switch e.Kind() {
	case ast.LiteralKind:
		switch v := e.AsLiteral().(type) {
		case types.String:
			s := string(v)
			return func(*activation) nval { return nval{s: s} }, true
		case types.Bool:
			b := bool(v)
			return func(*activation) nval { return nval{b: b} }, true
		}
	case ast.CallKind:
		return c.call(e.AsCall())
	}
	return nil, false
}

// attrFn reads a string attribute.
func attrFn(i int) nfn {
	return func(a *activation) nval {
		switch i {
		case attrMethod:
			return nval{s: a.r.Method}
		case attrPath:
			return nval{s: a.r.Path}
		case attrQuery:
			return nval{s: a.r.Query}
		case attrScheme:
			return nval{s: a.r.Scheme}
		case attrIP:
			return nval{s: a.ipString()}
		}
		return nval{s: a.regionCode()}
	}
}

func (c *nativeCompiler) call(call ast.CallExpr) (nfn, bool) {
	args := call.Args()
	switch fn := call.FunctionName(); {
	case fn == operators.LogicalAnd || fn == operators.LogicalOr:
		return c.logical(fn == operators.LogicalAnd, args)
	case fn == operators.LogicalNot:
		x, ok := c.node(args[0])
		return func(a *activation) nval { v := x(a); return nval{b: !v.b, err: v.err} }, ok
	case fn == operators.Equals || fn == operators.NotEquals:
		return c.equals(fn == operators.NotEquals, args)
	case fn == operators.Index:
		return c.header(args)
	case fn == "inIpRange":
		return c.inIPRange(args)
	case call.IsMemberFunction():
		return c.method(fn, call.Target(), args)
	}
	return nil, false
}

// logical is && or || with CEL's error absorption.
func (c *nativeCompiler) logical(and bool, args []ast.Expr) (nfn, bool) {
	l, ok1 := c.node(args[0])
	r, ok2 := c.node(args[1])
	if !ok1 || !ok2 {
		return nil, false
	}
	return func(a *activation) nval {
		lv := l(a)
		if !lv.err && lv.b != and {
			return lv // false && _, true || _
		}
		rv := r(a)
		switch {
		case !rv.err && rv.b != and:
			return rv
		case lv.err || rv.err:
			return nval{err: true}
		}
		return nval{b: and}
	}, true
}

// equals compares two strings (or two bools).
func (c *nativeCompiler) equals(negate bool, args []ast.Expr) (nfn, bool) {
	l, ok1 := c.node(args[0])
	r, ok2 := c.node(args[1])
	if !ok1 || !ok2 {
		return nil, false
	}
	return func(a *activation) nval {
		lv, rv := l(a), r(a)
		if lv.err || rv.err {
			return nval{err: true}
		}
		return nval{b: (lv.s == rv.s && lv.b == rv.b) != negate}
	}, true
}

// header is request.headers['literal'].
func (c *nativeCompiler) header(args []ast.Expr) (nfn, bool) {
	r, ok := c.refs[args[0].ID()]
	name, lit := literalString(args[1])
	if !ok || r.Name != "request.headers" || !lit {
		return nil, false
	}
	return func(a *activation) nval {
		v, ok := a.header(name)
		return nval{s: v, err: !ok}
	}, true
}

// inIPRange is inIpRange(x, 'literal range').
func (c *nativeCompiler) inIPRange(args []ast.Expr) (nfn, bool) {
	x, ok := c.node(args[0])
	rng, lit := literalString(args[1])
	if !ok || !lit {
		return nil, false
	}
	pfx, err := netip.ParsePrefix(rng)
	return func(a *activation) nval {
		v := x(a)
		if v.err {
			return v
		}
		ip, perr := netip.ParseAddr(v.s)
		return nval{b: err == nil && perr == nil && pfx.Contains(ip.Unmap())}
	}, true
}

// method is target.fn(args) for the string methods covered.
func (c *nativeCompiler) method(fn string, target ast.Expr, args []ast.Expr) (nfn, bool) {
	t, ok := c.node(target)
	if !ok {
		return nil, false
	}
	unary := map[string]func(string) string{"lower": strings.ToLower, "upper": strings.ToUpper}
	if f, ok := unary[fn]; ok && len(args) == 0 {
		return func(a *activation) nval {
			v := t(a)
			v.s = f(v.s)
			return v
		}, true
	}
	if len(args) != 1 {
		return nil, false
	}
	arg, lit := literalString(args[0])
	if !lit {
		return nil, false
	}
	var test func(string) bool
	switch fn {
	case "startsWith":
		test = func(s string) bool { return strings.HasPrefix(s, arg) }
	case "endsWith":
		test = func(s string) bool { return strings.HasSuffix(s, arg) }
	case "contains":
		test = func(s string) bool { return strings.Contains(s, arg) }
	case "matches":
		re, err := regexp.Compile(arg)
		if err != nil {
			return nil, false // CEL reports it at evaluation
		}
		test = re.MatchString
	default:
		return nil, false
	}
	return func(a *activation) nval {
		v := t(a)
		if v.err {
			return v
		}
		return nval{b: test(v.s)}
	}, true
}
