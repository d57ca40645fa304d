package proxy_test

import (
	"bufio"
	"bytes"
	"net"
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

func benchWire(b *testing.B, record func(*proxy.Record)) {
	body := `{"zone":"eu-west-1a","port":18081}` + "\n"
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 35\r\nDate: Mon, 30 Nov 2026 19:00:00 GMT\r\n\r\n" + body)
	be := rawBackend(b, resp)
	l := newLab(b, basic("", "", be), nil, func(c *proxy.Config) { c.Observe, c.Record = nil, record })
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
