package serve_test

import (
	"bufio"
	"bytes"
	"net"
	"path/filepath"
	"testing"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// rawServeBackend answers every request head with resp, allocating
// nothing per request.
func rawServeBackend(tb testing.TB, resp []byte) string {
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

// BenchmarkServeObservability is BenchmarkWire through a whole `serve`
// instance: request metrics off, on (the default), and on with the JSON
// access log to a file. allocs/op is the proxy's per-request cost (the
// raw client and backend allocate nothing per request).
func BenchmarkServeObservability(b *testing.B) {
	body := `{"zone":"eu-west-1a","port":18081}` + "\n"
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 35\r\n\r\n" + body)
	be := rawServeBackend(b, resp)
	for _, v := range []struct{ name, tuning string }{
		{"off", "spillway: {requestMetrics: false}\n"},
		{"metrics", ""},
		{"metrics+log", "spillway: {accessLog: {enable: true, path: LOG}}\n"},
	} {
		b.Run(v.name, func(b *testing.B) {
			tuning := bytes.ReplaceAll([]byte(v.tuning), []byte("LOG"), []byte(filepath.Join(b.TempDir(), "access.log")))
			y := oneServiceYAML(be, `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um, region: us-east1}`, string(tuning))
			s := servetest.Run(b, servetest.Parse(b, y), serve.Options{WatchInterval: -1})
			benchRaw(b, s.FrontendAddr("fe"), []byte(body))
		})
	}
}

// benchRaw sends wrk-like GETs on one keep-alive connection and checks
// each response's body.
func benchRaw(b *testing.B, addr string, want []byte) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1:18480\r\n\r\n")
	br := bufio.NewReaderSize(c, 16<<10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
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
