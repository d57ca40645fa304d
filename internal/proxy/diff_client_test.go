package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/proxy"
)

// The client harness. A hostile backend answers every connection with the
// input's byte stream (split and delayed as the input says) and closes.
// Each exec asks it the same body-less request four ways at once:
//
//   - direct: through h1.Transport (h1.NewTransport) and through
//     net/http's Transport (NewTransport), compared with compareDirect;
//   - proxied: through Spillway's production stack (H1Server + handler on
//     the fast transport) and through the reference stack (net/http's
//     server + handler on net/http's Transport), each checked against the
//     spec invariants and compared with compareProxied.

// Mode bits of a client input.
const (
	// diffHEAD sends HEAD instead of GET.
	diffHEAD = 1 << iota
)

// clientDeadline bounds one request of a client exec (the proxies' own
// timeout is 2 s; the hostile backend always closes, so it is rarely
// reached).
const clientDeadline = 3 * time.Second

// hostileScript is what the hostile backend answers with.
type hostileScript struct {
	stream []byte
	cuts   []cut
}

// scriptBackend writes the current script to every connection after
// reading a request head, then closes.
type scriptBackend struct {
	ln     net.Listener
	script atomic.Pointer[hostileScript]
	// active counts the connections being served: an exec waits for
	// it to reach 0, so that no late byte of its script (a delayed
	// write after a complete response) reaches the next exec through a
	// pooled connection.
	active atomic.Int32
	served atomic.Int32
}

func newScriptBackend(tb testing.TB) *scriptBackend {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	b := &scriptBackend{ln: ln}
	b.script.Store(&hostileScript{})
	var conns sync.Map
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, struct{}{})
			b.active.Add(1)
			go func() {
				defer b.active.Add(-1)
				defer conns.Delete(c)
				b.serve(c)
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	})
	return b
}

func (b *scriptBackend) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(clientDeadline))
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		if line == "\r\n" || line == "\n" {
			break
		}
	}
	b.served.Add(1)
	sc := b.script.Load()
	writeScheduled(c, sc.stream, sc.cuts)
	c.(*net.TCPConn).CloseWrite()
}

// clientOut is what a client got for one request.
type clientOut struct {
	err     string // the request failed: no response
	status  int
	header  http.Header
	body    string
	bodyErr string // the body ended in an error
}

func (o clientOut) String() string {
	if o.err != "" {
		return "error: " + o.err
	}
	s := fmt.Sprintf("%d %v body=%s", o.status, o.header, quoteShort([]byte(o.body), 200))
	if o.bodyErr != "" {
		s += " body error: " + o.bodyErr
	}
	return s
}

// readOut reads a response's body (up to maxStream) into an outcome.
func readOut(resp *http.Response) clientOut {
	o := clientOut{status: resp.StatusCode, header: resp.Header}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxStream))
	resp.Body.Close()
	o.body = string(b)
	if err != nil {
		o.bodyErr = err.Error()
	}
	return o
}

// diffClients is the client harness's fixture.
type diffClients struct {
	be         *scriptBackend
	fast, std  http.RoundTripper
	stdIdle    interface{ CloseIdleConnections() }
	proxyStdTr *http.Transport
	spill, ref string // proxy frontends: production and reference stacks
}

func newDiffClients(tb testing.TB) *diffClients {
	tb.Helper()
	be := newScriptBackend(tb)
	addr := be.ln.Addr().String()
	std := proxy.NewTransport()
	proxyStd := proxy.NewTransport()
	d := &diffClients{
		be:         be,
		fast:       h1.NewTransport(proxy.NewTransport()),
		std:        std,
		stdIdle:    std,
		proxyStdTr: proxyStd,
		spill:      serveDiff(tb, diffHandler(tb, addr, nil), true),
		ref:        serveDiff(tb, diffHandler(tb, addr, proxyStd), false),
	}
	tb.Cleanup(func() { std.CloseIdleConnections(); proxyStd.CloseIdleConnections() })
	return d
}

