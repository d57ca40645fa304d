package proxy_test

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/spillwaylb/spillway/internal/h1/h1test"
)

// TestNoInventedContentType: a backend response without Content-Type
// reaches the client without one, on both frontend loops. Both servers
// would sniff one from the body (net/http from up to 512 bytes, h1.Server
// from the first write), so the proxy would invent a header the backend
// never sent, and the two loops would invent different ones when the body
// arrives in pieces. The handler suppresses sniffing with a nil
// Content-Type (net/http's convention, which h1.Server follows).
func TestNoInventedContentType(t *testing.T) {
	t.Parallel()
	forBothLoops(t, func(t *testing.T, ls labServer) {
		be := h1test.RawBackend(t, func(c net.Conn, r *http.Request) bool {
			resp := "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n<html></html>"
			if r.URL.Path == "/typed" {
				resp = "HTTP/1.1 200 OK\r\nContent-Type: application/x-typed\r\nContent-Length: 13\r\n\r\n<html></html>"
			}
			_, err := io.WriteString(c, resp)
			return err == nil
		})
		l := newLabServer(t, basic("", "", be), nil, ls)
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
