package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/proxy"
)

// rawRequest sends raw request bytes on a new connection to addr and
// returns the response (body read into body).
func rawRequest(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const secretMap = `  defaultService: bs
  hostRules:
  - hosts: ['*']
    pathMatcher: pm
  pathMatchers:
  - name: pm
    defaultService: bs
    routeRules:
    - priority: 1
      matchRules: [{prefixMatch: /secret/}]
      routeAction:
        weightedBackendServices: [{backendService: bs, weight: 1}]
        faultInjectionPolicy:
          abort: {httpStatus: 403, percentage: 100}
`

// Paths that climb out of or hide a prefix are normalised before the URL
// map matches them, so a /secret/ rule cannot be bypassed, and the backend
// receives the normalised path (issue 9, item 4).
func TestPathNormalisedBeforeMatching(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.RequestURI)
	})
	l := newLab(t, basic("", secretMap, be.addr()), nil)
	for _, p := range []string{
		"/public/../secret/x",
		"/./secret/x",
		"//secret/x",
		"/%2e%2e/secret/x",
		"/%2e/secret/x",
		"/secret/./x",
		"/%73ecret/x",
		"/public/..%2Fsecret/x",
		"/public/..%5csecret/x",
	} {
		resp, body := rawRequest(t, l.addr, "GET "+p+" HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 403 {
			t.Errorf("GET %s: %d %q, want 403 from the /secret/ rule", p, resp.StatusCode, body)
		}
	}
	if n := be.hits.Load(); n != 0 {
		t.Errorf("backend reached %d times", n)
	}
	for _, tc := range []struct{ in, fwd string }{
		{"/a/./b/../c//d?q=1", "/a/c/d?q=1"},
		{"/%7euser/%2fx/%e2%82%ac", "/~user/%2Fx/%E2%82%AC"},
		{"/public/../pub%20lic/", "/pub%20lic/"},
		{"/plain/path", "/plain/path"},
	} {
		resp, body := rawRequest(t, l.addr, "GET "+tc.in+" HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 200 || body != tc.fwd {
			t.Errorf("GET %s: backend saw %d %q, want 200 %q", tc.in, resp.StatusCode, body, tc.fwd)
		}
	}
}

// spillway.pathWithEscapedSlashesAction: REJECT_REQUEST answers 400 to a
// path with %2F or %5C without contacting a backend.
func TestEscapedSlashRejected(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {})
	cfg := basic("", secretMap, be.addr()) + "spillway: {pathWithEscapedSlashesAction: REJECT_REQUEST}\n"
	l := newLab(t, cfg, nil)
	for _, p := range []string{"/a%2Fb", "/a%5cb"} {
		resp, body := rawRequest(t, l.addr, "GET "+p+" HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 400 {
			t.Errorf("GET %s: %d %q, want 400", p, resp.StatusCode, body)
		}
	}
	if n := be.hits.Load(); n != 0 {
		t.Errorf("backend reached %d times", n)
	}
}

const redirectMap = `  defaultService: bs
  hostRules:
  - hosts: ['*']
    pathMatcher: pm
  pathMatchers:
  - name: pm
    defaultService: bs
    routeRules:
    - priority: 1
      matchRules: [{prefixMatch: /old/}]
      urlRedirect: {prefixRedirect: /new/}
    - priority: 2
      matchRules: [{prefixMatch: /tls/}]
      urlRedirect: {httpsRedirect: true, redirectResponseCode: FOUND}
    - priority: 3
      matchRules: [{prefixMatch: /moved/}]
      urlRedirect: {pathRedirect: /here}
`