// clientRun is the four outcomes of one exec.
type clientRun struct {
	fast, std  clientOut // direct
	spill, ref clientOut // proxied
	connTokens []string  // fields the script's Connection headers name
	connClose  bool      // one of those headers also says "close"
	nonToken   bool      // a field name in the script's heads is not a token
	http10TE   bool      // the script's final head is HTTP/1.0 with Transfer-Encoding
	method     string
}

// run serves in through the hostile backend to all four clients.
func (d *diffClients) run(tb testing.TB, in diffInput) clientRun {
	stream := in.stream()
	d.be.script.Store(&hostileScript{stream: stream, cuts: cuts(in.sched, len(stream))})
	method := http.MethodGet
	if in.mode&diffHEAD != 0 {
		method = http.MethodHead
	}
	r := clientRun{method: method}
	r.connTokens, r.connClose = connectionTokens(stream)
	r.nonToken = nonTokenFieldName(stream)
	r.http10TE = http10TEHead(stream)
	var wg sync.WaitGroup
	direct := func(rt http.RoundTripper, out *clientOut) {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), clientDeadline)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+d.be.ln.Addr().String()+"/x", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			*out = clientOut{err: err.Error()}
			return
		}
		*out = readOut(resp)
	}
	proxied := func(addr string, out *clientOut) {
		defer wg.Done()
		*out = stackRequest(addr, method)
	}
	wg.Add(4)
	go direct(d.fast, &r.fast)
	go direct(d.std, &r.std)
	go proxied(d.spill, &r.spill)
	go proxied(d.ref, &r.ref)
	wg.Wait()
	for t := time.Now(); d.be.active.Load() > 0 && time.Since(t) < clientDeadline; {
		time.Sleep(time.Millisecond)
	}
	d.stdIdle.CloseIdleConnections()
	d.proxyStdTr.CloseIdleConnections()
	return r
}

// rawRequest sends one request to a proxy frontend and reads the answer.
func stackRequest(addr, method string) clientOut {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return clientOut{err: err.Error()}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(clientDeadline))
	if _, err := io.WriteString(c, method+" /x HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return clientOut{err: err.Error()}
	}
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return clientOut{err: err.Error()}
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue // interim (RFC 9110 §15.2)
		}
		o := readOut(resp)
		// The frontends frame and date the response themselves.
		for _, k := range []string{"Date", "Content-Length", "Transfer-Encoding", "Connection"} {
			o.header.Del(k)
		}
		return o
	}
}

// responseHeadLines returns the header lines of the script's response
// heads: interim ones and the first final one (the last may be
// incomplete).
func responseHeadLines(stream []byte) []string {
	var all []string
	off := 0
	for off < len(stream) {
		start, lines, end := headLines(stream, off)
		all = append(all, lines...)
		code := 0
		if f := strings.Fields(start); len(f) > 1 {
			code, _ = strconv.Atoi(f[1])
		}
		if end < 0 || code < 100 || code >= 200 || code == 101 {
			break
		}
		off = end
	}
	return all
}

// connectionTokens returns the field names the Connection headers of the
// script's response heads list, canonicalised, leaving out "close" and
// "keep-alive", and whether one of them lists "close".
func connectionTokens(stream []byte) (toks []string, close bool) {
	for _, l := range responseHeadLines(stream) {
		if !fieldNamed(l, "Connection") {
			continue
		}
		_, v, _ := strings.Cut(l, ":")
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			switch {
			case strings.EqualFold(t, "close"):
				close = true
			case t != "" && !strings.EqualFold(t, "keep-alive"):
				toks = append(toks, http.CanonicalHeaderKey(t))
			}
		}
	}
	return toks, close
}

// nonTokenFieldName reports a header line in the script's response heads
// whose field name (what precedes the first colon) is empty or not a
// token (RFC 9110 §5.1), e.g. "X A: b" or "Content-Length : 2". Lines
// starting with whitespace are obs-fold continuations, not fields.
func nonTokenFieldName(stream []byte) bool {
	for _, l := range responseHeadLines(stream) {
		k, _, ok := strings.Cut(l, ":")
		if !ok || l[0] == ' ' || l[0] == '\t' {
			continue
		}
		if k == "" || strings.IndexFunc(k, func(c rune) bool { return !isTokenRune(c) }) >= 0 {
			return true
		}
	}
	return false
}

