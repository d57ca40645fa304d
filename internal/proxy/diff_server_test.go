package proxy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The server harness. Two frontends run the same proxy handler: Spillway's
// H1Server ("spillway") and NewServer's *http.Server ("net/http"), each in
// front of its own recording backend. An exec writes one byte stream,
// split and delayed as the input says, on one connection to each frontend
// (concurrently), then — unless mode has diffNoSentinel — a sentinel
// request "GET /__end" with "Connection: close", so that a well-formed
// stream ends with the server closing. When the server goes quiet
// without closing (the stream ended inside a message), the harness
// half-closes. It then compares what the two backends received and the
// status sequences the two clients saw (see compareServer).

// Mode bits of a server input.
const (
	// diffNoSentinel: do not append the sentinel request; the harness
	// half-closes once the server has gone quiet.
	diffNoSentinel = 1 << iota
)

// sentinel ends a stream: after it, a server that is in step closes.
const sentinel = "GET /__end HTTP/1.1\r\nHost: end\r\nConnection: close\r\n\r\n"

// Exec timing. slowDelay is how long the recording backend sits on a
// request whose target contains "/slow": longer than H1Server's
// WatchAfter (10 ms), so that the client watch runs. quietAfter is how
// long the connection and the backend must be silent (and no backend
// answer pending) before the harness half-closes: long enough that a
// loaded machine does not make it cut a server that is still working;
// execDeadline bounds a whole exec.
const (
	slowDelay    = 20 * time.Millisecond
	quietAfter   = 100 * time.Millisecond
	execDeadline = 2 * time.Second
	settleMax    = 300 * time.Millisecond
)

// recReq is a request as the recording backend received it.
type recReq struct {
	Method, URI, Host string
	// Header leaves out what the proxy sets itself and framing, which
	// is hop-by-hop and may legitimately be re-chosen (RFC 9112 §6,
	// §7.1: a proxy may forward a body chunked or with a length).
	Header   http.Header
	Body     string
	Complete bool // the body was read to its end
}

func (r recReq) String() string {
	s := fmt.Sprintf("%s %s host=%q", r.Method, r.URI, r.Host)
	if len(r.Header) > 0 {
		keys := make([]string, 0, len(r.Header))
		for k := range r.Header {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			s += fmt.Sprintf(" %s=%q", k, r.Header[k])
		}
	}
	if r.Body != "" {
		s += fmt.Sprintf(" body=%q", r.Body)
	}
	if !r.Complete {
		s += " (body incomplete)"
	}
	return s
}

// ignoredReqHeaders are left out of recReq.Header: the proxy's own
// X-Forwarded-*/Via (doc.go, "Headers towards the backend"), and body
// framing.
var ignoredReqHeaders = []string{"X-Forwarded-For", "X-Forwarded-Proto", "Via", "Content-Length", "Transfer-Encoding"}

// recBackend is a raw HTTP/1.1 backend that records every request and
// answers 200 with an empty body, keep-alive, after slowDelay for
// targets containing "/slow". It answers "Expect: 100-continue" with a
// 100 so the Transport does not wait for it.
type recBackend struct {
	ln      net.Listener
	mu      sync.Mutex
	log     []recReq
	busy    atomic.Int32 // connections between a request's first byte and its answer
	slowing atomic.Int32 // requests sleeping or being answered
	active  atomic.Int64 // when the backend last received or sent bytes (UnixNano)
	conns   sync.Map     // net.Conn → struct{}
}

func newRecBackend(tb testing.TB) *recBackend {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	b := &recBackend{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.conns.Store(c, struct{}{})
			go b.serve(c)
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		b.conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	})
	return b
}

func (b *recBackend) serve(c net.Conn) {
	defer func() { c.Close(); b.conns.Delete(c) }()
	br := bufio.NewReader(c)
	for {
		c.SetReadDeadline(time.Time{})
		if _, err := br.Peek(1); err != nil {
			return
		}
		b.active.Store(time.Now().UnixNano())
		b.busy.Add(1)
		keep := b.one(c, br)
		b.busy.Add(-1)
		if !keep {
			return
		}
	}
}

