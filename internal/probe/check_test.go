package probe_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/probe"
)

// okTimeout is the probe timeout for tests that expect no timeout: long
// enough that a loaded CI machine never hits it.
const okTimeout = 3 * time.Second

func httpSpec(typ string) probe.Spec {
	return probe.Spec{Type: typ, Interval: okTimeout, Timeout: okTimeout}
}

func TestCheckHTTPStatusAndBody(t *testing.T) {
	pad := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name       string
		status     int
		body       string
		location   string
		path       string
		response   string
		wantOK     bool
		wantDetail string
	}{
		{name: "200", status: 200, body: "anything", wantOK: true, wantDetail: "HTTP 200"},
		{name: "500", status: 500, wantDetail: "HTTP 500"},
		{name: "503", status: 503, wantDetail: "HTTP 503"},
		{name: "204 is not 200", status: 204, wantDetail: "HTTP 204"},
		{name: "301 is not followed", status: 301, location: "/ok", wantDetail: "HTTP 301"},
		{name: "302 is not followed", status: 302, location: "/ok", wantDetail: "HTTP 302"},
		{name: "404", status: 404, wantDetail: "HTTP 404"},
		{name: "response at start", status: 200, body: "healthy" + pad(5000), response: "healthy", wantOK: true, wantDetail: "HTTP 200"},
		{name: "response ends at byte 1024", status: 200, body: pad(1024-len("healthy")) + "healthy" + pad(100), response: "healthy", wantOK: true, wantDetail: "HTTP 200"},
		{name: "response straddles byte 1024", status: 200, body: pad(1020) + "healthy", response: "healthy", wantDetail: `response did not contain "healthy"`},
		{name: "response beyond 1024 bytes", status: 200, body: pad(2000) + "healthy", response: "healthy", wantDetail: `response did not contain "healthy"`},
		{name: "response absent", status: 200, body: "sick", response: "healthy", wantDetail: `response did not contain "healthy"`},
		{name: "response with spaces", status: 200, body: "status all good", response: "all good", wantOK: true, wantDetail: "HTTP 200"},
		{name: "status checked before body", status: 500, body: "healthy", response: "healthy", wantDetail: "HTTP 500"},
		{name: "path with query", status: 200, path: "/healthz?full=1", wantOK: true, wantDetail: "HTTP 200"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantURI := tc.path
			if wantURI == "" {
				wantURI = "/"
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.RequestURI() != wantURI {
					t.Errorf("request URI = %q, want %q", r.URL.RequestURI(), wantURI)
				}
				if tc.location != "" {
					w.Header().Set("Location", tc.location)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()

			spec := httpSpec(probe.TypeHTTP)
			spec.Path, spec.Response = tc.path, tc.response
			target := probe.Target{Addr: srv.Listener.Addr().String(), Spec: spec}
			got := probe.New(func(probe.Result) {}).Check(context.Background(), target)
			if got.OK != tc.wantOK || got.Detail != tc.wantDetail {
				t.Errorf("Check(%s) = {OK: %v, Detail: %q}, want {OK: %v, Detail: %q}",
					tc.name, got.OK, got.Detail, tc.wantOK, tc.wantDetail)
			}
			if got.Target != target {
				t.Errorf("Check().Target = %+v, want %+v", got.Target, target)
			}
		})
	}
}

func TestCheckHTTPRequestHeaders(t *testing.T) {
	tests := []struct {
		name     string
		host     string
		wantHost string
	}{
		{name: "empty host means target IP", host: "", wantHost: "127.0.0.1"},
		{name: "explicit host", host: "svc.example.com", wantHost: "svc.example.com"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			type seen struct{ host, ua string }
			got := make(chan seen, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- seen{r.Host, r.UserAgent()}
			}))
			defer srv.Close()

			spec := httpSpec(probe.TypeHTTP)
			spec.Host = tc.host
			res := probe.New(func(probe.Result) {}).Check(context.Background(),
				probe.Target{Addr: srv.Listener.Addr().String(), Spec: spec})
			if !res.OK {
				t.Fatalf("Check() failed: %s", res.Detail)
			}
			s := <-got
			if s.host != tc.wantHost {
				t.Errorf("Host header = %q, want %q", s.host, tc.wantHost)
			}
			if s.ua != probe.UserAgent {
				t.Errorf("User-Agent = %q, want %q", s.ua, probe.UserAgent)
			}
		})
	}
}

