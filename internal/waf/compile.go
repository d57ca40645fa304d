package waf

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	coreruleset "github.com/corazawaf/coraza-coreruleset/v4"
	"github.com/corazawaf/coraza/v3"
)

// CRSVersion is the OWASP Core Rule Set release every rule set runs on,
// whatever CRS version its name says (see docs/security-policies.md).
const CRSVersion = "4.25.0"

// crsSetupVersion is CRSVersion as CRS's tx.crs_setup_version spells it.
const crsSetupVersion = "4250"

// Defaults and bounds of Options.
const (
	DefaultMaxBodyBytes = 8 << 10  // Google's default requestBodyInspectionSize
	MaxMaxBodyBytes     = 64 << 10 // Google's largest requestBodyInspectionSize
	DefaultMaxHeadBytes = 16 << 10 // a 16 KiB value costs Coraza twice an 8 KiB body
	MaxMaxHeadBytes     = 1 << 20
	DefaultMaxValues    = 200 // AWS WAF's count for headers and cookies; Coraza's cost per value grows faster than linearly
	MaxMaxValues        = 4096
	jsonDepthLimit      = 1024 // Coraza's recommended SecRequestBodyJsonDepthLimit
)

// Options says how much of a request is inspected, and how.
type Options struct {
	// MaxBodyBytes is how much of a request body is inspected: 0 means
	// 8,192 (Google's default), at most 65,536 (Google's largest
	// requestBodyInspectionSize). Bytes past it are not inspected.
	MaxBodyBytes int
	// MaxHeadBytes bounds the request target and headers inspected
	// together: 0 means 16,384, at most 1 MiB. Past it, headers are
	// inspected in name order until it is spent (a longer target is cut)
	// and Result.HeadTruncated is set.
	MaxHeadBytes int
	// MaxValues bounds the values of each kind inspected: query
	// arguments, body arguments (form fields, JSON values, multipart
	// fields), cookies and header lines. 0 means 200, at most 4,096. Those
	// past it are not inspected and Result.ArgsTruncated (arguments) or
	// HeadTruncated (cookies, header lines) is set.
	MaxValues int
	// JSONParsing reads application/json and application/*+json bodies
	// as JSON, each value an argument (Google's advancedOptionsConfig
	// jsonParsing STANDARD). Off (Google's default), such a body is
	// inspected as CRS inspects any body of a type it does not parse:
	// whole, and split at & and = as a form would be.
	JSONParsing bool
	// JSONContentTypes are further media types (type/subtype, any case)
	// whose bodies JSONParsing reads as JSON (Google's
	// jsonCustomConfig.contentTypes).
	JSONContentTypes []string
}

func (o Options) normalized() (Options, error) {
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxHeadBytes == 0 {
		o.MaxHeadBytes = DefaultMaxHeadBytes
	}
	if o.MaxValues == 0 {
		o.MaxValues = DefaultMaxValues
	}
	if o.MaxValues < 0 || o.MaxValues > MaxMaxValues {
		return o, fmt.Errorf("WAF value limit %d: it takes 1 to %d (0 for the default %d)", o.MaxValues, MaxMaxValues, DefaultMaxValues)
	}
	if o.MaxBodyBytes < 0 || o.MaxBodyBytes > MaxMaxBodyBytes {
		return o, fmt.Errorf("WAF body inspection size %d: it takes 1 to %d bytes (0 for the default %d)", o.MaxBodyBytes, MaxMaxBodyBytes, DefaultMaxBodyBytes)
	}
	if o.MaxHeadBytes < 0 || o.MaxHeadBytes > MaxMaxHeadBytes {
		return o, fmt.Errorf("WAF head inspection size %d: it takes 1 to %d bytes (0 for the default %d)", o.MaxHeadBytes, MaxMaxHeadBytes, DefaultMaxHeadBytes)
	}
	return o, nil
}

// Compiler builds Engines and keeps every Coraza WAF it built, so that
// Engines needing the same CRS files at the same paranoia levels with the
// same Options share one (the rule sets' own sensitivities and opt-outs
// are filters over its matches, not part of it). Keep one Compiler across
// config reloads; it is safe for concurrent use.
type Compiler struct {
	index ruleIndex

	mu   sync.Mutex
	wafs map[string]coraza.WAF
}

