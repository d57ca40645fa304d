package armor

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// maxExprBytes bounds an expression's text (Spillway's bound, above the
// length of any expression Cloud Armor accepts).
const maxExprBytes = 4096

// The WAF functions of Cloud Armor's rules language, bound per request
// (cel.LateFunctionBinding) to the request being evaluated.
const (
	fnWAF  = "evaluatePreconfiguredWaf"
	fnExpr = "evaluatePreconfiguredExpr"
)

// attributes are the request attributes an expression can read, with
// their types: Cloud Armor's names.
var attributes = []cel.EnvOption{
	cel.Variable("request.headers", cel.MapType(cel.StringType, cel.StringType)),
	cel.Variable("request.method", cel.StringType),
	cel.Variable("request.path", cel.StringType),
	cel.Variable("request.query", cel.StringType),
	cel.Variable("request.scheme", cel.StringType),
	cel.Variable("origin.ip", cel.StringType),
	cel.Variable("origin.user_ip", cel.StringType),
	cel.Variable("origin.region_code", cel.StringType),
}

// newEnv returns the CEL environment of Cloud Armor's rules language:
// the attributes, the string functions Google documents beyond CEL's
// (lower, upper, base64Decode, urlDecode, urlDecodeUni, utf8ToUnicode),
// inIpRange, and the WAF functions. Macros (has, all, exists, map,
// filter) are not part of the language and are refused.
func newEnv() (*cel.Env, error) {
	opts := append([]cel.EnvOption{cel.ClearMacros()}, attributes...)
	opts = append(opts,
		stringFn("lower", strings.ToLower),
		stringFn("upper", strings.ToUpper),
		stringFn("base64Decode", func(s string) string {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				b, _ = base64.RawStdEncoding.DecodeString(s)
			}
			return string(b)
		}),
		stringFn("urlDecode", urlDecode),
		stringFn("urlDecodeUni", urlDecodeUni),
		stringFn("utf8ToUnicode", utf8ToUnicode),
		cel.Function("inIpRange",
			cel.Overload("inIpRange_string_string", []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(inIPRange))),
		cel.Function(fnWAF,
			cel.Overload(fnWAF+"_string", []*cel.Type{cel.StringType}, cel.BoolType, cel.LateFunctionBinding()),
			cel.Overload(fnWAF+"_string_map", []*cel.Type{cel.StringType, cel.MapType(cel.StringType, cel.DynType)}, cel.BoolType, cel.LateFunctionBinding())),
		cel.Function(fnExpr,
			cel.Overload(fnExpr+"_string", []*cel.Type{cel.StringType}, cel.BoolType, cel.LateFunctionBinding()),
			cel.Overload(fnExpr+"_string_list", []*cel.Type{cel.StringType, cel.ListType(cel.StringType)}, cel.BoolType, cel.LateFunctionBinding())),
	)
	return cel.NewEnv(opts...)
}

// stringFn declares s.name() for a string function.
func stringFn(name string, fn func(string) string) cel.EnvOption {
	return cel.Function(name, cel.MemberOverload("string_"+name, []*cel.Type{cel.StringType}, cel.StringType,
		cel.UnaryBinding(func(v ref.Val) ref.Val {
			s, ok := v.(types.String)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			return types.String(fn(string(s)))
		})))
}

// inIPRange is inIpRange(ip, range): false for an address or range that
// does not parse (a request with no address, say).
func inIPRange(ip, rng ref.Val) ref.Val {
	is, ok1 := ip.(types.String)
	rs, ok2 := rng.(types.String)
	if !ok1 || !ok2 {
		return types.False
	}
	a, err := netip.ParseAddr(string(is))
	if err != nil {
		return types.False
	}
	p, err := netip.ParsePrefix(string(rs))
	if err != nil {
		return types.False
	}
	return types.Bool(p.Contains(a.Unmap()))
}

func urlDecode(s string) string {
	if d, err := url.QueryUnescape(s); err == nil {
		return d
	}
	return s
}

// urlDecodeUni decodes %uXXXX escapes as well as %XX (IIS's encoding).
func urlDecodeUni(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+5 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') {
			var r rune
			if _, err := fmt.Sscanf(s[i+2:i+6], "%04x", &r); err == nil {
				b.WriteRune(r)
				i += 5
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return urlDecode(b.String())
}

// utf8ToUnicode writes non-ASCII characters as %uXXXX.
func utf8ToUnicode(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf {
			b.WriteRune(r)
			continue
		}
		fmt.Fprintf(&b, "%%u%04x", r)
	}
	return b.String()
}

