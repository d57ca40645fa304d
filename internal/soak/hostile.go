package soak

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HostileStats counts the hostile-client mix.
type HostileStats struct {
	// Connections opened by hostile clients, and dials that failed.
	Connections int `json:"connections"`
	DialErrors  int `json:"dialErrors"`
	// Slowloris connections send a request head one byte a second;
	// ServerClosed counts those the proxy closed (or answered) before the
	// client gave up, after MinClose..MaxClose.
	Slowloris             int      `json:"slowloris"`
	SlowlorisServerClosed int      `json:"slowlorisServerClosed"`
	SlowlorisMinClose     Duration `json:"slowlorisMinClose,omitempty"`
	SlowlorisMaxClose     Duration `json:"slowlorisMaxClose,omitempty"`
	// H2Slowloris connections open HTTP/2 and never complete a request:
	// the preface only, or a header block trickled one CONTINUATION frame
	// a second (h2Slowloris); the same counts as for Slowloris.
	H2Slowloris             int      `json:"h2Slowloris"`
	H2SlowlorisServerClosed int      `json:"h2SlowlorisServerClosed"`
	H2SlowlorisMinClose     Duration `json:"h2SlowlorisMinClose,omitempty"`
	H2SlowlorisMaxClose     Duration `json:"h2SlowlorisMaxClose,omitempty"`
	// SlowReaders request a 1 MiB response and never read it.
	SlowReaders int `json:"slowReaders"`
	// Malformed requests (HTTP/1.1, and HTTP/2 header lists: h2Case),
	// each on its own connection, and the answers by case ("case → 400",
	// "case → closed", "case → RST_STREAM PROTOCOL_ERROR").
	Malformed        int            `json:"malformed"`
	MalformedAnswers map[string]int `json:"malformedAnswers"`
	// Pipelines of five requests in one write (GET, HEAD, POST with a
	// body, a 20 kB GET, and a last one that closes or is malformed).
	Pipelines         int `json:"pipelines"`
	PipelinedRequests int `json:"pipelinedRequests"`
	PipelinedAnswered int `json:"pipelinedAnswered"`
	// PipelinedMissing counts requests of a pipeline that got no answer.
	PipelinedMissing int `json:"pipelinedMissing"`
	// Pipelined5xx counts 5xx answers to the pipelines' well-formed
	// requests (classified against the windows like the steady load).
	Pipelined5xx        int `json:"pipelined5xx"`
	Pipelined5xxOutside int `json:"pipelined5xxOutsideWindows"`
	// Unreached counts malformed-body requests answered 503 because no
	// backend could be reached before the body was read; outside a
	// convergence window that is a failure.
	Unreached        int `json:"malformedBodyUnreached"`
	UnreachedOutside int `json:"malformedBodyUnreachedOutsideWindows"`
	// Notes counts anomalies (a 5xx to a malformed request, a pipeline
	// missing answers, a failed dial) by kind; NoteExamples has the first
	// of each kind, with details.
	Notes        map[string]int    `json:"notes,omitempty"`
	NoteExamples map[string]string `json:"noteExamples,omitempty"`
}

// hostile runs the hostile-client mix against both frontends.
type hostile struct {
	httpsAddr, httpAddr string
	start               time.Time

	mu      sync.Mutex
	st      HostileStats
	pipe5xx []outcome
	// unreached are malformed-body requests answered 503
	// failed_to_connect_to_backend (see malformedCase.inBody).
	unreached []outcome
	conns     map[net.Conn]struct{} // open, closed by stop
}

// malformedCase is a raw request that a proxy must refuse.
type malformedCase struct {
	name string
	raw  string
	// halfClose closes the write side after sending (a truncated
	// request).
	halfClose bool
	// inBody: the head is valid and the mistake is in the body, which
	// the proxy reads only while forwarding. When no backend can be
	// reached (a killed zone before its probes fail) it answers 503
	// failed_to_connect_to_backend before reading a byte of the body,
	// as it would for a well-formed request; such answers are judged
	// against the convergence windows like the steady load.
	inBody bool
}

