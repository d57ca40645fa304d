package waf

import (
	"net/http"
	"net/url"
	"sync"

	"github.com/spillwaylb/spillway/internal/armor"
)

// ForArmor returns the WAF that security policies' expressions call
// (evaluatePreconfiguredWaf, evaluatePreconfiguredExpr): each call's rule
// set compiled with opts on one Compiler, made on the first call (a
// config without WAF calls pays nothing) and kept across reloads, so a
// reload reuses the Coraza WAFs it already built.
//
// opts.MaxBodyBytes 0 means MaxMaxBodyBytes here, not the default: each
// policy inspects its own requestBodyInspectionSize (8 KiB to 64 KiB),
// which armor.Policy.Evaluate enforces on the body prefix the proxy
// reads, so the Engine must take the largest.
func ForArmor(opts Options) armor.WAF {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = MaxMaxBodyBytes
	}
	return &armorWAF{opts: opts}
}

type armorWAF struct {
	opts Options
	once sync.Once
	c    *Compiler
	err  error
}

// Compile compiles one call's rule set, with its policy's JSON parsing.
func (w *armorWAF) Compile(c armor.WAFCall) (armor.WAFMatcher, error) {
	w.once.Do(func() { w.c, w.err = NewCompiler() })
	if w.err != nil {
		return nil, w.err
	}
	ref, err := ParseWaf(c.Set, map[string]any{keySensitivity: c.Sensitivity, keyOptOut: c.OptOut})
	if err != nil {
		return nil, err
	}
	opts := w.opts
	opts.JSONParsing = c.JSONParsing
	if c.JSONParsing {
		opts.JSONContentTypes = c.JSONContentTypes
	}
	e, err := w.c.Compile([]SetRef{ref}, opts)
	if err != nil {
		return nil, err
	}
	return armorMatcher{e}, nil
}

// armorMatcher runs one compiled set on a policy's request.
type armorMatcher struct{ e *Engine }

// Match runs the set over the request and its body prefix.
func (m armorMatcher) Match(r *armor.Request) armor.WAFMatch {
	target := r.Target
	if target == "" {
		target = (&url.URL{Path: r.Path, RawQuery: r.Query}).RequestURI()
	}
	hr := &http.Request{Method: r.Method, RequestURI: target, URL: &url.URL{Path: r.Path, RawQuery: r.Query},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: r.Host, Header: r.Header}
	if r.Peer.IsValid() {
		hr.RemoteAddr = r.Peer.String() + ":0"
	}
	res := m.e.Evaluate(hr, r.Body)
	if len(res.Sets) == 0 {
		return armor.WAFMatch{}
	}
	s := &res.Sets[0]
	out := armor.WAFMatch{Matched: s.Matched, IDs: s.IDs}
	if d := s.First; d != nil {
		v := d.Value
		if len(v) > armor.MaxMatchedValueBytes {
			v = v[:armor.MaxMatchedValueBytes]
		}
		out.Field = &armor.MatchedField{Type: d.Variable, Name: d.Key, Value: v, Length: len(d.Value)}
	}
	return out
}