// isTokenRune reports a tchar (RFC 9110 §5.6.2).
func isTokenRune(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)
}

// http10TEHead reports whether the script's final (first non-1xx) head
// is an HTTP/1.0 response with a Transfer-Encoding field.
func http10TEHead(stream []byte) bool {
	off := 0
	for off < len(stream) {
		start, lines, end := headLines(stream, off)
		code := 0
		if f := strings.Fields(start); len(f) > 1 {
			code, _ = strconv.Atoi(f[1])
		}
		if end < 0 || code < 100 || code >= 200 || code == 101 {
			return end > 0 && strings.HasPrefix(start, "HTTP/1.0 ") &&
				slices.ContainsFunc(lines, func(l string) bool { return fieldNamed(l, "Transfer-Encoding") })
		}
		off = end
	}
	return false
}

// spillwayRefusedTE reports Spillway refusing an HTTP/1.0 response with
// Transfer-Encoding: h1.Transport's error says so, and the script's
// final head really is one (checked from the raw bytes).
func spillwayRefusedTE(r clientRun) bool {
	return r.http10TE && strings.Contains(r.fast.err, "HTTP/1.0 response with Transfer-Encoding")
}

// spillwayRefusedName reports Spillway refusing a response for a field
// name that is not a token: h1.Transport's error says so, and the script
// really has such a name (checked from the raw bytes).
func spillwayRefusedName(r clientRun) bool {
	return r.nonToken && strings.Contains(r.fast.err, "invalid header name")
}

// proxyError reports a status the proxy answers on its own when the
// backend's response is unusable (doc.go: 503 for failures, 504 for
// timeouts; 502 for a response it refuses).
func proxyError(code int) bool { return code == 502 || code == 503 || code == 504 }

// checkProxied applies the spec invariants to one proxied outcome:
//
//	P1 (RFC 9110 §7.6.1). A proxy removes the Connection header's listed
//	   fields and the hop-by-hop fields (Keep-Alive, Proxy-Connection,
//	   TE, Upgrade) before forwarding a response. Strict for Spillway's
//	   stack. The reference stack (net/http's Transport used directly as
//	   Config.Transport, which production never does: serve and
//	   NewHandler wrap it in h1.NewTransport) is exempt for the listed
//	   fields when the Connection header also says "close":
//	   http.ReadResponse deletes such a header, so nothing behind it can
//	   see what it listed; it is the reference for net/http's behaviour,
//	   not a requirement.
//	P2 (RFC 9110 §15.2.2, §7.8). A 101 answers an Upgrade request only:
//	   a client that did not ask to switch protocols never sees one.
//	P3 (RFC 9112 §8). When the backend's response is incomplete (both
//	   transports' body reads fail), the client must not get a complete
//	   success: it gets no response, a response whose body fails, or a
//	   proxy error (502/503/504).
func checkProxied(name string, o clientOut, r clientRun, reference bool) string {
	if o.err != "" {
		return ""
	}
	if r.fast.bodyErr != "" && r.std.bodyErr != "" && o.bodyErr == "" && !proxyError(o.status) {
		return fmt.Sprintf("P3: %s made a truncated backend response look complete (%d)", name, o.status)
	}
	if o.status == http.StatusSwitchingProtocols {
		return fmt.Sprintf("P2: %s passed a 101 to a client that asked for no upgrade", name)
	}
	hop := []string{"Keep-Alive", "Proxy-Connection", "Te", "Upgrade"}
	if !reference || !r.connClose {
		hop = append(hop, r.connTokens...)
	}
	for _, k := range hop {
		if _, ok := o.header[k]; ok {
			return fmt.Sprintf("P1: %s forwarded hop-by-hop field %s", name, k)
		}
	}
	return ""
}