// program is one compiled expression and the WAF calls it makes.
type program struct {
	prg  cel.Program
	wafs map[string]WAFMatcher // by the call's canonical key
	// native evaluates the expression without the CEL interpreter when
	// it has a shape native.go covers (nil otherwise).
	native nfn
}

// compileExpr checks an expression against the language and compiles
// it; its WAF calls, whose arguments must be literals, are compiled by
// waf (nil: WAF functions are refused) with the policy's body options
// (opts' Set, Sensitivity and OptOut are ignored).
func compileExpr(env *cel.Env, src string, waf WAF, opts WAFCall) (*program, error) {
	if len(src) > maxExprBytes {
		return nil, fmt.Errorf("the expression is %d bytes; Spillway takes at most %d", len(src), maxExprBytes)
	}
	checked, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s", strings.ReplaceAll(iss.Err().Error(), "\n", " "))
	}
	if checked.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("the expression gives %s, not a bool", checked.OutputType())
	}
	p := &program{}
	calls, err := wafCalls(checked.NativeRep().Expr())
	if err != nil {
		return nil, err
	}
	for _, c := range calls {
		if waf == nil {
			return nil, fmt.Errorf("%s: preconfigured WAF rules are not available in this build", c.fn)
		}
		call := opts
		call.Set, call.Sensitivity, call.OptOut = c.set, c.sensitivity, c.optOut
		m, err := waf.Compile(call)
		if err != nil {
			return nil, fmt.Errorf("%s('%s'): %w", c.fn, c.set, err)
		}
		if p.wafs == nil {
			p.wafs = map[string]WAFMatcher{}
		}
		p.wafs[c.key()] = m
	}
	if p.prg, err = env.Program(checked, cel.EvalOptions(cel.OptOptimize)); err != nil {
		return nil, err
	}
	if p.wafs == nil {
		p.native = compileNative(checked.NativeRep())
	}
	return p, nil
}

// eval runs the program on a request.
func (p *program) eval(a *activation) bool {
	if p.native != nil {
		v := p.native(a)
		return !v.err && v.b
	}
	var act interpreter.Activation = a
	if p.wafs != nil {
		fa, err := cel.FunctionVars(a, map[string]cel.LateBoundFunction{
			fnWAF:  func(_ string, args ...ref.Val) ref.Val { return p.waf(a, fnWAF, args) },
			fnExpr: func(_ string, args ...ref.Val) ref.Val { return p.waf(a, fnExpr, args) },
		})
		if err != nil {
			return false
		}
		act = fa
	}
	out, _, err := p.prg.Eval(act)
	if err != nil {
		return false // a missing header, say: the rule does not match
	}
	b, ok := out.(types.Bool)
	return ok && bool(b)
}

// waf evaluates one WAF call of the expression on a's request, noting
// the rule IDs that matched.
func (p *program) waf(a *activation, fn string, args []ref.Val) ref.Val {
	c, err := callOf(fn, args)
	if err != nil {
		return types.NewErr("%v", err)
	}
	m := p.wafs[c.key()]
	if m == nil {
		return types.False
	}
	res := m.Match(a.r)
	a.wafIDs = append(a.wafIDs, res.IDs...)
	if a.wafField == nil {
		a.wafField = res.Field
	}
	return types.Bool(res.Matched)
}

// wafCall is one call of a WAF function with literal arguments.
type wafCall struct {
	fn, set     string
	sensitivity int
	optOut      []string
}

func (c wafCall) key() string {
	return fmt.Sprintf("%s|%d|%s", c.set, c.sensitivity, strings.Join(c.optOut, ","))
}

// wafCalls lists the WAF calls in e.
func wafCalls(e ast.Expr) ([]wafCall, error) {
	var out []wafCall
	var err error
	visit(e, func(x ast.Expr) {
		if err != nil || x.Kind() != ast.CallKind {
			return
		}
		call := x.AsCall()
		if fn := call.FunctionName(); fn == fnWAF || fn == fnExpr {
			var c wafCall
			c, err = literalCall(fn, call.Args())
			out = append(out, c)
		}
	})
	return out, err
}
