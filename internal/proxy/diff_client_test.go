package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
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
	r := clientRun{method: method, connTokens: connectionTokens(stream)}
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

// connectionTokens returns the field names the Connection headers of the
// script's response heads (interim ones and the first final one) list,
// canonicalised, leaving out "close" and "keep-alive".
func connectionTokens(stream []byte) []string {
	var toks []string
	off := 0
	for off < len(stream) {
		start, lines, end := headLines(stream, off)
		for _, l := range lines {
			if !fieldNamed(l, "Connection") {
				continue
			}
			_, v, _ := strings.Cut(l, ":")
			for t := range strings.SplitSeq(v, ",") {
				t = strings.TrimSpace(t)
				if t != "" && !strings.EqualFold(t, "close") && !strings.EqualFold(t, "keep-alive") {
					toks = append(toks, http.CanonicalHeaderKey(t))
				}
			}
		}
		code := 0
		if f := strings.Fields(start); len(f) > 1 {
			code, _ = strconv.Atoi(f[1])
		}
		if end < 0 || code < 100 || code >= 200 || code == 101 {
			break
		}
		off = end
	}
	return toks
}

// proxyError reports a status the proxy answers on its own when the
// backend's response is unusable (doc.go: 503 for failures, 504 for
// timeouts; 502 for a response it refuses).
func proxyError(code int) bool { return code == 502 || code == 503 || code == 504 }

// checkProxied applies the spec invariants to one proxied outcome:
//
//	P1 (RFC 9110 §7.6.1). A proxy removes the Connection header's listed
//	   fields and the hop-by-hop fields (Keep-Alive, Proxy-Connection,
//	   TE, Upgrade) before forwarding a response.
//	P2 (RFC 9110 §15.2.2, §7.8). A 101 answers an Upgrade request only:
//	   a client that did not ask to switch protocols never sees one.
//	P3 (RFC 9112 §8). When the backend's response is incomplete (both
//	   transports' body reads fail), the client must not get a complete
//	   success: it gets no response, a response whose body fails, or a
//	   proxy error (502/503/504).
func checkProxied(name string, o clientOut, r clientRun) string {
	if o.err != "" {
		return ""
	}
	if r.fast.bodyErr != "" && r.std.bodyErr != "" && o.bodyErr == "" && !proxyError(o.status) {
		return fmt.Sprintf("P3: %s made a truncated backend response look complete (%d)", name, o.status)
	}
	if o.status == http.StatusSwitchingProtocols {
		return fmt.Sprintf("P2: %s passed a 101 to a client that asked for no upgrade", name)
	}
	for _, k := range append([]string{"Keep-Alive", "Proxy-Connection", "Te", "Upgrade"}, r.connTokens...) {
		if _, ok := o.header[k]; ok {
			return fmt.Sprintf("P1: %s forwarded hop-by-hop field %s", name, k)
		}
	}
	return ""
}

// compareDirect compares fastTransport with net/http's Transport:
//
//	C1. Both fail: equal (the error texts may differ).
//	C2. Both answer: the same status, header map, body bytes, and
//	    whether the body ended in an error.
//
// Anything else — in particular fastTransport answering where the
// Transport fails (a response net/http finds malformed or too large) —
// is a finding.
func compareDirect(r clientRun) string {
	f, s := r.fast, r.std
	switch {
	case f.err != "" && s.err != "":
		return "" // C1
	case f.err != "" || s.err != "":
		return "C2: direct: one transport answered and the other failed"
	}
	if f.status != s.status || !reflect.DeepEqual(f.header, s.header) || f.body != s.body || (f.bodyErr == "") != (s.bodyErr == "") {
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
	if a.status != b.status || !reflect.DeepEqual(a.header, b.header) || a.body != b.body || (a.bodyErr == "") != (b.bodyErr == "") {
		return "C4: proxied: the stacks' responses differ"
	}
	return ""
}

// compareClient runs every check of one client exec.
func compareClient(r clientRun) []string {
	var out []string
	for _, why := range []string{
		checkProxied("spillway stack", r.spill, r),
		checkProxied("reference stack", r.ref, r),
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
		if item := knownClientDefect(in, r, whys); item != "" {
			t.Skipf("%s: known defect, issue 9 item %s (SPILLWAY_DIFF_KNOWN=skip)", strings.Join(whys, "; "), item)
		}
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
