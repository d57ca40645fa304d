package proxy_test

// Differential harness (issue 9, "Edge hardening"): the same hostile bytes
// go through Spillway's wire code and through the standard library, and
// the observable results must agree except where a rule below says the
// specification allows them to differ. diff_server_test.go drives the
// frontend loops (H1Server vs net/http's server), diff_client_test.go the
// backend clients (fastTransport vs net/http's Transport), and
// diff_seeds_test.go holds the seed corpus (RFC 9112 smuggling classics
// and the known defects) and the readable table test.
//
// The harness depends only on the package's exported API (NewHandler,
// NewH1Server, NewServer, NewFastTransport, NewTransport, Config,
// Snapshot), so it can follow the wire code to another package.

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/h1"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
	"github.com/spillwaylb/spillway/internal/route"
)

// diffInput is one fuzz input, shared by both targets: a byte stream
// built as prefix + unit×count + suffix (so that floods and oversized
// heads are one small input), a write schedule, and mode bits.
type diffInput struct {
	prefix, unit []byte
	count        uint16
	suffix       []byte
	sched        []byte
	mode         uint8
}

// maxStream bounds the expanded stream (prefix + unit×count + suffix).
const maxStream = 1 << 20

// stream expands the input's byte stream, capped at maxStream.
func (in diffInput) stream() []byte {
	n := len(in.prefix) + len(in.suffix)
	reps := int(in.count)
	if len(in.unit) > 0 && reps > (maxStream-n)/len(in.unit) {
		reps = max(0, (maxStream-n)/len(in.unit))
	}
	if len(in.unit) == 0 {
		reps = 0
	}
	b := make([]byte, 0, n+reps*len(in.unit))
	b = append(b, in.prefix...)
	for range reps {
		b = append(b, in.unit...)
	}
	return append(b, in.suffix...)
}

// cut is a write boundary: the bytes before at are written, then the
// writer sleeps for delay.
type cut struct {
	at    int
	delay time.Duration
}

// maxCuts and maxCutDelay bound a schedule: at most 8 cuts of at most
// 7 ms, so a schedule adds at most 56 ms to an exec.
const (
	maxCuts     = 8
	maxCutDelay = 7
)

// cuts decodes sched for a stream of n bytes: each byte pair (step,
// delay) moves the cut step bytes further (a step of 0 is skipped) and
// sleeps delay%8 ms there.
func cuts(sched []byte, n int) []cut {
	var cs []cut
	at := 0
	for i := 0; i+1 < len(sched) && len(cs) < maxCuts; i += 2 {
		if sched[i] == 0 {
			continue
		}
		at += int(sched[i])
		if at >= n {
			break
		}
		cs = append(cs, cut{at: at, delay: time.Duration(sched[i+1]%(maxCutDelay+1)) * time.Millisecond})
	}
	return cs
}

// writeScheduled writes b to c in the pieces cs describes. Errors end it
// quietly: the peer may close early, and that is an observable outcome.
func writeScheduled(c net.Conn, b []byte, cs []cut) {
	prev := 0
	for _, ct := range cs {
		if _, err := c.Write(b[prev:ct.at]); err != nil {
			return
		}
		prev = ct.at
		if ct.delay > 0 {
			time.Sleep(ct.delay)
		}
	}
	c.Write(b[prev:])
}

// sched encodes cuts for seeds: pairs of (step, delay ms).
func sched(pairs ...int) []byte {
	b := make([]byte, len(pairs))
	for i, p := range pairs {
		b[i] = byte(p)
	}
	return b
}

// diffHandler returns a proxy handler whose only backend service sends
// everything to backendAddr through tr (nil: the default fast transport),
// with a 2 s request timeout so that every exec ends.
func diffHandler(tb testing.TB, backendAddr string, tr http.RoundTripper) http.Handler {
	tb.Helper()
	c, err := config.Parse([]byte(basic("  timeoutSec: 2\n", "", backendAddr)), "diff.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		tb.Fatal(err)
	}
	routes := map[string]*route.Table{}
	for name, um := range p.URLMaps {
		tbl, err := route.Compile(um.Config)
		if err != nil {
			tb.Fatal(err)
		}
		routes[name] = tbl
	}
	snap := &proxy.Snapshot{Plan: p, View: engine.NewView(control.New(p)), Routes: routes, Demand: proxy.NewDemand(len(p.Services), len(p.Regions))}
	return proxy.NewHandler(proxy.Config{
		Frontend:  p.Frontends[0],
		Snapshot:  func() *proxy.Snapshot { return snap },
		Transport: tr,
		Logger:    slog.New(slog.DiscardHandler),
		// The same generated trace context on both servers under test.
		TraceRand: func() uint64 { return 0x5eed },
	})
}

// serveDiff serves h on 127.0.0.1 with Spillway's H1Server (h1 true) or
// NewServer's *http.Server, until the test ends, and returns the address.
func serveDiff(tb testing.TB, h http.Handler, useH1 bool) string {
	tb.Helper()
	return serveDiffH2(tb, h, useH1, proxy.H2NetHTTP)
}

// serveDiffH2 is serveDiff with HTTP/2 on the loop h2s.
func serveDiffH2(tb testing.TB, h http.Handler, useH1 bool, h2s proxy.HTTP2Server) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	if useH1 {
		s := proxy.NewH1ServerHTTP2(h, h2s)
		s.Logger = slog.New(slog.DiscardHandler)
		go s.Serve(ln)
		tb.Cleanup(func() { s.Close() })
	} else {
		// As serve runs the NET_HTTP loop: on the framing guard.
		s := proxy.NewServerHTTP2(h, nil, h2s)
		s.ErrorLog = log.New(io.Discard, "", 0)
		go s.Serve(h1.GuardListener(ln))
		tb.Cleanup(func() { s.Close() })
	}
	return ln.Addr().String()
}

// headLines returns the header lines of the message head starting at
// b[off:] (through the first empty line, CRLF or bare LF), without the
// start line, and the offset after the head (-1 when it is incomplete).
func headLines(b []byte, off int) (start string, lines []string, end int) {
	rest := b[off:]
	first := true
	pos := off
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return start, lines, -1
		}
		line := strings.TrimSuffix(string(rest[:i]), "\r")
		rest = rest[i+1:]
		pos += i + 1
		if first {
			start, first = line, false
			continue
		}
		if line == "" {
			return start, lines, pos
		}
		lines = append(lines, line)
	}
}

// fieldNamed reports whether a raw header line's name is name (ASCII
// case-insensitive, whitespace before the colon ignored, as a lax
// recipient would read it; a line starting with whitespace is an obs-fold
// continuation, not a field).
func fieldNamed(line, name string) bool {
	k, _, ok := strings.Cut(line, ":")
	return ok && strings.EqualFold(strings.TrimRight(k, " \t"), name)
}

// quoteShort renders b for failure messages, cut to n bytes.
func quoteShort(b []byte, n int) string {
	if len(b) > n {
		return fmt.Sprintf("%q…(%d bytes)", b[:n], len(b))
	}
	return fmt.Sprintf("%q", b)
}
