package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// perRequestBackend answers every request on a connection with the bytes
// script returns for it (written as they are), keeping the connection
// until the client closes it.
func perRequestBackend(t *testing.T, script func(*http.Request) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				for range 100 {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, script(req)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestNoInventedContentType: a backend response without Content-Type
// reaches the client without one, on both frontend loops. Both servers
// would sniff one from the body (net/http from up to 512 bytes, h1.Server
// from the first write), so the proxy would invent a header the backend
// never sent, and the two loops would invent different ones when the body
// arrives in pieces. The handler suppresses sniffing with a nil
// Content-Type (net/http's convention, which h1.Server follows).
func TestNoInventedContentType(t *testing.T) {
	forBothLoops(t, func(t *testing.T) {
		be := perRequestBackend(t, func(r *http.Request) string {
			if r.URL.Path == "/typed" {
				return "HTTP/1.1 200 OK\r\nContent-Type: application/x-typed\r\nContent-Length: 13\r\n\r\n<html></html>"
			}
			return "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n<html></html>"
		})
		l := newLab(t, basic("", "", be), nil)
		for _, tc := range []struct{ path, want string }{{"/untyped", ""}, {"/typed", "application/x-typed"}} {
			resp, body := l.get(tc.path, "example.com")
			if resp.StatusCode != 200 || body != "<html></html>" {
				t.Fatalf("%s: %d %q", tc.path, resp.StatusCode, body)
			}
			got, ok := resp.Header["Content-Type"]
			if tc.want == "" && ok || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
				t.Errorf("%s: Content-Type %q, want %q", tc.path, got, tc.want)
			}
		}
	})
}
