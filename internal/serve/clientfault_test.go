package serve_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// Requests whose bodies fail because of the client (malformed chunking, a
// truncated upload then half-close, a reset mid-upload) are the client's
// fault: they get 400 and never count towards outlier detection, so a
// client cannot eject healthy backends (issue 9, item 2).
func TestClientBodyErrorsDoNotEjectBackends(t *testing.T) {
	// Upload handlers read the whole body before answering.
	upload := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ok")
	})
	b1, b2 := startBackend(t, "a"), startBackend(t, "a")
	b1.srv.Handler, b2.srv.Handler = upload, upload
	h1, p1, _ := net.SplitHostPort(b1.addr)
	h2, p2, _ := net.SplitHostPort(b2.addr)
	cfg := fmt.Sprintf(`healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 50, timeoutMs: 40, httpHealthCheck: {requestPath: /healthz}}
networkEndpointGroups:
- {name: neg, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}, {ipAddress: %s, port: %s}]}
backendServices:
- name: bs
  healthChecks: [hc]
  outlierDetection:
    interval: {seconds: 1}
    baseEjectionTime: {seconds: 60}
    maxEjectionPercent: 100
    consecutiveErrors: 3
    consecutiveGatewayFailure: 3
    enforcingConsecutiveErrors: 100
    enforcingConsecutiveGatewayFailure: 100
  backends:
  - {group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}
urlMaps:
- {name: um, defaultService: bs}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um, region: us-east1}
`, h1, p1, h2, p2)
	c, err := config.Parse([]byte(cfg), "clientfault.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, url := startServer(t, c)
	addr := strings.TrimPrefix(url, "http://")

	const head = "POST /upload HTTP/1.1\r\nHost: lb\r\n"
	bad := []struct {
		name  string
		send  string
		reset bool // close with RST instead of half-closing
	}{
		{"bad chunk size", head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", false},
		{"truncated chunked upload", head + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", false},
		{"truncated upload", head + "Content-Length: 100\r\n\r\n0123456789", false},
		{"reset mid-upload", head + "Content-Length: 100\r\n\r\n0123456789", true},
	}
	for round := 0; round < 4; round++ {
		for _, tc := range bad {
			status := rawBadRequest(t, addr, tc.send, tc.reset)
			if !tc.reset && status != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", tc.name, status)
			}
		}
	}
	// Outcomes reach the detector asynchronously; an ejection caused by
	// the requests above would show within this window.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, b := range s.Health().Services[0].Backends {
			for _, e := range b.Endpoints {
				if e.Ejected {
					t.Fatalf("endpoint %s ejected by client-side body errors", e.IPAddress)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < 10; i++ {
		resp, err := http.Post(url+"/upload", "text/plain", strings.NewReader("fine"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("good request: %d %q, want 200 ok", resp.StatusCode, body)
		}
	}
}

// rawBadRequest sends raw bytes, then half-closes (or resets) the
// connection and returns the response status (0 when none arrived).
func rawBadRequest(t *testing.T, addr, send string, reset bool) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, send); err != nil {
		t.Fatal(err)
	}
	tc := conn.(*net.TCPConn)
	if reset {
		// Give the proxy time to start the upload, then reset.
		time.Sleep(50 * time.Millisecond)
		tc.SetLinger(0)
		return 0
	}
	tc.CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