// NewCompiler indexes the embedded CRS's signatures.
func NewCompiler() (*Compiler, error) {
	idx, err := loadIndex(coreruleset.FS)
	if err != nil {
		return nil, err
	}
	return &Compiler{index: idx, wafs: map[string]coraza.WAF{}}, nil
}

// Compile builds an Engine for sets with a throwaway Compiler; config
// loading should keep one Compiler instead.
func Compile(sets []SetRef, opts Options) (*Engine, error) {
	c, err := NewCompiler()
	if err != nil {
		return nil, err
	}
	return c.Compile(sets, opts)
}

// Compile builds the Engine that evaluates sets (the preconfigured rule
// sets of one security policy, say) with one Coraza transaction per
// request. Every set is checked: an unknown set name, a sensitivity out
// of 0-4 or a malformed signature ID is an error naming the fix; a
// signature the embedded CRS does not have, or one outside its set, is a
// warning (Engine.Warnings), since it cannot match anyway. Call it at
// config load, never per request: it may parse the CRS (about 0.4 s).
func (c *Compiler) Compile(sets []SetRef, opts Options) (*Engine, error) {
	opts, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	e := &Engine{opts: opts, sets: make([]compiledSet, len(sets))}
	levels := map[int]int{} // category prefix → paranoia level to run it at
	for i, ref := range sets {
		cs, level, warnings, err := c.compileSet(ref)
		if err != nil {
			return nil, err
		}
		e.sets[i] = cs
		e.warnings = append(e.warnings, warnings...)
		if level > levels[cs.def.cat.prefix] {
			levels[cs.def.cat.prefix] = level
		}
	}
	for p, l := range levels {
		if l == 0 {
			delete(levels, p)
		}
	}
	if len(levels) == 0 {
		return e, nil // nothing can match: no set has a signature on
	}
	e.waf, e.key, err = c.waf(levels, opts)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// compiledSet is a SetRef resolved to the CRS rules it turns on.
type compiledSet struct {
	ref     SetRef
	def     setDef
	enabled map[int]string // CRS rule ID → Google's signature ID
}

// compileSet resolves ref against the index: the rules it turns on, the
// paranoia level the CRS must run its file at for them to run, and
// warnings about signatures that cannot match.
func (c *Compiler) compileSet(ref SetRef) (compiledSet, int, []string, error) {
	if err := ref.Validate(); err != nil {
		return compiledSet{}, 0, nil, err
	}
	def, _ := lookupSet(ref.Set) // Validate resolved it
	cs := compiledSet{ref: ref, def: def, enabled: map[int]string{}}
	out, in, warnings := c.signatures(def, ref)
	level := 0
	for id, l := range c.index {
		if !def.covers(id) || out[id] || (l > ref.Sensitivity && !in[id]) {
			continue
		}
		cs.enabled[id] = def.googleID(id)
		level = max(level, l)
	}
	return cs, level, warnings, nil
}

// signatures parses ref's opt-outs and opt-ins (Validate checked their
// form) and warns about those that cannot match.
func (c *Compiler) signatures(def setDef, ref SetRef) (out, in map[int]bool, warnings []string) {
	out, in = map[int]bool{}, map[int]bool{}
	for _, list := range []struct {
		ids []string
		to  map[int]bool
	}{{ref.OptOut, out}, {ref.OptIn, in}} {
		for _, s := range list.ids {
			sig, _ := def.parseSignature(s)
			list.to[sig.id] = true
			switch _, known := c.index[sig.id]; {
			case !def.covers(sig.id):
				warnings = append(warnings, fmt.Sprintf("rule set %q: signature %q is not one of its signatures; it has no effect", ref.Set, s))
			case !known:
				warnings = append(warnings, fmt.Sprintf("rule set %q: signature %q: CRS %s, which Spillway runs, has no rule %d; it has no effect", ref.Set, s, CRSVersion, sig.id))
			}
		}
	}
	return out, in, warnings
}

// waf returns the Coraza WAF running the CRS files of levels (category
// prefix → paranoia level), building it on first use.
func (c *Compiler) waf(levels map[int]int, opts Options) (coraza.WAF, string, error) {
	prefixes := make([]int, 0, len(levels))
	for p := range levels {
		prefixes = append(prefixes, p)
	}
	sort.Ints(prefixes)
	var key strings.Builder
	for _, p := range prefixes {
		fmt.Fprintf(&key, "%d:%d,", p, levels[p])
	}
	fmt.Fprintf(&key, "body=%d,head=%d,values=%d,json=%t", opts.MaxBodyBytes, opts.MaxHeadBytes, opts.MaxValues, opts.JSONParsing)
	if opts.JSONParsing && len(opts.JSONContentTypes) > 0 {
		fmt.Fprintf(&key, "%q", opts.JSONContentTypes)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.wafs[key.String()]; ok {
		return w, key.String(), nil
	}
	w, err := coraza.NewWAF(coraza.NewWAFConfig().
		WithRootFS(coreruleset.FS).
		WithDirectives(directivesFor(prefixes, levels, opts)))
	if err != nil {
		return nil, "", fmt.Errorf("loading the CRS into Coraza (it needs a writable temporary directory, $TMPDIR, at load): %w", err)
	}
	c.wafs[key.String()] = w
	return w, key.String(), nil
}

// ruleArgsLimit is the rule that matches when arguments were dropped
// (SecArgumentsLimit).
const ruleArgsLimit = 900020

// directivesFor writes the Coraza configuration: detection only (the
// Engine decides), the body limits, CRS's initialization, then each
// category file after two actions that set the paranoia level its
// skip rules read (one per phase, since Coraza runs phase 1 of every file
// before phase 2 of any).
func directivesFor(prefixes []int, levels map[int]int, opts Options) string {
	top := 0
	for _, l := range levels {
		top = max(top, l)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `SecRuleEngine DetectionOnly
SecRequestBodyAccess On
SecRequestBodyLimit %[1]d
SecRequestBodyInMemoryLimit %[1]d
SecRequestBodyLimitAction ProcessPartial
SecRequestBodyJsonDepthLimit %[2]d
SecArgumentsLimit %[3]d
SecResponseBodyAccess Off
SecAuditEngine Off
SecDefaultAction "phase:1,log,pass"
SecDefaultAction "phase:2,log,pass"
SecAction "id:900990,phase:1,pass,nolog,setvar:tx.crs_setup_version=%[4]s"
SecAction "id:900000,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level=%[5]d"
SecAction "id:900001,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=%[5]d"
SecRule ARGUMENTS_LIMIT_REACHED|TX:%[7]s "@eq 1" "id:%[6]d,phase:2,pass,nolog"
SecRule REQBODY_PROCESSOR "@streq MULTIPART" "id:900011,phase:1,pass,nolog,ctl:requestBodyProcessor=%[8]s"
`, opts.MaxBodyBytes, jsonDepthLimit, opts.MaxValues, crsSetupVersion, top, ruleArgsLimit, txArgsCut, multipartProcessor)
	if opts.JSONParsing {
		b.WriteString(`SecRule REQUEST_HEADERS:Content-Type "@rx ^application/(?:[a-z0-9.-]+[+])?json" "id:900010,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
`)
		if re := jsonTypesPattern(opts.JSONContentTypes); re != "" {
			fmt.Fprintf(&b, "SecRule REQUEST_HEADERS:Content-Type \"@rx %s\" \"id:900012,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON\"\n", re)
		}
	}
	b.WriteString("Include @owasp_crs/REQUEST-901-INITIALIZATION.conf\n")
	for _, p := range prefixes {
		for phase := 1; phase <= 2; phase++ {
			fmt.Fprintf(&b, "SecAction \"id:%d,phase:%d,pass,nolog,setvar:tx.detection_paranoia_level=%d\"\n", 9000000+p*10+phase, phase, levels[p])
		}
		fmt.Fprintf(&b, "Include @owasp_crs/%s\n", fileOf(p))
	}
	return b.String()
}

// jsonTypesPattern is the regular expression of a Content-Type whose
// media type is one of types ("" for none): the type, then parameters
// or the end.
func jsonTypesPattern(types []string) string {
	var alts []string
	for _, t := range types {
		var q strings.Builder
		for _, c := range strings.ToLower(strings.TrimSpace(t)) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				fmt.Fprintf(&q, "\\x%02x", c) // any other byte of a token, escaped
				continue
			}
			q.WriteRune(c)
		}
		if q.Len() > 0 {
			alts = append(alts, q.String())
		}
	}
	if len(alts) == 0 {
		return ""
	}
	return `^(?:` + strings.Join(alts, "|") + `)\s*(?:;|$)`
}

func fileOf(prefix int) string {
	for _, c := range categories {
		if c.prefix == prefix {
			return c.file
		}
	}
	panic(fmt.Sprintf("waf: no CRS file for prefix %d", prefix))
}