// one reads, records and answers one request; it reports whether the
// connection can carry another.
func (b *recBackend) one(c net.Conn, br *bufio.Reader) bool {
	c.SetReadDeadline(time.Now().Add(2 * execDeadline))
	req, err := http.ReadRequest(br)
	if err != nil {
		// Complete, so that S0 keeps it: the proxy sent something a
		// strict parser refuses.
		b.record(recReq{Method: "<backend could not parse>", URI: err.Error(), Complete: true})
		return false
	}
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxStream))
	r := recReq{Method: req.Method, URI: req.RequestURI, Host: req.Host, Header: req.Header, Body: string(body), Complete: err == nil}
	if r.Host == b.ln.Addr().String() {
		// A request without Host (HTTP/1.0) goes out with the
		// endpoint's address, which differs between the two backends.
		r.Host = "<backend address>"
	}
	for _, k := range ignoredReqHeaders {
		delete(r.Header, k)
	}
	if len(r.Header) == 0 {
		r.Header = nil
	}
	b.slowing.Add(1)
	defer b.slowing.Add(-1)
	defer b.active.Store(time.Now().UnixNano())
	b.record(r)
	if err != nil {
		return false
	}
	if strings.Contains(req.RequestURI, "/slow") {
		time.Sleep(slowDelay)
	}
	c.SetWriteDeadline(time.Now().Add(execDeadline))
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
		return false
	}
	return !req.Close
}

func (b *recBackend) record(r recReq) {
	b.mu.Lock()
	b.log = append(b.log, r)
	b.mu.Unlock()
}

// take returns and clears the log.
func (b *recBackend) take() []recReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.log
	b.log = nil
	return l
}

// serverRun is what one frontend did with one stream.
type serverRun struct {
	statuses []int // final statuses seen by the client, in order (1xx dropped); see statusMark*
	closed   bool  // the server closed the connection before the deadline
	halfOpen bool  // the harness had to half-close (the server went quiet)
	reqs     []recReq
	raw      []byte // what the client received
}

// Marks in serverRun.statuses for client-side framing trouble.
const (
	statusMarkGarbage   = -1 // bytes that are not a response
	statusMarkTruncated = -2 // a response whose body ended early
)

func (r serverRun) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "statuses %v closed=%v halfclosed=%v; backend got %d:", r.statuses, r.closed, r.halfOpen, len(r.reqs))
	for i, q := range r.reqs {
		fmt.Fprintf(&b, "\n      %d. %s", i+1, q)
	}
	return b.String()
}

// frontend is one proxy frontend with its recording backend.
type frontend struct {
	name string
	addr string
	be   *recBackend
}

// diffServers is the pair of frontends of the server harness.
type diffServers struct{ spill, std *frontend }

func newDiffServers(tb testing.TB) *diffServers {
	tb.Helper()
	mk := func(name string, h1 bool) *frontend {
		be := newRecBackend(tb)
		h := diffHandler(tb, be.ln.Addr().String(), nil)
		return &frontend{name: name, addr: serveDiff(tb, h, h1), be: be}
	}
	return &diffServers{spill: mk("spillway", true), std: mk("net/http", false)}
}

// run sends stream through both frontends at once.
// The harness half-closes only when the stream needs it: without the
// sentinel, or when the oracle says the stream ends inside a message.
// Otherwise a server in step closes by itself, and cutting it short on a
// loaded machine would only make noise.
func (d *diffServers) run(tb testing.TB, stream []byte, cs []cut, sentinelled bool) (s, n serverRun) {
	_, tail := oracle(stream)
	halfClose := !sentinelled || tail == tailIncomplete
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s = d.spill.run(tb, stream, cs, halfClose) }()
	go func() { defer wg.Done(); n = d.std.run(tb, stream, cs, halfClose) }()
	wg.Wait()
	return s, n
}

// run sends stream on a fresh connection and collects the outcome.
func (f *frontend) run(tb testing.TB, stream []byte, cs []cut, halfClose bool) serverRun {
	// Anything left from an earlier exec is not ours: let the backend
	// finish it, then clear the log.
	for t := time.Now(); time.Since(t) < settleMax && (f.be.busy.Load() > 0 || f.be.slowing.Load() > 0); {
		time.Sleep(time.Millisecond)
	}
	f.be.take()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		tb.Fatalf("%s: %v", f.name, err)
	}
	defer c.Close()
	start := time.Now()
	c.SetDeadline(start.Add(execDeadline))
	var last atomic.Int64 // last activity, UnixNano
	last.Store(start.UnixNano())
	var raw bytes.Buffer
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			raw.Write(buf[:n])
			last.Store(time.Now().UnixNano())
			if err != nil {
				done <- err
				return
			}
		}
	}()
	writeScheduled(c, stream, cs)
	last.Store(time.Now().UnixNano())
	var run serverRun
	var rerr error
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case rerr = <-done:
			break wait
		case <-tick.C:
		}
		quiet := time.Since(time.Unix(0, max(last.Load(), f.be.active.Load())))
		if halfClose && !run.halfOpen && quiet > quietAfter && f.be.slowing.Load() == 0 {
			c.(*net.TCPConn).CloseWrite()
			run.halfOpen = true
		}
	}
	// A reset is a close too: a server that closes with bytes of the
	// client's unread (net/http does, after a malformed body) resets the
	// connection. Whether the answer survived is checked on statuses.
	run.closed = errors.Is(rerr, io.EOF) || errors.Is(rerr, syscall.ECONNRESET)
	// The frontend closed or gave up: let the backend finish reading
	// what the proxy sent it (an aborted body ends with the proxy
	// closing its backend connection).
	for t := time.Now(); time.Since(t) < settleMax && (f.be.busy.Load() > 0 || f.be.slowing.Load() > 0); {
		time.Sleep(time.Millisecond)
	}
	run.reqs = f.be.take()
	run.raw = raw.Bytes()
	run.statuses = parseStatuses(run.raw)
	return run
}