// Redirects are built from the escaped path: percent-encoded control
// bytes and '?' stay encoded in Location instead of being emitted raw
// (header injection, a path turned into a query) (issue 9, item 10).
func TestRedirectLocationKeepsEscapes(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {})
	l := newLab(t, basic("", redirectMap, be.addr()), nil)
	for _, tc := range []struct{ target, want string }{
		{"/old/a%00b", "http://example.com/new/a%00b"},
		{"/old/x%0d%0aSet-Cookie:%20evil=1", "http://example.com/new/x%0D%0ASet-Cookie:%20evil=1"},
		{"/old/what%3Fis=this?q=1", "http://example.com/new/what%3Fis=this?q=1"},
		{"/old/./a/../%7Eu", "http://example.com/new/~u"}, // normalised first
		{"/tls/a%3fb%00?x", "https://example.com/tls/a%3Fb%00?x"},
		{"/tls/sp%20ace", "https://example.com/tls/sp%20ace"},
		{"/moved/a%0d%0ab", "http://example.com/here"},
		// Matched as /old/x (the escaped slash is a separator for the URL
		// map): the prefix is replaced on the path that matched, not cut
		// out of the forwarded one (which gave /new/..%2Fold/x).
		{"/old/..%2Fold/x", "http://example.com/new/x"},
		{"/old/a%5C..%5Cb", "http://example.com/new/b"},
	} {
		req := "GET " + tc.target + " HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"
		conn, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, req)
		raw, _ := io.ReadAll(conn)
		conn.Close()
		head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
		var loc []string
		for _, line := range strings.Split(head, "\r\n")[1:] {
			name, value, _ := strings.Cut(line, ":")
			if strings.EqualFold(name, "Location") {
				loc = append(loc, strings.TrimSpace(value))
			}
			if strings.EqualFold(name, "Set-Cookie") {
				t.Errorf("GET %s: injected header %q", tc.target, line)
			}
		}
		if len(loc) != 1 || loc[0] != tc.want {
			t.Errorf("GET %s: Location %q, want %q\n%s", tc.target, loc, tc.want, head)
		}
	}
}

