package proxy_test

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/route"
)

// The HTTP/2 downgrade harness (issue 17). An HTTP/2 request, given as a
// raw header list (written unchecked, as a hostile client would) and an
// optional body, goes through Spillway (the proxy handler on
// NewH1Server: h2c with prior knowledge, handed off from the HTTP/1.1
// loop, on each HTTP/2 server loop) and through net/http's own HTTP/2 → HTTP/1.1 path (its HTTP/2
// server in front of httputil.ReverseProxy over an HTTP/1.1 Transport),
// each to its own recording backend, which parses what it gets with
// http.ReadRequest. compareH2 then applies these rules:
//
//	H0  What Spillway's backend receives is the request the client sent:
//	    it parses, and its method, target and Host are :method, :path
//	    (normalised as docs/security.md "Paths" says) and :authority. No
//	    field of the client's can rewrite the request line or add a
//	    field: that is the HTTP/2 desync class (request-line injection
//	    through :method or :path, H2.CL, H2.TE, CRLF in names or values).
//	H1  When both forward, the backends receive the same request, but
//	    for D1.
//	H2  When net/http's HTTP/2 server refuses a request (stream or
//	    connection error, or a 4xx of its own), Spillway refuses it too:
//	    Spillway is never the more lenient of the two at the HTTP/2
//	    layer.
//	H3  When Spillway refuses a request (400, or a stream or connection
//	    error) that net/http forwards as it was sent and answers, a
//	    deliberate difference below says why. (When both reset the
//	    stream, whether either backend saw the head first is a race.)
//
// H1 to H3 are not applied to a body longer than its content-length
// field (H2.CL): whether a server answers before it reads the DATA
// that breaks the length is a race on both; H0 holds regardless.
//
// Deliberate differences:
//
//	D1  The path is normalised before it is forwarded (dot segments,
//	    merged slashes, escapes; docs/security.md "Paths"); net/http
//	    forwards it as received. The reference's target is normalised
//	    before comparing. A path Spillway cannot normalise gets 400
//	    invalid_request_path.
//	D2  ":path: *" is refused on any method but OPTIONS (RFC 9110
//	    §7.1); net/http forwards "GET * HTTP/1.1".
//	D3  A Host field that differs from :authority is refused (RFC 9113
//	    §8.3.1: "SHOULD treat as malformed"); net/http's Go 1.26 server
//	    routes on :authority and drops the Host field.
//	D4  A request whose :method, :path or :authority an HTTP/1.1 request
//	    line could not carry as it is gets 400 invalid_request. net/http
//	    either refuses it in its transport (502) or rewrites it (a
//	    non-ASCII :authority goes out as punycode, an invalid one as an
//	    empty Host, "/x?a b" as a broken request line, and ":path: / "
//	    as "/%20", which H0's comparison takes for the path as sent:
//	    FuzzDiffH2 found it). A :path ending in whitespace is also
//	    malformed under RFC 9113 §8.2.1.
//	D5  Spillway adds trace context fields (traceparent,
//	    X-Cloud-Trace-Context) to a request that has none (doc.go);
//	    they are left out of H1's comparison.

// h2Input is one request of the harness.
type h2Input struct {
	method, scheme, authority, path string
	fields                          []string // regular fields: name, value pairs
	body                            []byte   // nil: END_STREAM on HEADERS
}

// list returns the header list as written: pseudo-header fields first,
// each left out when empty.
func (in h2Input) list() []string {
	var l []string
	for _, p := range [][2]string{{":method", in.method}, {":scheme", in.scheme}, {":authority", in.authority}, {":path", in.path}} {
		if p[1] != "" {
			l = append(l, p[0], p[1])
		}
	}
	return append(l, in.fields...)
}

// h2Run is what one frontend did with one input.
type h2Run struct {
	resp   h2Response
	closed bool // the connection ended before the stream did
	reqs   []recReq
}

// forwarded reports that the backend got exactly one request it parsed.
func (r h2Run) forwarded() bool {
	return len(r.reqs) == 1 && !strings.HasPrefix(r.reqs[0].Method, "<")
}

// refused reports that the frontend refused the request itself: a stream
// or connection error, or a 4xx without a backend request.
func (r h2Run) refused() bool {
	return len(r.reqs) == 0 && (r.closed || r.resp.goAway || r.resp.reset != 0 || r.resp.status >= 400 && r.resp.status < 500)
}

// streamFailed reports that the client's stream ended in a stream or
// connection error.
func (r h2Run) streamFailed() bool { return r.closed || r.resp.goAway || r.resp.reset != 0 }