func TestCheckTLS(t *testing.T) {
	type seen struct {
		proto, alpn, sni string
	}
	newServer := func(t *testing.T, h2 bool) (*httptest.Server, chan seen) {
		got := make(chan seen, 1)
		srv := quiet(httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := seen{proto: r.Proto}
			if r.TLS != nil {
				s.alpn, s.sni = r.TLS.NegotiatedProtocol, r.TLS.ServerName
			}
			select {
			case got <- s:
			default:
			}
			io.WriteString(w, "tls ok")
		})))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv, got
	}

	tests := []struct {
		name       string
		typ        string
		serverH2   bool
		host       string
		wantOK     bool
		wantDetail string // substring
		want       seen
	}{
		{name: "HTTPS self-signed", typ: probe.TypeHTTPS, wantOK: true, wantDetail: "HTTP 200",
			want: seen{proto: "HTTP/1.1", alpn: "http/1.1"}},
		// httptest's HTTP/2 server offers only "h2", so no ALPN protocol
		// is agreed and the connection falls back to HTTP/1.1.
		{name: "HTTPS to h2-only ALPN server stays HTTP/1.1", typ: probe.TypeHTTPS, serverH2: true, wantOK: true,
			wantDetail: "HTTP 200", want: seen{proto: "HTTP/1.1", alpn: ""}},
		{name: "HTTPS sends Host as SNI", typ: probe.TypeHTTPS, host: "svc.example.com", wantOK: true,
			wantDetail: "HTTP 200", want: seen{proto: "HTTP/1.1", alpn: "http/1.1", sni: "svc.example.com"}},
		{name: "HTTP2 over TLS", typ: probe.TypeHTTP2, serverH2: true, wantOK: true, wantDetail: "HTTP 200",
			want: seen{proto: "HTTP/2.0", alpn: "h2"}},
		{name: "HTTP2 to HTTP/1.1-only server", typ: probe.TypeHTTP2, serverH2: false,
			wantDetail: "tls handshake: remote error: tls: no application protocol"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := newServer(t, tc.serverH2)
			spec := httpSpec(tc.typ)
			spec.Host, spec.Response = tc.host, "tls ok"
			res := probe.New(func(probe.Result) {}).Check(context.Background(),
				probe.Target{Addr: srv.Listener.Addr().String(), Spec: spec})
			if res.OK != tc.wantOK || !strings.Contains(res.Detail, tc.wantDetail) {
				t.Fatalf("Check(%s) = {OK: %v, Detail: %q}, want {OK: %v, Detail containing %q}",
					tc.name, res.OK, res.Detail, tc.wantOK, tc.wantDetail)
			}
			if !tc.wantOK {
				return
			}
			if s := <-got; s != tc.want {
				t.Errorf("server saw %+v, want %+v", s, tc.want)
			}
		})
	}
}

func TestCheckTLSVerification(t *testing.T) {
	srv := quiet(httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	srv.StartTLS()
	defer srv.Close()
	trusted := x509.NewCertPool()
	trusted.AddCert(srv.Certificate())

	tests := []struct {
		name       string
		cfg        *tls.Config
		wantOK     bool
		wantDetail string
	}{
		{name: "default skips verification", cfg: nil, wantOK: true, wantDetail: "HTTP 200"},
		{name: "verifying config, untrusted cert", cfg: &tls.Config{}, wantDetail: "tls handshake: "},
		{name: "verifying config, trusted cert, IP SAN", cfg: &tls.Config{RootCAs: trusted}, wantOK: true, wantDetail: "HTTP 200"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := probe.New(func(probe.Result) {}, probe.WithTLSConfig(tc.cfg))
			res := p.Check(context.Background(),
				probe.Target{Addr: srv.Listener.Addr().String(), Spec: httpSpec(probe.TypeHTTPS)})
			if res.OK != tc.wantOK || !strings.Contains(res.Detail, tc.wantDetail) {
				t.Errorf("Check(%s) = {OK: %v, Detail: %q}, want {OK: %v, Detail containing %q}",
					tc.name, res.OK, res.Detail, tc.wantOK, tc.wantDetail)
			}
		})
	}
}

