package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// twoEndpointYAML is one service over one NEG holding a and b, and a
// second, empty-weighted service so that a weight has a split to change.
func twoEndpointYAML(a, b string) string {
	ah, ap, _ := net.SplitHostPort(a)
	bh, bp, _ := net.SplitHostPort(b)
	return fmt.Sprintf(`networkEndpointGroups:
- name: neg
  zone: us-east1-b
  endpoints:
  - {ipAddress: %s, port: %s}
  - {ipAddress: %s, port: %s}
backendServices:
- name: bs
  localityLbPolicy: ROUND_ROBIN
  backends:
  - {group: neg, balancingMode: RATE, maxRatePerEndpoint: 100000}
urlMaps:
- name: um
  defaultService: bs
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}
`, ah, ap, bh, bp)
}

// syncBuffer is an io.Writer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// postOverlay sends one overlay change and returns the status and body.
func postOverlay(t *testing.T, s *serve.Server, token string, req serve.OverlayRequest) (int, string) {
	t.Helper()
	body, _ := json.Marshal(req)
	r, err := http.NewRequestWithContext(context.Background(), "POST", adminURL(s)+"/overlay", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// zoneCounts sends n requests on new connections and counts the bodies.
func zoneCounts(t *testing.T, url string, n int) map[string]int {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	got := map[string]int{}
	for range n {
		body, err := getBody(cl, url)
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		got[body]++
	}
	return got
}

// A drained endpoint gets no new request; the drain survives a reload,
// shows in get-health, is written to the audit log, and ends at its
// expiry by the server's clock.
func TestOverlayDrainEndpoint(t *testing.T) {
	a, b := startBackend(t, "A"), startBackend(t, "B")
	var skew atomic.Int64 // the server's clock runs this far ahead
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	audit := &syncBuffer{}
	y := twoEndpointYAML(a.addr, b.addr)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", AdminToken: testToken, WatchInterval: -1,
		Now: now, AuditLog: audit, OverlayCheckInterval: 20 * time.Millisecond})
	url := "http://" + s.FrontendAddr("fe") + "/"
	if got := zoneCounts(t, url, 20); got["A"] == 0 || got["B"] == 0 {
		t.Fatalf("before the drain both endpoints should serve: %v", got)
	}

	drain := serve.OverlayRequest{Op: "drain", Actor: "alice@ops"}
	drain.Group, drain.Endpoint, drain.For, drain.Reason = "neg", b.addr, "30m", "kernel upgrade"
	if code, body := postOverlay(t, s, "", drain); code != http.StatusUnauthorized {
		t.Fatalf("POST /overlay without the token: %d %s, want 401", code, body)
	}
	if code, body := postOverlay(t, s, testToken, drain); code != http.StatusOK {
		t.Fatalf("POST /overlay drain: %d %s", code, body)
	}
	if got := zoneCounts(t, url, 100); got["B"] != 0 || got["A"] != 100 {
		t.Fatalf("after the drain: %v, want every request on A", got)
	}
	h := s.Health()
	if ep := h.Services[0].Backends[0].Endpoints; len(ep) != 1 {
		t.Errorf("get-health lists %d endpoints, want the drained one gone as from the config: %+v", len(ep), ep)
	}

	// A reload of the same file keeps the overlay.
	if err := s.Reload(context.Background(), servetest.Parse(t, y)); err != nil {
		t.Fatal(err)
	}
	if got := zoneCounts(t, url, 50); got["B"] != 0 {
		t.Fatalf("after a reload: %v, want the drain kept", got)
	}
	var hr report.Health
	getJSON(t, adminURL(s)+"/health", testToken, &hr)
	if hr.Overlay == nil || len(hr.Overlay.Entries) != 1 || hr.Overlay.Entries[0].Actor != "alice@ops" || hr.Overlay.Entries[0].Reason != "kernel upgrade" {
		t.Fatalf("/health overlay = %+v, want the drain with its actor and reason", hr.Overlay)
	}
	if !strings.Contains(audit.String(), `"op":"drain"`) || !strings.Contains(audit.String(), `"actor":"alice@ops"`) {
		t.Errorf("audit log lacks the drain:\n%s", audit)
	}

	// 31 minutes later by the server's clock the drain has expired.
	skew.Store(int64(31 * time.Minute))
	waitFor(t, "the drain expired and B serving again", func() bool {
		return zoneCounts(t, url, 10)["B"] > 0
	})
	if s.Overlay() != nil {
		t.Errorf("overlay after expiry = %+v, want none", s.Overlay())
	}
	if !strings.Contains(audit.String(), `"op":"expire"`) {
		t.Errorf("audit log lacks the expiry:\n%s", audit)
	}
}

func getJSON(t *testing.T, url, token string, v any) {
	t.Helper()
	r, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// A change the config cannot take is refused and changes nothing; a
// reload to a config that lacks the target keeps the entry and reports
// it.
func TestOverlayRefusedAndMissingTarget(t *testing.T) {
	a, b := startBackend(t, "A"), startBackend(t, "B")
	y := twoEndpointYAML(a.addr, b.addr)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	only := serve.OverlayRequest{Op: "drain"}
	only.Service = "bs"
	if code, body := postOverlay(t, s, "", only); code != http.StatusUnprocessableEntity || !strings.Contains(body, "only backend") {
		t.Fatalf("draining the only backend: %d %s, want 422 naming why", code, body)
	}
	bad := serve.OverlayRequest{Op: "set", CapacityScaler: ptr(0.05)}
	bad.Service = "bs"
	if code, _ := postOverlay(t, s, "", bad); code != http.StatusBadRequest {
		t.Fatalf("capacityScaler 0.05: %d, want 400", code)
	}
	if s.Overlay() != nil {
		t.Fatalf("refused changes left an overlay: %+v", s.Overlay())
	}
	drain := serve.OverlayRequest{Op: "drain"}
	drain.Endpoint = b.addr
	if code, body := postOverlay(t, s, "", drain); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, body)
	}
	// The new config has no b: the entry stays, reported, and the reload
	// applies.
	lines := strings.Split(y, "\n")
	c := servetest.Parse(t, strings.Join(append(lines[:5:5], lines[6:]...), "\n"))
	if err := s.Reload(context.Background(), c); err != nil {
		t.Fatalf("a reload whose config lacks an overlay target failed: %v", err)
	}
	ov := s.Overlay()
	if ov == nil || len(ov.Entries) != 1 || len(ov.Problems) != 1 || !strings.Contains(ov.Problems[0], "no group of the config has a member") {
		t.Fatalf("overlay after the reload = %+v, want the entry kept and one problem", ov)
	}
	undrain := serve.OverlayRequest{Op: "undrain"}
	undrain.Endpoint = b.addr
	if code, body := postOverlay(t, s, "", undrain); code != http.StatusOK {
		t.Fatalf("undrain: %d %s", code, body)
	}
	if s.Overlay() != nil {
		t.Fatalf("overlay after undrain = %+v", s.Overlay())
	}
}