// withoutTrace returns h without the trace context fields the proxy
// generates when the client sent none (D5).
func withoutTrace(in h2Input, h http.Header) http.Header {
	if h == nil || hasField(in, "traceparent") || hasField(in, "x-cloud-trace-context") {
		return h
	}
	h = h.Clone()
	delete(h, "Traceparent")
	delete(h, "X-Cloud-Trace-Context")
	if len(h) == 0 {
		return nil
	}
	return h
}

// hasField reports whether the input has a regular field named name.
func hasField(in h2Input, name string) bool {
	for i := 0; i+1 < len(in.fields); i += 2 {
		if strings.EqualFold(in.fields[i], name) {
			return true
		}
	}
	return false
}

// h2Frontends are the two frontends of the harness.
type h2Frontends struct {
	spill, std     string // addresses
	spillBE, stdBE *recBackend
	runs           atomic.Int64 // numbers the runs (diffIDField)
}

// diffIDField tags each run's request, so that a request a frontend
// forwards after its client's stream has ended (a reset mid-body) is
// never taken for the next run's.
const diffIDField = "x-diff-id"

// newH2Frontends starts Spillway's frontend with HTTP/2 on the loop h2s,
// and the reference.
func newH2Frontends(tb testing.TB, h2s proxy.HTTP2Server) *h2Frontends {
	tb.Helper()
	f := &h2Frontends{spillBE: newRecBackend(tb), stdBE: newRecBackend(tb)}
	f.spill = serveDiffH2(tb, diffHandler(tb, f.spillBE.ln.Addr().String(), nil), true, h2s)
	target := &url.URL{Scheme: "http", Host: f.stdBE.ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(target)
	var p1 http.Protocols
	p1.SetHTTP1(true)
	rp.Transport = &http.Transport{Protocols: &p1, DisableCompression: true}
	rp.ErrorLog = log.New(io.Discard, "", 0)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: rp, Protocols: &p, ErrorLog: log.New(io.Discard, "", 0)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	f.std = ln.Addr().String()
	return f
}

// run sends in to one frontend on a new connection.
func (f *h2Frontends) run(tb testing.TB, addr string, be *recBackend, in h2Input) h2Run {
	tb.Helper()
	id := strconv.FormatInt(f.runs.Add(1), 10)
	c := dialH2(tb, addr, false)
	defer c.c.Close()
	c.wait = 3 * time.Second // both frontends time out in 2 s (diffHandler); net/http's on its own
	r, err := c.response(c.request(in.body, append(in.list(), diffIDField, id)...))
	run := h2Run{resp: r, closed: err != nil}
	if run.streamFailed() {
		// The frontend may still be forwarding: let the backend finish.
		for t := time.Now(); time.Since(t) < settleMax && (be.busy.Load() > 0 || be.slowing.Load() > 0); {
			time.Sleep(time.Millisecond)
		}
	}
	for _, q := range be.take() {
		if strings.HasPrefix(q.Method, "<") {
			// Unparsable, so untagged: always a finding (H0).
			run.reqs = append(run.reqs, q)
		} else if slices.Contains(q.Header[http.CanonicalHeaderKey(diffIDField)], id) {
			q.Header = q.Header.Clone()
			delete(q.Header, http.CanonicalHeaderKey(diffIDField))
			if len(q.Header) == 0 {
				q.Header = nil
			}
			run.reqs = append(run.reqs, q)
		}
	}
	return run
}

// compareH2 applies the harness rules; it returns "" when they hold.
func compareH2(in h2Input, s, n h2Run) string {
	if len(s.reqs) > 1 {
		return "H0: Spillway's backend got more than one request"
	}
	if len(s.reqs) == 1 {
		if why := sameAsSent(in, s.reqs[0]); why != "" {
			return "H0: " + why
		}
	}
	if overLength(in) {
		// H2.CL: which comes first, the handler's answer or the DATA
		// that breaks the declared length, is a race on both servers;
		// H0 alone holds (the backend never sees the extra bytes).
		return ""
	}
	switch {
	case s.forwarded() && n.forwarded():
		want := n.reqs[0]
		s.reqs[0].Header = withoutTrace(in, s.reqs[0].Header)                                    // D5
		if norm, err := route.NormalizePath(pathOf(want.URI), route.PathOptions{}); err == nil { // D1
			want.URI = norm + queryOf(want.URI)
		}
		if !sameReqs([]recReq{s.reqs[0]}, []recReq{want}) {
			return "H1: the backends got different requests"
		}
	case s.forwarded() && n.refused() && !s.streamFailed():
		return "H2: Spillway forwarded what net/http's HTTP/2 server refused"
	case s.refused() && n.forwarded() && !n.streamFailed() && sameAsSent(in, n.reqs[0]) == "":
		switch {
		case s.resp.status == http.StatusBadRequest && s.resp.header.Get("X-Spillway-Status-Details") == "invalid_request_path": // D1
		case in.path == "*" && in.method != http.MethodOptions: // D2
		case hostField(in) != "" && hostField(in) != in.authority && in.authority != "": // D3
		case s.resp.status == http.StatusBadRequest && s.resp.header.Get("X-Spillway-Status-Details") == "invalid_request" &&
			(!h1.ValidMethod(in.method) || !h1.ValidTarget(in.path) || !h1.ValidHost(in.authority)): // D4
		default:
			return "H3: Spillway refused what net/http forwards as sent, with no rule for it"
		}
	}
	return ""
}

// sameAsSent checks that a backend got the client's request line and
// Host as sent (H0), "" when it did.
func sameAsSent(in h2Input, got recReq) string {
	if strings.HasPrefix(got.Method, "<") {
		return "the backend could not parse what it got: " + got.URI
	}
	if got.Method != in.method {
		return "method " + quote(in.method) + " arrived as " + quote(got.Method)
	}
	host := in.authority
	if host == "" {
		host = hostField(in)
	}
	if got.Host != host {
		return "authority " + quote(host) + " arrived as Host " + quote(got.Host)
	}
	wantPath := pathOf(in.path)
	if norm, err := route.NormalizePath(wantPath, route.PathOptions{}); err == nil {
		wantPath = norm
	}
	if pathOf(got.URI) != wantPath && pathOf(got.URI) != pathOf(in.path) || queryOf(got.URI) != queryOf(in.path) {
		return "path " + quote(in.path) + " arrived as " + quote(got.URI)
	}
	// A stream the frontend resets mid-body may leave the backend with
	// part of it; never with more, nor with other bytes.
	if !bytes.HasPrefix(in.body, []byte(got.Body)) {
		return "body " + quote(string(in.body)) + " arrived as " + quote(got.Body)
	}
	return ""
}

// overLength reports a request whose body is longer than its
// content-length field declares.
func overLength(in h2Input) bool {
	for i := 0; i+1 < len(in.fields); i += 2 {
		if strings.EqualFold(in.fields[i], "content-length") {
			n, err := strconv.Atoi(in.fields[i+1])
			return err == nil && n < len(in.body)
		}
	}
	return false
}

// hostField returns the value of the input's first "host" field.
func hostField(in h2Input) string {
	for i := 0; i+1 < len(in.fields); i += 2 {
		if strings.EqualFold(in.fields[i], "host") {
			return in.fields[i+1]
		}
	}
	return ""
}

func pathOf(uri string) string {
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		return uri[:i]
	}
	return uri
}