func malformedCases() []malformedCase {
	return []malformedCase{
		{name: "header without colon", raw: "GET /soak/m HTTP/1.1\r\nHost: soak\r\nBad Header\r\n\r\n"},
		{name: "NUL in target", raw: "GET /soak/\x00m HTTP/1.1\r\nHost: soak\r\n\r\n"},
		{name: "garbage request line", raw: "GARBAGE\r\n\r\n"},
		{name: "HTTP/9.9", raw: "GET /soak/m HTTP/9.9\r\nHost: soak\r\n\r\n"},
		{name: "bad chunk size", raw: "POST /soak/m HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", inBody: true},
		{name: "chunk size overflow", raw: "POST /soak/m HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n", inBody: true},
		{name: "negative Content-Length", raw: "POST /soak/m HTTP/1.1\r\nHost: soak\r\nContent-Length: -1\r\n\r\n"},
		{name: "two Content-Lengths", raw: "POST /soak/m HTTP/1.1\r\nHost: soak\r\nContent-Length: 10\r\nContent-Length: 11\r\n\r\n0123456789x"},
		{name: "70 kB header", raw: "GET /soak/m HTTP/1.1\r\nHost: soak\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n"},
		{name: "obs-fold first line", raw: "GET /soak/m HTTP/1.1\r\n folded: x\r\nHost: soak\r\n\r\n"},
		{name: "no Host", raw: "GET /soak/m HTTP/1.1\r\n\r\n"},
		{name: "bad Host", raw: "GET /soak/m HTTP/1.1\r\nHost: so ak\r\n\r\n"},
		{name: "bad absolute URI", raw: "GET http://[::1 HTTP/1.1\r\nHost: soak\r\n\r\n"},
		{name: "truncated head", raw: "GET /soak/m HTTP/1.1\r\nHost: soak\r\nX-Trunc", halfClose: true},
		{name: "truncated body", raw: "POST /soak/m HTTP/1.1\r\nHost: soak\r\nContent-Length: 100\r\n\r\nonly-some", halfClose: true, inBody: true},
	}
}

// run starts slowloris and slow-reader pools and the malformed and
// pipeline loops; it returns when ctx ends and every connection is closed.
func (h *hostile) run(ctx context.Context, o *Options) {
	var wg sync.WaitGroup
	for i := range o.Slowloris {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				h.slowloris(ctx, (i+n)%2 == 0, o.HostileHold)
			}
		})
	}
	for i := range o.SlowReaders {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				h.slowReader(ctx, (i+n)%2 == 0, o.HostileHold)
			}
		})
	}
	for i := range o.Slowloris {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				h.h2Slowloris(ctx, (i+n)%2 == 0, i+n/2, o.HostileHold)
			}
		})
	}
	wg.Go(func() {
		cases, h2cases := malformedCases(), h2MalformedCases()
		for n := 0; sleepCtx(ctx, o.MalformedEvery); n++ {
			h.malformed(cases[n%len(cases)], n%2 == 0)
			h.h2Malformed(h2cases[n%len(h2cases)], n%3 != 0)
		}
	})
	wg.Go(func() {
		for n := 0; sleepCtx(ctx, o.PipelineEvery); n++ {
			h.pipeline(n%2 == 0, n%4 >= 2)
		}
	})
	wg.Wait()
}

// dial connects to the HTTPS (tlsOn) or HTTP frontend for HTTP/1.1.
// rcvbuf > 0 sets SO_RCVBUF (a slow reader's small window).
func (h *hostile) dial(tlsOn bool, rcvbuf int) (net.Conn, error) {
	return h.dialALPN(tlsOn, rcvbuf, "http/1.1")
}

// dialALPN is dial offering alpn over TLS ("h2" or "http/1.1").
func (h *hostile) dialALPN(tlsOn bool, rcvbuf int, alpn string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	addr := h.httpAddr
	if tlsOn {
		addr = h.httpsAddr
	}
	c, err := d.Dial("tcp", addr)
	if err == nil && tlsOn {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}}) //nolint:gosec // the soak's own certificate
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err = tc.Handshake(); err != nil {
			c.Close()
		} else {
			_ = tc.SetDeadline(time.Time{})
			c = tc
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.st.DialErrors++
		h.note("dial failed", "dial %s: %v", addr, err)
		return nil, err
	}
	h.st.Connections++
	if h.conns == nil {
		h.conns = map[net.Conn]struct{}{}
	}
	h.conns[c] = struct{}{}
	return c, nil
}