// compareDirect compares fastTransport with net/http's Transport:
//
//	C1. Both fail: equal (the error texts may differ).
//	C1a (deliberate, Spillway stricter: doc.go, internal/h1/doc.go).
//	    fastTransport fails with "invalid header name" and the Transport
//	    answers, when a field name in the backend's heads, read from the
//	    raw bytes it sent, is not a token (RFC 9110 §5.1, RFC 9112 §5.1:
//	    no whitespace in or before the colon of a field name; a
//	    recipient reading "Content-Length : 5" as a length, or not, is a
//	    desync hazard, so Spillway refuses it as its server does). Never
//	    the reverse.
//	C1b (deliberate, Spillway stricter, as C1a). fastTransport fails
//	    with "HTTP/1.0 response with Transfer-Encoding" and the Transport
//	    answers, when the backend's final head, read from the raw bytes,
//	    is HTTP/1.0 with a Transfer-Encoding field: RFC 9112 §6.1 makes
//	    its framing faulty; net/http ignores the field and reads the
//	    chunk framing as the body. Never the reverse.
//	C2. Both answer: the same status, header map but the Connection
//	    field itself (hop-by-hop; fastTransport keeps the one
//	    http.ReadResponse deletes when it says "close", deliberately, so
//	    that the proxy can strip what it lists), body bytes, and whether
//	    the body ended in an error. For a 101 (which the harness never
//	    asks for) the body is not compared: a 1xx response has no
//	    content (RFC 9112 §6.3), the bytes after it belong to the other
//	    protocol; net/http's Transport hands them out as the connection
//	    in Body, fastTransport does not, and the proxy refuses such a
//	    101 either way (P2).
//
// Anything else — in particular fastTransport answering where the
// Transport fails (a response net/http finds malformed or too large) —
// is a finding.
func compareDirect(r clientRun) string {
	f, s := r.fast, r.std
	switch {
	case f.err != "" && s.err != "":
		return "" // C1
	case f.err != "" && spillwayRefusedName(r):
		return "" // C1a
	case f.err != "" && spillwayRefusedTE(r):
		return "" // C1b
	case f.err != "" || s.err != "":
		return "C2: direct: one transport answered and the other failed"
	}
	fh, sh := f.header.Clone(), s.header.Clone()
	fh.Del("Connection")
	sh.Del("Connection")
	if f.status == http.StatusSwitchingProtocols && s.status == f.status {
		f.body, s.body, f.bodyErr, s.bodyErr = "", "", "", ""
	}
	if f.status != s.status || !reflect.DeepEqual(fh, sh) || f.body != s.body || (f.bodyErr == "") != (s.bodyErr == "") {
		return "C2: direct: the transports' responses differ"
	}
	return ""
}

// compareProxied compares the production stack with the reference stack:
//
//	C3. Both answer with a proxy error (502/503/504): equal (the cause in
//	    the body is the transport's own error text).
//	C4. Otherwise the same outcome: both failed, or the same status,
//	    headers (but Date and framing, which the frontends choose), body
//	    and body-error-ness.
//	    The fields the backend's Connection headers list are left out
//	    of the headers compared: P1 holds Spillway's stack to removing
//	    them, and the reference stack is exempt (see P1).
//	C4a (deliberate, as C1a). Spillway's stack answers 502
//	    (backend_response_corrupted) where the reference stack answers,
//	    when fastTransport refused the response for a field name that is
//	    not a token (C1a's condition, from the raw bytes), or for an
//	    HTTP/1.0 head with Transfer-Encoding (C1b's condition): C4b.
//	C5. When the backend's body was truncated (P3 applies), "no
//	    response" and "a response whose body fails" are equivalent: a
//	    frontend that has not sent the head yet may drop the connection
//	    instead (both tell the client the response is incomplete, RFC
//	    9112 §8).
func compareProxied(r clientRun) string {
	a, b := r.spill, r.ref
	if r.fast.bodyErr != "" && r.std.bodyErr != "" {
		incomplete := func(o clientOut) bool { return o.err != "" || o.bodyErr != "" || proxyError(o.status) }
		if incomplete(a) && incomplete(b) {
			return "" // C5
		}
	}
	if a.err != "" || b.err != "" {
		if (a.err == "") != (b.err == "") {
			return "C4: proxied: one stack answered and the other did not"
		}
		return ""
	}
	if proxyError(a.status) && proxyError(b.status) {
		return "" // C3
	}
	if a.status == http.StatusBadGateway && a.header.Get("X-Spillway-Status-Details") == "backend_response_corrupted" && (spillwayRefusedName(r) || spillwayRefusedTE(r)) {
		return "" // C4a, C4b
	}
	ah, bh := a.header.Clone(), b.header.Clone()
	for _, k := range r.connTokens {
		ah.Del(k)
		bh.Del(k)
	}
	if a.status != b.status || !reflect.DeepEqual(ah, bh) || a.body != b.body || (a.bodyErr == "") != (b.bodyErr == "") {
		return "C4: proxied: the stacks' responses differ"
	}
	return ""
}

