package waf

import (
	"net"
	"net/http"
	"sort"
	"strconv"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/types"
)

// Engine evaluates a request against preconfigured rule sets. It is
// immutable and safe for concurrent use.
type Engine struct {
	opts     Options
	sets     []compiledSet
	warnings []string
	waf      coraza.WAF // nil when no set has a signature on
	key      string     // the Compiler's key for waf
}

// Sets returns the rule sets in the order Compile was given them, which
// is the order of Result.Sets.
func (e *Engine) Sets() []SetRef {
	out := make([]SetRef, len(e.sets))
	for i, s := range e.sets {
		out[i] = s.ref
	}
	return out
}

// Warnings lists the signatures Compile found could never match (unknown
// to the embedded CRS, or outside their set), for the config loader to
// report.
func (e *Engine) Warnings() []string { return e.warnings }

// Options returns the Options in force, defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Result is what one request matched.
type Result struct {
	// Sets holds one entry per rule set, in Engine.Sets order.
	Sets []SetResult
	// HeadTruncated says the request target and headers were larger than
	// Options.MaxHeadBytes and only part of them was inspected.
	HeadTruncated bool
	// BodyTruncated says the body was larger than what was inspected
	// (Options.MaxBodyBytes, or the prefix Evaluate was given).
	BodyTruncated bool
	// Err is an error Coraza reported while reading the request; the
	// sets' results hold what was found before it.
	Err error
}

// SetResult is one rule set's verdict.
type SetResult struct {
	// Matched is the value of the set's evaluatePreconfiguredWaf or
	// evaluatePreconfiguredExpr call: true when any of its signatures
	// that are on matched.
	Matched bool
	// IDs are the signatures that matched, in Google's form, in the
	// order the CRS ran them: the log's preconfiguredExprIds.
	IDs []string
}

// Matched reports whether set i matched; false for an index out of range.
func (r Result) Matched(i int) bool {
	return i >= 0 && i < len(r.Sets) && r.Sets[i].Matched
}

// Evaluate runs the rule sets over r and the first bytes of its body
// (bodyPrefix; nil for none). It reads r's method, request target
// (RequestURI, else URL), protocol, Host, headers, transfer encodings and
// RemoteAddr; never r.Body. The body's Content-Type decides how
// bodyPrefix is parsed; of it, at most Options.MaxBodyBytes are read.
// The work is linear in the bytes inspected: at most MaxHeadBytes of head
// and MaxBodyBytes of body.
func (e *Engine) Evaluate(r *http.Request, bodyPrefix []byte) Result {
	res := Result{Sets: make([]SetResult, len(e.sets))}
	if e.waf == nil {
		return res
	}
	tx := e.waf.NewTransaction()
	defer func() { _ = tx.Close() }()
	e.head(tx, r, &res)
	tx.ProcessRequestHeaders()
	body := bodyPrefix
	if len(body) > e.opts.MaxBodyBytes {
		body = body[:e.opts.MaxBodyBytes]
	}
	if len(body) < len(bodyPrefix) || r.ContentLength > int64(len(body)) {
		res.BodyTruncated = true
	}
	if len(body) > 0 {
		if _, _, err := tx.WriteRequestBody(body); err != nil {
			res.Err = err
		}
	}
	if _, err := tx.ProcessRequestBody(); err != nil && res.Err == nil {
		res.Err = err
	}
	e.collect(tx, &res)
	return res
}

// head feeds the connection, request line and headers, within
// MaxHeadBytes.
func (e *Engine) head(tx types.Transaction, r *http.Request, res *Result) {
	if host, port, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		p, _ := strconv.Atoi(port)
		tx.ProcessConnection(host, p, "", 0)
	}
	uri := r.RequestURI
	if uri == "" && r.URL != nil {
		uri = r.URL.RequestURI()
	}
	budget := e.opts.MaxHeadBytes
	if len(uri) > budget {
		uri, res.HeadTruncated = uri[:budget], true
	}
	budget -= len(uri)
	tx.ProcessURI(uri, r.Method, r.Proto)
	if r.Host != "" {
		tx.AddRequestHeader("Host", r.Host)
		budget -= len("Host") + len(r.Host)
	}
	for _, te := range r.TransferEncoding {
		tx.AddRequestHeader("Transfer-Encoding", te)
		budget -= len("Transfer-Encoding") + len(te)
	}
	size := 0
	for k, vs := range r.Header {
		for _, v := range vs {
			size += len(k) + len(v)
		}
	}
	if size <= budget {
		for k, vs := range r.Header {
			for _, v := range vs {
				tx.AddRequestHeader(k, v)
			}
		}
		return
	}
	res.HeadTruncated = true
	addHeadersWithin(tx, r.Header, budget)
}

// addHeadersWithin adds headers in name order until budget bytes (names
// and values) are spent; the value that crosses it is cut.
func addHeadersWithin(tx types.Transaction, h http.Header, budget int) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range h[k] {
			if budget <= len(k) {
				return
			}
			budget -= len(k)
			if len(v) > budget {
				v = v[:budget]
			}
			budget -= len(v)
			tx.AddRequestHeader(k, v)
		}
	}
}

// collect turns the transaction's matched rules into per-set results.
func (e *Engine) collect(tx types.Transaction, res *Result) {
	for _, m := range tx.MatchedRules() {
		id := m.Rule().ID()
		for i := range e.sets {
			gid, ok := e.sets[i].enabled[id]
			if !ok {
				continue
			}
			s := &res.Sets[i]
			if !containsString(s.IDs, gid) {
				s.IDs = append(s.IDs, gid)
			}
			s.Matched = true
		}
	}
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