func queryOf(uri string) string {
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		return uri[i:]
	}
	return ""
}

func quote(s string) string { return "\"" + strings.ReplaceAll(s, "\r\n", `\r\n`) + "\"" }

// h2Seeds are the downgrade cases of the published HTTP/2 desync
// research and issue 17's findings, each with what it tries.
var h2Seeds = []struct {
	name string
	in   h2Input
}{
	{"plain GET", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/p?q=1", fields: []string{"accept", "*/*"}}},
	{"POST with body", h2Input{method: "POST", scheme: "http", authority: "a.example", path: "/p", fields: []string{"content-length", "5"}, body: []byte("hello")}},
	{"cookie crumbs", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/", fields: []string{"cookie", "a=1", "cookie", "b=2"}}},
	{"request line in :method", h2Input{method: "GET /admin HTTP/1.1", scheme: "http", authority: "a.example", path: "/public"}},
	{"space in :method", h2Input{method: "PO ST", scheme: "http", authority: "a.example", path: "/"}},
	{"space in :path query", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/x?a b"}},
	{"request in :path", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/ HTTP/1.1\r\nHost: evil\r\n\r\nGET /x"}},
	{"CRLF in :authority", h2Input{method: "GET", scheme: "http", authority: "a.example\r\nX-Evil: 1", path: "/"}},
	{"userinfo in :authority", h2Input{method: "GET", scheme: "http", authority: "u@a.example", path: "/"}},
	{"non-ASCII :authority", h2Input{method: "GET", scheme: "http", authority: "é.example.com", path: "/"}},
	{"quote in :authority", h2Input{method: "GET", scheme: "http", authority: `pub"lic.example.com`, path: "/"}},
	{"URL in :scheme", h2Input{method: "GET", scheme: "http://evil.example/x?", authority: "a.example", path: "/"}},
	{"Host differs from :authority", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/", fields: []string{"host", "evil.example"}}},
	{"Host without :authority", h2Input{method: "GET", scheme: "http", path: "/", fields: []string{"host", "a.example"}}},
	{"H2.CL", h2Input{method: "POST", scheme: "http", authority: "a.example", path: "/", fields: []string{"content-length", "0"}, body: []byte("GET /admin HTTP/1.1\r\nHost: a.example\r\n\r\n")}},
	{"H2.TE", h2Input{method: "POST", scheme: "http", authority: "a.example", path: "/", fields: []string{"transfer-encoding", "chunked"}, body: []byte("0\r\n\r\nGET /admin HTTP/1.1\r\nHost: a.example\r\n\r\n")}},
	{"CRLF in a value", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/", fields: []string{"foo", "bar\r\nTransfer-Encoding: chunked"}}},
	{"CRLF in a name", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/", fields: []string{"foo: bar\r\nhost", "evil"}}},
	{"colon in a name", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/", fields: []string{"foo:bar", "1"}}},
	{"upper-case name", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/", fields: []string{"Foo", "1"}}},
	{"connection field", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/", fields: []string{"connection", "keep-alive"}}},
	{"te gzip", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/", fields: []string{"te", "gzip"}}},
	{"pseudo after regular", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "", fields: []string{"accept", "*/*", ":path", "/late"}}},
	{"asterisk GET", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "*"}},
	{"asterisk OPTIONS", h2Input{method: "OPTIONS", scheme: "http", authority: "a.example", path: "*"}},
	{"absolute :path", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "http://evil.example/"}},
	{"dot segments", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/a/../b/./c"}},
	{"malformed escape", h2Input{method: "GET", scheme: "http", authority: "a.example", path: "/a%zz"}},
}