func TestCheckProxyV1HTTPFamily(t *testing.T) {
	for _, typ := range []string{probe.TypeHTTP, probe.TypeHTTPS, probe.TypeHTTP2} {
		t.Run(typ, func(t *testing.T) {
			srv := quiet(httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
			pl := &proxyV1Listener{Listener: srv.Listener}
			srv.Listener = pl
			srv.EnableHTTP2 = typ == probe.TypeHTTP2
			if typ == probe.TypeHTTP {
				srv.Start()
			} else {
				srv.StartTLS()
			}
			defer srv.Close()

			spec := httpSpec(typ)
			spec.ProxyHeader = probe.ProxyHeaderV1
			res := probe.New(func(probe.Result) {}).Check(context.Background(),
				probe.Target{Addr: pl.Addr().String(), Spec: spec})
			if !res.OK {
				t.Errorf("Check(%s, PROXY_V1) failed: %s", typ, res.Detail)
			}
			if n := pl.missing.Load(); n != 0 {
				t.Errorf("%d connections lacked the PROXY header", n)
			}
		})
	}
}

func TestCheckTCP(t *testing.T) {
	// reply reads one chunk of the request, then writes answer.
	reply := func(answer string) func(net.Conn) {
		return func(c net.Conn) {
			buf := make([]byte, 64)
			if _, err := c.Read(buf); err != nil {
				return
			}
			io.WriteString(c, answer)
		}
	}
	tests := []struct {
		name       string
		addr       func(t *testing.T) string
		spec       probe.Spec
		wantOK     bool
		wantDetail string // substring
	}{
		{
			name:       "connect ok",
			addr:       func(t *testing.T) string { return tcpServer(t, func(net.Conn) {}) },
			wantOK:     true,
			wantDetail: "connected",
		},
		{
			name:       "connect refused",
			addr:       refusedAddr,
			wantDetail: "connection refused",
		},
		{
			name:       "request and exact response",
			addr:       func(t *testing.T) string { return tcpServer(t, reply("PONG\n")) },
			spec:       probe.Spec{Request: "PING\n", Response: "PONG\n"},
			wantOK:     true,
			wantDetail: "response matched",
		},
		{
			name:       "response compared on its length only",
			addr:       func(t *testing.T) string { return tcpServer(t, reply("PONG and more")) },
			spec:       probe.Spec{Request: "PING\n", Response: "PONG"},
			wantOK:     true,
			wantDetail: "response matched",
		},
		{
			name:       "response mismatch",
			addr:       func(t *testing.T) string { return tcpServer(t, reply("FAIL\n")) },
			spec:       probe.Spec{Request: "PING\n", Response: "PONG\n"},
			wantDetail: `response "FAIL\n" did not match "PONG\n"`,
		},
		{
			name:       "server closes before full response",
			addr:       func(t *testing.T) string { return tcpServer(t, reply("PO")) },
			spec:       probe.Spec{Request: "PING\n", Response: "PONG\n"},
			wantDetail: `read response (got "PO"): unexpected EOF`,
		},
		{
			name: "PROXY_V1 header precedes request",
			addr: func(t *testing.T) string {
				return tcpServer(t, func(c net.Conn) {
					want := "PROXY UNKNOWN\r\nPING\n"
					buf := make([]byte, len(want))
					if _, err := io.ReadFull(c, buf); err != nil || string(buf) != want {
						io.WriteString(c, "BAD!\n")
						return
					}
					io.WriteString(c, "PONG\n")
				})
			},
			spec:       probe.Spec{Request: "PING\n", Response: "PONG\n", ProxyHeader: probe.ProxyHeaderV1},
			wantOK:     true,
			wantDetail: "response matched",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.Type, spec.Interval, spec.Timeout = probe.TypeTCP, okTimeout, okTimeout
			res := probe.New(func(probe.Result) {}).Check(context.Background(),
				probe.Target{Addr: tc.addr(t), Spec: spec})
			if res.OK != tc.wantOK || !strings.Contains(res.Detail, tc.wantDetail) {
				t.Errorf("Check(%s) = {OK: %v, Detail: %q}, want {OK: %v, Detail containing %q}",
					tc.name, res.OK, res.Detail, tc.wantOK, tc.wantDetail)
			}
		})
	}
}