// closingBackend accepts connections, reads a little and closes them
// without answering.
func closingBackend(t *testing.T) string {
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
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			c.Read(make([]byte, 4096))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

var leak = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|:\d{2,5}\b|\[::|dial|tcp|refused|EOF|reset by peer|backend service|\bbs\b`)

// Load-balancer error responses carry a short neutral body and a
// statusDetails token, never a backend address, a service name or Go
// error text (issue 9, item 12).
func TestErrorBodiesRevealNoBackendDetail(t *testing.T) {
	t.Parallel()
	slow := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	healthy := newBackend(t, func(w http.ResponseWriter, r *http.Request) {})
	for _, tc := range []struct {
		name    string
		cfg     string
		unready string // endpoint marked unhealthy
		status  int
		details string
	}{
		{"refused", basic("", "", refusedAddr(t)), "", 503, "failed_to_connect_to_backend"},
		{"timeout", basic("  timeoutSec: 1\n", "", slow.addr()), "", 504, "backend_timeout"},
		{"closed", basic("", "", closingBackend(t)), "", 503, "backend_connection_closed_before_data_sent_to_client"},
		{"no healthy backend", basic("", "", healthy.addr()), healthy.addr(), 503, "failed_to_pick_backend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t, tc.cfg, nil)
			if tc.unready != "" {
				l.setHealthy(tc.unready, false)
			}
			resp, body := l.get("/", "")
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %q, want %d", resp.StatusCode, body, tc.status)
			}
			if m := leak.FindString(body); m != "" {
				t.Errorf("body %q reveals %q", body, m)
			}
			if got := resp.Header.Get("X-Spillway-Status-Details"); got != tc.details {
				t.Errorf("X-Spillway-Status-Details %q, want %q", got, tc.details)
			}
			if !strings.Contains(body, tc.details) {
				t.Errorf("body %q lacks %q", body, tc.details)
			}
		})
	}
}

// A request whose body the client fails to deliver is answered 400 and
// not retried on another endpoint, even under a retry policy that retries
// 5xx and resets; its outcome is the client's fault (issue 9, item 2).
func TestClientBodyErrorNotRetried(t *testing.T) {
	upload := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		io.WriteString(w, "ok")
	}
	b1, b2 := newBackend(t, upload), newBackend(t, upload)
	um := "  defaultRouteAction:\n    weightedBackendServices: [{backendService: bs, weight: 1}]\n" +
		"    retryPolicy:\n      retryConditions: [5xx, gateway-error, connect-failure]\n      numRetries: 2\n"
	l := newLab(t, basic("", um, b1.addr(), b2.addr()), nil)
	resp, body := rawRequest(t, l.addr, "POST /up HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
	if resp.StatusCode != 400 || !strings.Contains(body, "malformed_request_body") {
		t.Errorf("status %d %q, want 400 malformed_request_body", resp.StatusCode, body)
	}
	obs := l.observed()
	if len(obs) != 1 {
		t.Fatalf("%d attempts, want 1 (no retry): %+v", len(obs), obs)
	}
	if o := obs[0]; !o.ClientFault || o.BackendSignal() || !errors.Is(o.Err, proxy.ErrClientBody) {
		t.Errorf("outcome %+v: want ClientFault, no backend signal, Err wrapping ErrClientBody", o)
	}
}

// BackendSignal is the one predicate outlier detection and passive health
// use to ignore outcomes that say nothing about the backend.
func TestOutcomeBackendSignal(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    proxy.Outcome
		want bool
	}{
		{"response", proxy.Outcome{Status: 503}, true},
		{"connect failure", proxy.Outcome{Err: errors.New("refused"), ConnectFailure: true}, true},
		{"timeout", proxy.Outcome{Err: errors.New("timeout"), Timeout: true}, true},
		{"mirror", proxy.Outcome{Status: 503, Mirror: true}, false},
		{"client cancelled", proxy.Outcome{Err: fmt.Errorf("round trip: %w", context.Canceled)}, false},
		{"client body", proxy.Outcome{Err: errors.New("bad chunk"), ClientFault: true}, false},
		{"client body error only", proxy.Outcome{Err: fmt.Errorf("x: %w", proxy.ErrClientBody)}, false},
	} {
		if got := tc.o.BackendSignal(); got != tc.want {
			t.Errorf("%s: BackendSignal() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The escaped-slash action holds for paths that also carry bytes url.URL
// does not accept raw in RawPath (non-ASCII, '|', '{'): url.URL then
// drops RawPath and EscapedPath re-escapes the decoded path, which turned
// every %2F into '/' (REJECT_REQUEST let the request through, and
// KEEP_UNCHANGED forwarded '/'). The proxy normalises the path as the
// client sent it.
func TestEscapedSlashActionWithRawBytes(t *testing.T) {
	t.Parallel()
	forBothLoops(t, func(t *testing.T, ls labServer) {
		got := make(chan string, 10)
		be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { got <- r.RequestURI })
		for _, tc := range []struct {
			action, target string
			status         int
			forwarded      string
		}{
			{"REJECT_REQUEST", "/a%2Fb/\xc3\xa9", 400, ""},
			{"REJECT_REQUEST", "/a%2Fb/{x}", 400, ""},
			{"REJECT_REQUEST", "/x/..%2F..%2Fadmin/|", 400, ""},
			{"KEEP_UNCHANGED", "/a%2Fb/\xc3\xa9", 200, "/a%2Fb/%C3%A9"},
			{"KEEP_UNCHANGED", "/a%2fb/{x}|", 200, "/a%2Fb/%7Bx%7D%7C"},
		} {
			cfg := basic("", "", be.addr()) + "spillway: {pathWithEscapedSlashesAction: " + tc.action + "}\n"
			l := newLabServer(t, cfg, nil, ls)
			resp, body := rawRequest(t, l.addr, "GET "+tc.target+" HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
			if resp.StatusCode != tc.status {
				t.Errorf("%s %q: %d %q, want %d", tc.action, tc.target, resp.StatusCode, body, tc.status)
			}
			select {
			case u := <-got:
				if tc.forwarded == "" || u != tc.forwarded {
					t.Errorf("%s %q: backend got %q, want %q", tc.action, tc.target, u, tc.forwarded)
				}
			default:
				if tc.forwarded != "" {
					t.Errorf("%s %q: backend not reached", tc.action, tc.target)
				}
			}
		}
	})
}