// parseStatuses reads the responses in raw (as answers to GET) and
// returns their final statuses.
func parseStatuses(raw []byte) []int {
	var out []int
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		if _, err := br.Peek(1); err != nil {
			return out
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return append(out, statusMarkGarbage)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			// RFC 9110 §15.2: 1xx are interim and a server may omit
			// 100 Continue when the body has arrived (§10.1.1).
			continue
		}
		out = append(out, resp.StatusCode)
		if err != nil {
			return append(out, statusMarkTruncated)
		}
	}
}

// message is one request as net/http's parser (the oracle) delimits the
// stream, with what the spec invariants look at in its raw head.
type message struct {
	http10 bool // the request line says HTTP/1.0
	hasTE  bool // a Transfer-Encoding field
	hasCL  bool // a Content-Length field
}

// faultyFraming reports RFC 9112 §6.1's two cases: Content-Length with
// Transfer-Encoding, and Transfer-Encoding in an HTTP/1.0 message.
func (m message) faultyFraming() bool { return m.hasTE && (m.hasCL || m.http10) }

// How the oracle's reading of a stream ended.
const (
	tailNone       = iota // at the end of the stream, between messages
	tailIncomplete        // inside a message, for want of bytes
	tailBadHead           // at a head net/http refuses
	tailBadBody           // in a body whose framing is malformed (chunked syntax)
)

// oracle splits a stream into the messages net/http's parser reads
// completely, and says how it stopped after them.
func oracle(stream []byte) (msgs []message, tail int) {
	r := bytes.NewReader(stream)
	br := bufio.NewReader(r)
	eof := func(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }
	for {
		off := len(stream) - r.Len() - br.Buffered()
		if off >= len(stream) {
			return msgs, tailNone
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			if eof(err) {
				return msgs, tailIncomplete
			}
			return msgs, tailBadHead
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			if eof(err) {
				return msgs, tailIncomplete
			}
			return msgs, tailBadBody
		}
		var m message
		startLine, lines, _ := headLines(stream, off)
		m.http10 = strings.HasSuffix(startLine, "HTTP/1.0")
		for _, l := range lines {
			m.hasTE = m.hasTE || fieldNamed(l, "Transfer-Encoding")
			m.hasCL = m.hasCL || fieldNamed(l, "Content-Length")
		}
		msgs = append(msgs, m)
	}
}

// loopReject reports a status a frontend loop answers a request it
// refuses to read with (net/http and H1Server both).
func loopReject(code int) bool {
	switch code {
	case 400, 413, 414, 417, 431, 501, 505:
		return true
	}
	return false
}

// sameStatus is equality of two statuses at one position, where any two
// loop rejections count as equal: RFC 9112 §2.2 and §6.3 let a server
// answer an unparseable request with 400 or a more specific 4xx/5xx (a
// transfer coding it does not know is 501 per RFC 9112 §6.1), and the
// two loops word their reasons differently.
func sameStatus(a, b int) bool { return a == b || loopReject(a) && loopReject(b) }

func sameStatuses(a, b []int) bool { return slices.EqualFunc(a, b, sameStatus) }

func sameReqs(a, b []recReq) bool {
	return slices.EqualFunc(a, b, func(x, y recReq) bool { return reflect.DeepEqual(x, y) })
}

