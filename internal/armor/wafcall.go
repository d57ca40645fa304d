package armor

import (
	"fmt"
	"reflect"
	"slices"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// WAF compiles Cloud Armor's preconfigured WAF rule sets (package waf
// implements it with the OWASP Core Rule Set).
type WAF interface {
	// Compile returns the matcher of one call's rule set, or an error
	// naming the fix.
	Compile(c WAFCall) (WAFMatcher, error)
}

// WAFCall is one preconfigured WAF call of a policy's rule: a rule set
// at a sensitivity (0-4) without the opted-out rule IDs (Google's form,
// e.g. owasp-crs-v030301-id942251-sqli), with its policy's body options.
type WAFCall struct {
	Set         string
	Sensitivity int
	OptOut      []string
	// JSONParsing is the policy's advancedOptionsConfig.jsonParsing
	// STANDARD: the values of JSON bodies (application/json,
	// application/*+json and JSONContentTypes, jsonCustomConfig's
	// contentTypes) are inspected one by one.
	JSONParsing      bool
	JSONContentTypes []string
}

// WAFMatcher matches a request against one compiled rule set.
type WAFMatcher interface {
	Match(r *Request) WAFMatch
}

// WAFMatch is a rule set's verdict on a request.
type WAFMatch struct {
	// Matched: some signature of the set that is on matched.
	Matched bool
	// IDs are the signatures that matched (Google's
	// preconfiguredExprIds).
	IDs []string
	// Field is where the first of them matched, for verbose logging.
	Field *MatchedField
}

// MatchedField is the part of a request a WAF signature matched, as
// Google's verbose logging reports it.
type MatchedField struct {
	// Type is the kind of field (the CRS's variable: ARGS_GET,
	// REQUEST_HEADERS, REQUEST_COOKIES, REQUEST_BODY, ...) and Name its
	// name (the argument, header or cookie name; "" for a whole field).
	Type, Name string
	// Value is the start of the value the signature matched, at most
	// MaxMatchedValueBytes, after the rule's transformations (decoding,
	// lower-casing); Length is the whole value's length.
	Value  string
	Length int
}

// MaxMatchedValueBytes bounds MatchedField.Value (Google logs a short
// prefix of the value too).
const MaxMatchedValueBytes = 16

// defaultSensitivity is the sensitivity of evaluatePreconfiguredExpr and
// of evaluatePreconfiguredWaf without one: every rule of the set.
const defaultSensitivity = 4

// visit calls fn on e and every expression under it.
func visit(e ast.Expr, fn func(ast.Expr)) {
	fn(e)
	switch e.Kind() {
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			visit(c.Target(), fn)
		}
		for _, a := range c.Args() {
			visit(a, fn)
		}
	case ast.ListKind:
		for _, x := range e.AsList().Elements() {
			visit(x, fn)
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			visit(me.Key(), fn)
			visit(me.Value(), fn)
		}
	case ast.SelectKind:
		visit(e.AsSelect().Operand(), fn)
	}
}

// literalCall reads a WAF call's arguments, which must be literals:
// fnWAF(set[, {'sensitivity': N, 'opt_out_rule_ids': [...]}]) or
// fnExpr(set[, [opt-out ids]]).
func literalCall(fn string, args []ast.Expr) (wafCall, error) {
	c := wafCall{fn: fn, sensitivity: defaultSensitivity}
	fix := fmt.Errorf("%s takes literal arguments, e.g. %s('sqli-v33-stable', {'sensitivity': 1})", fn, fnWAF)
	if fn == fnExpr {
		fix = fmt.Errorf("%s takes literal arguments, e.g. %s('xss-stable', ['owasp-crs-v030001-id941180-xss'])", fn, fnExpr)
	}
	set, ok := literalString(args[0])
	if !ok {
		return c, fix
	}
	c.set = set
	if len(args) < 2 {
		return c, nil
	}
	switch {
	case fn == fnExpr && args[1].Kind() == ast.ListKind:
		ids, ok := literalStrings(args[1])
		if !ok {
			return c, fix
		}
		c.optOut = ids
	case fn == fnWAF && args[1].Kind() == ast.MapKind:
		if err := c.options(args[1].AsMap().Entries()); err != nil {
			return c, err
		}
	default:
		return c, fix
	}
	return c, nil
}

// options reads evaluatePreconfiguredWaf's options map.
func (c *wafCall) options(entries []ast.EntryExpr) error {
	for _, en := range entries {
		me := en.AsMapEntry()
		k, ok := literalString(me.Key())
		if !ok {
			return fmt.Errorf("%s: option names are literal strings", fnWAF)
		}
		switch k {
		case "sensitivity":
			v := me.Value()
			if v.Kind() != ast.LiteralKind {
				return fmt.Errorf("%s: sensitivity is a literal 0-4", fnWAF)
			}
			n, ok := v.AsLiteral().(types.Int)
			if !ok || n < 0 || n > 4 {
				return fmt.Errorf("%s: sensitivity %v is not 0-4", fnWAF, v.AsLiteral())
			}
			c.sensitivity = int(n)
		case "opt_out_rule_ids", "opt_in_rule_ids":
			ids, ok := literalStrings(me.Value())
			if !ok {
				return fmt.Errorf("%s: %s is a list of literal rule IDs", fnWAF, k)
			}
			if k == "opt_in_rule_ids" {
				return fmt.Errorf("%s: opt_in_rule_ids is not supported; use a sensitivity and opt_out_rule_ids", fnWAF)
			}
			c.optOut = ids
		default:
			return fmt.Errorf("%s: unknown option %q (options: sensitivity, opt_out_rule_ids)", fnWAF, k)
		}
	}
	return nil
}

func literalString(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

func literalStrings(e ast.Expr) ([]string, bool) {
	if e.Kind() != ast.ListKind {
		return nil, false
	}
	var out []string
	for _, x := range e.AsList().Elements() {
		s, ok := literalString(x)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out, true
}

// callOf rebuilds a WAF call's key from its evaluated arguments, to find
// the matcher compiled for it.
func callOf(fn string, args []ref.Val) (wafCall, error) {
	c := wafCall{fn: fn, sensitivity: defaultSensitivity}
	if len(args) == 0 {
		return c, fmt.Errorf("%s: no rule set", fn)
	}
	set, _ := args[0].Value().(string)
	c.set = set
	if len(args) < 2 {
		return c, nil
	}
	if args[1].Type() == types.ListType {
		ids, err := args[1].ConvertToNative(reflect.TypeFor[[]string]())
		if err != nil {
			return c, err
		}
		c.optOut = slices.Sorted(slices.Values(ids.([]string)))
		return c, nil
	}
	m, err := args[1].ConvertToNative(reflect.TypeFor[map[string]any]())
	if err != nil {
		return c, err
	}
	opts := m.(map[string]any)
	if n, ok := opts["sensitivity"].(int64); ok {
		c.sensitivity = int(n)
	}
	if ids, ok := opts["opt_out_rule_ids"].([]any); ok {
		c.optOut = stringsOf(ids)
	}
	return c, nil
}

func stringsOf(xs []any) []string {
	var out []string
	for _, x := range xs {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