func (h *hostile) close(c net.Conn) {
	c.Close()
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
}

// note counts an anomaly of a kind and keeps the first example; h.mu
// must be held.
func (h *hostile) note(kind, format string, args ...any) {
	if h.st.Notes == nil {
		h.st.Notes, h.st.NoteExamples = map[string]int{}, map[string]string{}
	}
	h.st.Notes[kind]++
	if h.st.Notes[kind] == 1 {
		h.st.NoteExamples[kind] = fmt.Sprintf("first at %.1fs: ", time.Since(h.start).Seconds()) + fmt.Sprintf(format, args...)
	}
}

// slowloris sends a request head one byte a second for up to hold.
func (h *hostile) slowloris(ctx context.Context, tlsOn bool, hold time.Duration) {
	c, err := h.dial(tlsOn, 0)
	if err != nil {
		sleepCtx(ctx, time.Second)
		return
	}
	defer h.close(c)
	h.mu.Lock()
	h.st.Slowloris++
	h.mu.Unlock()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = c.Read(make([]byte, 512)) // an answer (408, 400) or a close
	}()
	if _, err := io.WriteString(c, "GET /soak/slowloris HTTP/1.1\r\nHost: soak\r\nX-Slow: "); err != nil {
		return
	}
	d := holdOpen(ctx, hold, closed, func(int) error {
		_, err := io.WriteString(c, "x")
		return err
	})
	h.mu.Lock()
	h.st.SlowlorisServerClosed, h.st.SlowlorisMinClose, h.st.SlowlorisMaxClose = countClose(d, h.st.SlowlorisServerClosed, h.st.SlowlorisMinClose, h.st.SlowlorisMaxClose)
	h.mu.Unlock()
}

// holdOpen keeps a hostile connection for up to hold (or until ctx ends),
// calling step once a second; closed is closed when the server has
// closed the connection or answered. It returns how long the connection
// lived when the server ended it, 0 when the client gave up first. A
// step that fails waits for closed.
func holdOpen(ctx context.Context, hold time.Duration, closed <-chan struct{}, step func(i int) error) time.Duration {
	opened := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.NewTimer(hold)
	defer end.Stop()
	for i := 0; ; i++ {
		select {
		case <-closed:
			return time.Since(opened)
		case <-end.C:
			return 0
		case <-ctx.Done():
			return 0
		case <-tick.C:
			if err := step(i); err != nil {
				<-closed
				return time.Since(opened)
			}
		}
	}
}

// countClose adds a server close after d (none when d is 0) to a count
// and its shortest and longest times.
func countClose(d time.Duration, n int, lo, hi Duration) (int, Duration, Duration) {
	if d == 0 {
		return n, lo, hi
	}
	if lo == 0 || Duration(d) < lo {
		lo = Duration(d)
	}
	return n + 1, lo, max(hi, Duration(d))
}

// slowReader asks for a 1 MiB response through a 4 KiB receive window
// and never reads it.
func (h *hostile) slowReader(ctx context.Context, tlsOn bool, hold time.Duration) {
	c, err := h.dial(tlsOn, 4096)
	if err != nil {
		sleepCtx(ctx, time.Second)
		return
	}
	defer h.close(c)
	h.mu.Lock()
	h.st.SlowReaders++
	h.mu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /soak/slow-reader?pad=1048576 HTTP/1.1\r\nHost: soak\r\n\r\n"); err != nil {
		return
	}
	sleepCtx(ctx, hold)
}