// compareServer applies the allowed-difference rules to one exec; it
// returns a description of the violation, or "" when the two runs are
// compatible. "S" is Spillway's H1Server, "N" net/http's server; message
// k is the first one the oracle (http.ReadRequest over the stream) finds
// at fault, if any.
//
//	S0 (normalisation). Backend records whose body was incomplete are
//	   dropped: the proxy aborted them, and whether the head had left
//	   before the abort is timing (RFC 9112 §8: an incomplete message is
//	   never acted on). "OPTIONS *" records are dropped: net/http's
//	   server answers it itself, Spillway forwards it; RFC 9110 §9.3.7
//	   leaves a server-wide OPTIONS to the server. A Host equal to the
//	   backend's own address (what a Host-less HTTP/1.0 request is sent
//	   with) is recorded as "<backend address>".
//	S1 (spec, Spillway only: net/http is lenient here). RFC 9112 §6.1:
//	   message k has Content-Length and Transfer-Encoding, or is HTTP/1.0
//	   with Transfer-Encoding: faulty framing. S answers it 400 (a loop
//	   rejection) and closes, and its backend receives nothing from
//	   message k on. Before k, S2/S3 apply.
//	S2 (equal). The backends received the same requests (method, target,
//	   Host, every header but X-Forwarded-*, Via and framing, body) and
//	   the clients saw the same final statuses, loop rejections
//	   (400/413/414/417/431/501/505) counting as equal, 1xx ignored.
//	S3 (S stricter). S may refuse a request N accepts: S's statuses are
//	   N's up to a last one that is a loop rejection, after which S
//	   closed, and S's backend received a prefix of what N's did. Never
//	   the reverse: S must not forward what N refuses, nor a different
//	   sequence.
//	S4 (incomplete tail). The stream ends inside message k and the
//	   harness half-closed: S answers message k with nothing or a 4xx
//	   loop rejection — never 2xx (RFC 9112 §8: an incomplete request is
//	   not treated as complete) and never 5xx (the backend is not at
//	   fault). N's answer to it is not a reference (net/http's server
//	   writes an implicit 200 when the handler answers nothing to a
//	   client that has gone). Before k, S2/S3 apply.
//	S5 (bad body). Message k's chunked body is malformed (RFC 9112 §7.1):
//	   as S1. (net/http keeps reading the connection after the bad chunk
//	   and answers what follows; S must not.)
func compareServer(stream []byte, s, n serverRun) string {
	s, n = normalise(s), normalise(n)
	msgs, tail := oracle(stream)
	k, rule := -1, ""
	for i, m := range msgs {
		if m.faultyFraming() {
			k, rule = i, "S1: message %d has faulty framing (RFC 9112 §6.1: Content-Length with Transfer-Encoding, or Transfer-Encoding in HTTP/1.0)"
			break
		}
	}
	if k < 0 && tail == tailBadBody {
		k, rule = len(msgs), "S5: message %d has a malformed chunked body (RFC 9112 §7.1)"
	}
	if k < 0 && tail == tailIncomplete && (s.halfOpen || n.halfOpen) {
		k, rule = len(msgs), "S4: the stream ends inside message %d"
	}
	if k < 0 {
		if compatible(s, n) {
			return ""
		}
		return "S2/S3: spillway and net/http differ: not the same requests and statuses, and not spillway refusing where net/http went on"
	}
	rule = fmt.Sprintf(rule, k+1)
	// Answers to messages before k: S2/S3 on the prefix.
	sp, np := s, n
	sp.statuses = s.statuses[:min(k, len(s.statuses))]
	np.statuses = n.statuses[:min(k, len(n.statuses))]
	np.reqs = n.reqs[:min(len(n.reqs), len(s.reqs))]
	if len(sp.statuses) < k {
		// S stopped before message k: that must be S3.
		if !compatible(sp, np) {
			return rule + "; before it, S2/S3: spillway and net/http differ"
		}
		return ""
	}
	if !sameStatuses(sp.statuses, np.statuses) || !sameReqs(s.reqs, np.reqs) || len(s.reqs) > len(n.reqs) {
		return rule + "; before it, spillway and net/http differ (S2)"
	}
	// S's answer to message k.
	rest := s.statuses[k:]
	if len(rest) > 1 {
		return rule + ": spillway went on reading the connection after it"
	}
	if len(rest) == 1 && !(loopReject(rest[0]) && rest[0] < 500) {
		return fmt.Sprintf("%s: spillway answered it %d, want a 4xx rejection", rule, rest[0])
	}
	if !s.closed {
		return rule + ": spillway did not close the connection"
	}
	if strings.HasPrefix(rule, "S4") {
		return ""
	}
	if len(rest) == 0 {
		return rule + ": spillway must answer it 400"
	}
	// Nothing from message k on reached S's backend: S's backend got
	// only what N's got for the messages before k, which S answered with
	// the same statuses.
	return ""
}

