package waf

import (
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"

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
	// HeadTruncated says only part of the request target and headers
	// was inspected: they were larger than Options.MaxHeadBytes, or had
	// more header lines or cookies than Options.MaxValues.
	HeadTruncated bool
	// BodyTruncated says the body was larger than what was inspected
	// (Options.MaxBodyBytes, or the prefix Evaluate was given).
	BodyTruncated bool
	// ArgsTruncated says query or body arguments past Options.MaxValues
	// were not inspected.
	ArgsTruncated bool
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
	// First is where the first of them matched.
	First *MatchDetail
}

// MatchDetail is the value a signature matched.
type MatchDetail struct {
	// Variable is the CRS's name of the kind of value (ARGS_GET,
	// REQUEST_HEADERS, REQUEST_COOKIES, REQUEST_BODY, ...) and Key its
	// name within it ("" for a whole value).
	Variable, Key string
	// Value is the value after the rule's transformations.
	Value string
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
// The work is bounded by the Options: at most MaxHeadBytes of head,
// MaxBodyBytes of body and MaxValues values of each kind.
func (e *Engine) Evaluate(r *http.Request, bodyPrefix []byte) Result {
	res := Result{Sets: make([]SetResult, len(e.sets))}
	if e.waf == nil {
		return res
	}
	tx := e.waf.NewTransaction()
	defer func() { _ = tx.Close() }()
	e.head(tx, r, &res)
	tx.ProcessRequestHeaders()
	e.body(tx, r, bodyPrefix, &res)
	if _, err := tx.ProcessRequestBody(); err != nil && res.Err == nil {
		res.Err = err
	}
	e.collect(tx, &res)
	return res
}

// head feeds the connection, request line and headers, within
// MaxHeadBytes and MaxValues.
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
	size, lines := 0, 0
	for k, vs := range r.Header {
		for _, v := range vs {
			size += len(k) + len(v)
			lines++
		}
	}
	h := headerFeed{tx: tx, bytes: budget, lines: e.opts.MaxValues, cookies: e.opts.MaxValues}
	if size <= budget && lines <= e.opts.MaxValues {
		for k, vs := range r.Header {
			for _, v := range vs {
				h.add(k, v)
			}
		}
	} else {
		h.addSorted(r.Header)
	}
	res.HeadTruncated = res.HeadTruncated || h.cut
}

// headerFeed adds headers to a transaction within a budget of bytes,
// header lines and cookies.
type headerFeed struct {
	tx                    types.Transaction
	bytes, lines, cookies int
	cut                   bool
}

// addSorted adds h in name order until the budget is spent.
func (f *headerFeed) addSorted(h http.Header) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range h[k] {
			f.add(k, v)
		}
	}
}

// add adds one header line, cut to what is left of the budget.
func (f *headerFeed) add(k, v string) {
	if f.lines == 0 || f.bytes <= len(k) {
		f.cut = true
		return
	}
	f.lines--
	f.bytes -= len(k)
	if len(v) > f.bytes {
		v, f.cut = v[:f.bytes], true
	}
	if k == "Cookie" {
		v = f.capCookies(v)
	}
	f.bytes -= len(v)
	f.tx.AddRequestHeader(k, v)
}

// capCookies cuts a Cookie value after the cookies left in the budget.
func (f *headerFeed) capCookies(v string) string {
	n := strings.Count(v, ";") + 1
	if n <= f.cookies {
		f.cookies -= n
		return v
	}
	f.cut = true
	end := 0
	for range f.cookies {
		end += strings.IndexByte(v[end:], ';') + 1
	}
	f.cookies = 0
	return v[:max(end-1, 0)]
}

// body feeds the first MaxBodyBytes of the body to Coraza, which parses
// forms, multipart/form-data (with multipartBodyProcessor), JSON when
// Options.JSONParsing, and else inspects it whole and split as a form
// (CRS's forceRequestBodyVariable).
func (e *Engine) body(tx types.Transaction, r *http.Request, prefix []byte, res *Result) {
	body := prefix
	if len(body) > e.opts.MaxBodyBytes {
		body = body[:e.opts.MaxBodyBytes]
	}
	if len(body) < len(prefix) || r.ContentLength > int64(len(body)) {
		res.BodyTruncated = true
	}
	if len(body) == 0 {
		return
	}
	if _, _, err := tx.WriteRequestBody(body); err != nil {
		res.Err = err
	}
}

// collect turns the transaction's matched rules into per-set results.
func (e *Engine) collect(tx types.Transaction, res *Result) {
	for _, m := range tx.MatchedRules() {
		id := m.Rule().ID()
		if id == ruleArgsLimit {
			res.ArgsTruncated = true
		}
		for i := range e.sets {
			gid, ok := e.sets[i].enabled[id]
			if !ok {
				continue
			}
			s := &res.Sets[i]
			if !containsString(s.IDs, gid) {
				s.IDs = append(s.IDs, gid)
			}
			if md := m.MatchedDatas(); s.First == nil && len(md) > 0 {
				s.First = &MatchDetail{Variable: md[0].Variable().Name(), Key: md[0].Key(), Value: md[0].Value()}
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