// TestDiffH2Seeds runs the seed cases through the harness, on each
// HTTP/2 server loop.
func TestDiffH2Seeds(t *testing.T) {
	forH2Servers(t, func(t *testing.T, h2s proxy.HTTP2Server) {
		f := newH2Frontends(t, h2s)
		for _, sd := range h2Seeds {
			s := f.run(t, f.spill, f.spillBE, sd.in)
			n := f.run(t, f.std, f.stdBE, sd.in)
			if why := compareH2(sd.in, s, n); why != "" {
				t.Errorf("%s: %s\n  spillway: %v closed=%v %v\n  net/http: %v closed=%v %v", sd.name, why, s.resp, s.closed, s.reqs, n.resp, n.closed, n.reqs)
			}
		}
	})
}

// FuzzDiffH2 mutates HTTP/2 requests through the harness. fields holds
// regular fields as "name\x00value\x00…".
func FuzzDiffH2(f *testing.F) {
	for _, sd := range h2Seeds {
		f.Add(sd.in.method, sd.in.scheme, sd.in.authority, sd.in.path, strings.Join(sd.in.fields, "\x00"), sd.in.body, sd.in.body != nil)
	}
	frs := []*h2Frontends{newH2Frontends(f, proxy.H2NetHTTP), newH2Frontends(f, proxy.H2Spillway)}
	f.Fuzz(func(t *testing.T, method, scheme, authority, path, fields string, body []byte, hasBody bool) {
		in := h2Input{method: method, scheme: scheme, authority: authority, path: path}
		if fields != "" {
			in.fields = strings.Split(fields, "\x00")
			if len(in.fields)%2 == 1 {
				in.fields = in.fields[:len(in.fields)-1]
			}
		}
		if hasBody {
			in.body = append([]byte{}, body...)
		}
		if len(in.list()) > 64 || len(body) > 1<<14 {
			return
		}
		for i, fr := range frs {
			s := fr.run(t, fr.spill, fr.spillBE, in)
			n := fr.run(t, fr.std, fr.stdBE, in)
			if why := compareH2(in, s, n); why != "" {
				t.Errorf("%s (HTTP/2 loop %s)\n  spillway: %v closed=%v %v\n  net/http: %v closed=%v %v", why, h2Servers[i], s.resp, s.closed, s.reqs, n.resp, n.closed, n.reqs)
			}
		}
	})
}