// compareNetHTTPLoop checks the alternative frontend loop, NewServer's
// *http.Server with Spillway's handler, against the one spec rule it can
// be held to on its own:
//
//	N1 (RFC 9112 §6.1, §7.1). After a message with faulty framing (S1's
//	   cases) or a malformed chunked body (S5's), the server answers at
//	   most that message and closes: nothing after it is read, answered
//	   or forwarded. (net/http may read such a message by its
//	   Transfer-Encoding alone, RFC 9112 §6.1 allows it; it must still
//	   close.)
//	N2 (RFC 9112 §8). A request the client did not complete before it
//	   half-closed is not answered with a success.
func compareNetHTTPLoop(stream []byte, n serverRun) string {
	n = normalise(n)
	msgs, tail := oracle(stream)
	if k := len(msgs); tail == tailIncomplete && n.halfOpen && len(n.statuses) > k && n.statuses[k] < 300 {
		return fmt.Sprintf("N2: message %d is incomplete (the client half-closed inside it), and the net/http loop answered it %d", k+1, n.statuses[k])
	}
	k := slices.IndexFunc(msgs, message.faultyFraming)
	if k < 0 && tail == tailBadBody {
		k = len(msgs)
	}
	if k < 0 {
		return ""
	}
	if len(n.statuses) > k+1 || !n.closed {
		return fmt.Sprintf("N1: message %d has faulty framing or a malformed chunked body (RFC 9112 §6.1, §7.1): the net/http loop must close after answering it, but it went on (%d answers)", k+1, len(n.statuses))
	}
	return ""
}

// normalise applies S0.
func normalise(r serverRun) serverRun {
	r.reqs = slices.DeleteFunc(slices.Clone(r.reqs), func(q recReq) bool {
		return !q.Complete || q.Method == http.MethodOptions && q.URI == "*"
	})
	return r
}

// compatible applies S2 and S3.
func compatible(s, n serverRun) bool {
	if sameReqs(s.reqs, n.reqs) && sameStatuses(s.statuses, n.statuses) {
		return true // S2
	}
	k := len(s.statuses)
	if k == 0 || !loopReject(s.statuses[k-1]) || !s.closed || len(n.statuses) < k-1 {
		return false
	}
	if !sameStatuses(s.statuses[:k-1], n.statuses[:k-1]) {
		return false
	}
	return len(s.reqs) <= len(n.reqs) && sameReqs(s.reqs, n.reqs[:len(s.reqs)]) // S3
}

// checkServer runs one input and fails t on a violation.
func checkServer(t *testing.T, d *diffServers, in diffInput) (s, n serverRun) {
	stream := in.stream()
	if in.mode&diffNoSentinel == 0 {
		stream = append(stream, sentinel...)
	}
	cs := cuts(in.sched, len(stream))
	s, n = d.run(t, stream, cs, in.mode&diffNoSentinel == 0)
	if why := compareServer(stream, s, n); why != "" {
		t.Errorf("%s\nstream %s\ncuts %v\nspillway: %s\nnet/http: %s", why, quoteShort(stream, 600), cs, s, n)
	}
	if why := compareNetHTTPLoop(stream, n); why != "" {
		if name, reason := knownNetHTTPSeed(in); name != "" {
			t.Skipf("seed %q: %s: known, %s", name, why, reason)
		}
		t.Errorf("%s\nstream %s\ncuts %v\nnet/http: %s", why, quoteShort(stream, 600), cs, n)
	}
	return s, n
}

// FuzzDiffServer feeds arbitrary request streams, split and delayed,
// through H1Server and net/http's server in front of recording backends
// and fails on a difference the rules of compareServer do not allow.
func FuzzDiffServer(f *testing.F) {
	d := newDiffServers(f)
	for _, sd := range serverSeeds {
		f.Add(sd.in.prefix, sd.in.unit, sd.in.count, sd.in.suffix, sd.in.sched, sd.in.mode)
	}
	f.Fuzz(func(t *testing.T, prefix, unit []byte, count uint16, suffix, sched []byte, mode uint8) {
		in := diffInput{prefix: prefix, unit: unit, count: count, suffix: suffix, sched: sched, mode: mode}
		if name, item := knownFailingSeed(in); name != "" {
			t.Skipf("seed %q fails on today's code: known defect %s (issue 9)", name, item)
		}
		start := time.Now()
		checkServer(t, d, in)
		if el := time.Since(start); el > slowExec {
			t.Fatalf("exec took %v, want under %v", el, slowExec)
		}
	})
}