func TestCheckTimeout(t *testing.T) {
	t.Parallel()
	// Long enough that a TLS handshake under -race on a loaded machine
	// finishes well inside it; the subtests run in parallel.
	const timeout = 2 * time.Second
	// unblock returns a channel closed at the end of the current subtest
	// (before its servers are closed, since cleanups run last-in first-out).
	unblock := func(t *testing.T) chan struct{} {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		return release
	}
	type handler func(release chan struct{}) http.HandlerFunc
	block := func(release chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}
	slowBody := func(release chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			block(release)(w, r)
		}
	}
	httpAddr := func(h handler, tlsMode string) func(t *testing.T) string {
		return func(t *testing.T) string {
			srv := quiet(httptest.NewUnstartedServer(nil))
			t.Cleanup(srv.Close)
			srv.Config.Handler = h(unblock(t))
			switch tlsMode {
			case "":
				srv.Start()
			case "h2":
				srv.EnableHTTP2 = true
				srv.StartTLS()
			default:
				srv.StartTLS()
			}
			return srv.Listener.Addr().String()
		}
	}
	// silentTCP accepts connections and never writes; a TLS client
	// therefore waits for a ServerHello that never comes.
	silentTCP := func(t *testing.T) string {
		release := make(chan struct{})
		addr := tcpServer(t, func(c net.Conn) { <-release })
		t.Cleanup(func() { close(release) }) // before tcpServer's cleanup waits
		return addr
	}

	tests := []struct {
		name      string
		typ       string
		response  string
		addr      func(t *testing.T) string
		wantStage string
	}{
		{name: "HTTP handler too slow", typ: probe.TypeHTTP, addr: httpAddr(block, ""), wantStage: "(await response)"},
		{name: "HTTP body too slow", typ: probe.TypeHTTP, response: "never", addr: httpAddr(slowBody, ""), wantStage: "(read body)"},
		{name: "HTTPS handler too slow", typ: probe.TypeHTTPS, addr: httpAddr(block, "tls"), wantStage: "(await response)"},
		{name: "HTTP2 handler too slow", typ: probe.TypeHTTP2, addr: httpAddr(block, "h2"), wantStage: "(await response)"},
		{name: "TLS handshake never answered", typ: probe.TypeHTTPS, addr: silentTCP, wantStage: "(TLS handshake)"},
		{name: "TCP reply never sent", typ: probe.TypeTCP, response: "PONG", addr: silentTCP, wantStage: "(read response)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := probe.Spec{Type: tc.typ, Interval: timeout, Timeout: timeout, Response: tc.response}
			res := probe.New(func(probe.Result) {}).Check(context.Background(),
				probe.Target{Addr: tc.addr(t), Spec: spec})
			if res.OK {
				t.Fatalf("Check(%s) succeeded, want timeout", tc.name)
			}
			if err := hasAll(res.Detail, "timeout after 2s", tc.wantStage); err != nil {
				t.Errorf("Check(%s).Detail: %v", tc.name, err)
			}
			// The timeout bounds the whole probe; 3*timeout is a generous
			// bound that only a probe ignoring its timeout would exceed.
			if res.Latency > 3*timeout {
				t.Errorf("Check(%s).Latency = %v, want about %v", tc.name, res.Latency, timeout)
			}
		})
	}
}

func TestCheckCanceledContext(t *testing.T) {
	addr := tcpServer(t, func(c net.Conn) { io.ReadAll(c) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := probe.New(func(probe.Result) {}).Check(ctx,
		probe.Target{Addr: addr, Spec: probe.Spec{Type: probe.TypeTCP, Response: "x"}})
	if res.OK || !strings.HasPrefix(res.Detail, "canceled: ") {
		t.Errorf("Check(canceled ctx) = {OK: %v, Detail: %q}, want failure starting %q", res.OK, res.Detail, "canceled: ")
	}
}

func TestCheckInvalidTarget(t *testing.T) {
	res := probe.New(func(probe.Result) {}).Check(context.Background(),
		probe.Target{Addr: "localhost:80", Spec: probe.Spec{Type: "UDP"}})
	if res.OK || !strings.HasPrefix(res.Detail, "invalid target: ") {
		t.Errorf("Check(invalid) = {OK: %v, Detail: %q}, want failure starting %q", res.OK, res.Detail, "invalid target: ")
	}
}

func TestCheckClock(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	addr := tcpServer(t, func(net.Conn) {})
	p := probe.New(func(probe.Result) {}, probe.WithClock(func() time.Time { return at }))
	res := p.Check(context.Background(), probe.Target{Addr: addr, Spec: probe.Spec{Type: probe.TypeTCP}})
	if !res.At.Equal(at) {
		t.Errorf("Check().At = %v, want %v (from WithClock)", res.At, at)
	}
	if res.Latency <= 0 {
		t.Errorf("Check().Latency = %v, want > 0 (real time)", res.Latency)
	}
}
