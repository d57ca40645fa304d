package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/proxy"
)

// rawBackend answers every request head on a connection with resp, with
// no allocation per request, so that a benchmark's allocs/op is the
// proxy's own.
func rawBackend(tb testing.TB, resp []byte) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReaderSize(c, 16<<10)
				for {
					// Request heads end with an empty line; GETs have no body.
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// BenchmarkWire is the HTTP/1.1 path as `spillway serve` runs it: a raw
// keep-alive client writes a wrk-like request to the h1.Server, the handler
// routes it and the fast transport forwards it to a raw backend. Only the
// proxy allocates, so allocs/op and B/op are its per-request cost.
func BenchmarkWire(b *testing.B) { benchWire(b, nil) }

// BenchmarkWireRecorded is BenchmarkWire with a Config.Record hook that
// reads the record: the price of filling one per request.
func BenchmarkWireRecorded(b *testing.B) {
	var n int
	benchWire(b, func(r *proxy.Record) { n += r.Status })
}

// BenchmarkWirePolicy is BenchmarkWire through a backend security policy
// of 20 rules (10 source-range, 10 expression rules), none of which
// matches: the cost of evaluating every rule on each request.
func BenchmarkWirePolicy(b *testing.B) {
	var rules strings.Builder
	rules.WriteString("securityPolicies:\n- name: sp\n  rules:\n")
	for i := range 10 {
		fmt.Fprintf(&rules, "  - {priority: %d, action: deny(403), match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['198.51.%d.0/24', '2001:db8:%x::/48']}}}\n", 10+i, i, i)
	}
	for i, e := range []string{
		"request.path.startsWith('/admin')", "request.headers['user-agent'].lower().contains('sqlmap')",
		"request.method == 'TRACE'", "inIpRange(origin.ip, '203.0.113.0/24')", "request.query.contains('union select')",
		"request.headers['x-forwarded-host'] == 'evil.example'", "request.path.matches('.*[.]php$')",
		"origin.region_code == 'ZZ'", "request.headers['referer'].contains('spam.example')", "request.scheme == 'https' && request.path == '/login'",
	} {
		fmt.Fprintf(&rules, "  - {priority: %d, action: deny(403), match: {expr: {expression: \"%s\"}}}\n", 100+i, e)
	}
	rules.WriteString("  - {priority: 2147483647, action: allow, match: {versionedExpr: SRC_IPS_V1, config: {srcIpRanges: ['*']}}}\n")
	benchWireConfig(b, nil, "  securityPolicy: sp\n", rules.String())
}

func benchWire(b *testing.B, record func(*proxy.Record)) { benchWireConfig(b, record, "", "") }

func benchWireConfig(b *testing.B, record func(*proxy.Record), bsExtra, extra string) {
	body := `{"zone":"eu-west-1a","port":18081}` + "\n"
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 35\r\nDate: Mon, 30 Nov 2026 19:00:00 GMT\r\n\r\n" + body)
	be := rawBackend(b, resp)
	l := newLab(b, basic(bsExtra, "", be)+extra, nil, func(c *proxy.Config) { c.Observe, c.Record = nil, record })
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1:18480\r\n\r\n")
	br := bufio.NewReaderSize(c, 16<<10)
	want := []byte(body)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		// Response head, then the 35-byte body (Content-Length as sent).
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if len(line) <= 2 {
				break
			}
		}
		got, err := br.Peek(len(want))
		if err != nil || !bytes.Equal(got, want) {
			b.Fatalf("body %q, %v", got, err)
		}
		br.Discard(len(want))
	}
}