// malformed sends one malformed request and records the answer.
func (h *hostile) malformed(mc malformedCase, tlsOn bool) {
	start := time.Now()
	c, err := h.dial(tlsOn, 0)
	if err != nil {
		return
	}
	defer h.close(c)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	answer, body := "", ""
	if _, err := io.WriteString(c, mc.raw); err != nil {
		answer = "write failed (closed)"
	} else if mc.halfClose {
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	if answer == "" {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err == nil:
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
			resp.Body.Close()
			answer, body = fmt.Sprint(resp.StatusCode), strings.TrimSpace(string(b))
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			answer = "closed"
		case errors.Is(err, os.ErrDeadlineExceeded):
			answer = "no answer in 5s"
		default:
			answer = "closed (" + shortErr(err) + ")"
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.Malformed++
	if h.st.MalformedAnswers == nil {
		h.st.MalformedAnswers = map[string]int{}
	}
	h.st.MalformedAnswers[mc.name+" → "+answer]++
	// 505 HTTP Version Not Supported is the right answer to HTTP/9.9;
	// any other 5xx blames the backends for the client's mistake, but
	// for a body the proxy never got to read because no backend was
	// reachable (judged against the windows in the report).
	if mc.inBody && answer == "503" && strings.Contains(body, "failed_to_connect_to_backend") {
		h.unreached = append(h.unreached, outcome{Start: start, End: time.Now(), Proto: "malformed " + mc.name, Status: 503, Body: body})
		return
	}
	if strings.HasPrefix(answer, "5") && answer != "505" {
		h.note("malformed "+mc.name+" → "+answer, "body %q", truncate(body, 120))
	}
}

// pipeline writes five requests at once and reads the answers in order.
// badTail makes the last request malformed (expect a 400 and a close)
// instead of "Connection: close".
func (h *hostile) pipeline(tlsOn, badTail bool) {
	c, err := h.dial(tlsOn, 0)
	if err != nil {
		return
	}
	defer h.close(c)
	type pr struct {
		method, raw string
		wellFormed  bool
	}
	reqs := []pr{
		{"GET", "GET /soak/p1 HTTP/1.1\r\nHost: soak\r\n\r\n", true},
		{"HEAD", "HEAD /soak/p2 HTTP/1.1\r\nHost: soak\r\n\r\n", true},
		{"POST", "POST /soak/p3 HTTP/1.1\r\nHost: soak\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello", true},
		{"GET", "GET /soak/p4?pad=20000 HTTP/1.1\r\nHost: soak\r\n\r\n", true},
		{"GET", "GET /soak/p5 HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n", true},
	}
	if badTail {
		reqs[4] = pr{"GET", "GET /soak/p5 HTTP/1.1\r\nHost: soak\r\nBad Header\r\n\r\n", false}
	}
	var all strings.Builder
	for _, r := range reqs {
		all.WriteString(r.raw)
	}
	start := time.Now()
	_ = c.SetDeadline(start.Add(10 * time.Second))
	var statuses []int
	var readErr error
	if _, err := io.WriteString(c, all.String()); err != nil {
		readErr = err
	} else {
		br := bufio.NewReader(c)
		for _, r := range reqs {
			resp, err := http.ReadResponse(br, &http.Request{Method: r.method})
			if err != nil {
				readErr = err
				break
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses = append(statuses, resp.StatusCode)
			if err != nil {
				readErr = err
				break
			}
		}
	}
	end := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.Pipelines++
	h.st.PipelinedRequests += len(reqs)
	h.st.PipelinedAnswered += len(statuses)
	if missing := len(reqs) - len(statuses); missing > 0 {
		h.st.PipelinedMissing += missing
		h.note("pipeline missing answers", "pipeline (tls=%v, malformed tail=%v): %d of %d answered (%v), then: %s", tlsOn, badTail, len(statuses), len(reqs), statuses, shortErr(readErr))
	}
	for i, st := range statuses {
		if st >= 500 && reqs[i].wellFormed {
			h.st.Pipelined5xx++
			h.pipe5xx = append(h.pipe5xx, outcome{Start: start, End: end, Proto: "HTTP/1.1 pipelined", Status: st})
		}
	}
	if badTail && len(statuses) == len(reqs) && statuses[4] != http.StatusBadRequest {
		h.note(fmt.Sprintf("pipeline's malformed tail → %d", statuses[4]), "want 400")
	}
}

// stop closes every open hostile connection.
func (h *hostile) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.conns {
		c.Close()
	}
}

func shortErr(err error) string {
	if err == nil {
		return "no error"
	}
	return truncate(err.Error(), 160)
}

// sleepCtx sleeps d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