// compareClient runs every check of one client exec.
func compareClient(r clientRun) []string {
	var out []string
	for _, why := range []string{
		checkProxied("spillway stack", r.spill, r, false),
		checkProxied("reference stack", r.ref, r, true),
		compareDirect(r),
		compareProxied(r),
	} {
		if why != "" {
			out = append(out, why)
		}
	}
	return out
}

func (r clientRun) String() string {
	return fmt.Sprintf("%s; Connection lists %v\n  direct fastTransport: %s\n  direct Transport:     %s\n  proxied spillway:     %s\n  proxied reference:    %s",
		r.method, r.connTokens, r.fast, r.std, r.spill, r.ref)
}

// checkClient runs one input and fails t on a violation.
func checkClient(t *testing.T, d *diffClients, in diffInput) clientRun {
	r := d.run(t, in)
	if whys := compareClient(r); len(whys) > 0 {
		t.Errorf("%s\nstream %s\ncuts %v\n%s", strings.Join(whys, "; "), quoteShort(in.stream(), 600), cuts(in.sched, len(in.stream())), r)
	}
	return r
}

// FuzzDiffClient feeds arbitrary backend responses, split and delayed,
// to fastTransport and net/http's Transport, and through the production
// and reference proxy stacks, and fails on a difference or a spec
// violation (see compareClient).
func FuzzDiffClient(f *testing.F) {
	d := newDiffClients(f)
	for _, sd := range clientSeeds {
		f.Add(sd.in.prefix, sd.in.unit, sd.in.count, sd.in.suffix, sd.in.sched, sd.in.mode)
	}
	f.Fuzz(func(t *testing.T, prefix, unit []byte, count uint16, suffix, sched []byte, mode uint8) {
		in := diffInput{prefix: prefix, unit: unit, count: count, suffix: suffix, sched: sched, mode: mode}
		if name, item := knownFailingSeed(in); name != "" {
			t.Skipf("seed %q fails on today's code: known defect %s (issue 9)", name, item)
		}
		start := time.Now()
		checkClient(t, d, in)
		if el := time.Since(start); el > slowExec {
			t.Fatalf("exec took %v, want under %v", el, slowExec)
		}
	})
}

// TestDiffClientRules pins the allowed-difference rules C1a/C4a, C1b/C4b, C2's
// 101 and Connection handling and P1's reference exemption to their
// conditions, so that they cannot grow into hiding real differences.
func TestDiffClientRules(t *testing.T) {
	ok200 := clientOut{status: 200, header: http.Header{}, body: "ok"}
	refused := clientOut{err: "h1: invalid header name in response: \"X A\""}
	refusedTE := clientOut{err: "HTTP/1.0 response with Transfer-Encoding: faulty framing"}
	te10 := "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
	corrupted := clientOut{status: 502, header: http.Header{"X-Spillway-Status-Details": {"backend_response_corrupted"}}}
	run := func(stream string, fast, std, spill, ref clientOut) clientRun {
		r := clientRun{fast: fast, std: std, spill: spill, ref: ref, method: "GET"}
		r.connTokens, r.connClose = connectionTokens([]byte(stream))
		r.nonToken = nonTokenFieldName([]byte(stream))
		r.http10TE = http10TEHead([]byte(stream))
		return r
	}
	spaced := "HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 2\r\n\r\nok"
	plain := "HTTP/1.1 200 OK\r\nX-A: b\r\nContent-Length: 2\r\n\r\nok"
	folded := "HTTP/1.1 200 OK\r\nX-A: b\r\n c: d\r\nContent-Length: 2\r\n\r\nok"
	inBody := "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nX A: b\n"
	internal := "HTTP/1.1 200 OK\r\nConnection: X-Internal, close\r\nX-Internal: s\r\nContent-Length: 2\r\n\r\nok"
	internalKeep := "HTTP/1.1 200 OK\r\nConnection: X-Internal\r\nX-Internal: s\r\nContent-Length: 2\r\n\r\nok"
	leak := clientOut{status: 200, header: http.Header{"X-Internal": {"s"}}, body: "ok"}
	tests := []struct {
		name string
		r    clientRun
		want bool // a violation
	}{
		{"C1a/C4a: Spillway refuses a non-token name", run(spaced, refused, ok200, corrupted, ok200), false},
		{"C1a: refused without a non-token name in the bytes", run(plain, refused, ok200, ok200, ok200), true},
		{"C1a: an obs-fold line is not a field", run(folded, refused, ok200, ok200, ok200), true},
		{"C1a: a non-token name in the body does not count", run(inBody, refused, ok200, ok200, ok200), true},
		{"C1a: never the reverse", run(spaced, ok200, refused, ok200, ok200), true},
		{"C4a: other 502 details", run(spaced, refused, ok200, clientOut{status: 502, header: http.Header{}}, ok200), true},
		{"C4a: the reference refusing instead", run(spaced, refused, ok200, ok200, corrupted), true},
		{"C1b/C4b: Spillway refuses HTTP/1.0 with Transfer-Encoding", run(te10, refusedTE, ok200, corrupted, ok200), false},
		{"C1b: after a 1xx", run("HTTP/1.1 100 Continue\r\n\r\n"+te10, refusedTE, ok200, corrupted, ok200), false},
		{"C1b: HTTP/1.1 with Transfer-Encoding", run(strings.Replace(te10, "1.0", "1.1", 1), refusedTE, ok200, ok200, ok200), true},
		{"C1b: Transfer-Encoding in the body", run("HTTP/1.0 200 OK\r\n\r\nTransfer-Encoding: chunked\r\n", refusedTE, ok200, ok200, ok200), true},
		{"C1b: never the reverse", run(te10, ok200, refusedTE, ok200, ok200), true},
		{"C4b: the reference refusing instead", run(te10, refusedTE, ok200, ok200, corrupted), true},
		{"C2: 101 bodies are not compared", run("HTTP/1.1 101 Switching Protocols\r\n\r\nhello", clientOut{status: 101, header: http.Header{}}, clientOut{status: 101, header: http.Header{}, body: "hello"}, corrupted, corrupted), false},
		{"C2: 200 bodies are", run(plain, ok200, clientOut{status: 200, header: http.Header{}, body: "no"}, ok200, ok200), true},
		{"C2: Connection itself is ignored", run(internal, clientOut{status: 200, header: http.Header{"Connection": {"X-Internal, close"}}, body: "ok"}, ok200, ok200, ok200), false},
		{"P1: reference exempt when the header says close", run(internal, ok200, ok200, ok200, leak), false},
		{"P1: reference held to it otherwise", run(internalKeep, ok200, ok200, ok200, leak), true},
		{"P1: Spillway's stack always", run(internal, ok200, ok200, leak, ok200), true},
	}
	for _, tc := range tests {
		if got := len(compareClient(tc.r)) > 0; got != tc.want {
			t.Errorf("%s: violation %v (%v), want %v", tc.name, got, compareClient(tc.r), tc.want)
		}
	}
}
