package proxy_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// echoHeaders answers with the request's method, host, path, query and
// headers as JSON.
func echoHeaders(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "host": r.Host, "path": r.URL.Path, "rawPath": r.URL.RawPath, "query": r.URL.RawQuery,
		"header": r.Header,
	})
}

type echoed struct {
	Method, Host, Path, RawPath, Query string
	Header                             http.Header
}

func decodeEcho(t *testing.T, body string) echoed {
	t.Helper()
	var e echoed
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("backend answer %q: %v", body, err)
	}
	return e
}

func TestGetReturnsBackendBody(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from backend") })
	l := newLab(t, basic("", "", be.addr()), nil)
	resp, body := l.get("/x", "")
	if resp.StatusCode != 200 || body != "hello from backend" {
		t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, "hello from backend")
	}
	if got := resp.Header.Get("Via"); got != "1.1 spillway" {
		t.Errorf("response Via = %q, want %q", got, "1.1 spillway")
	}
}

func TestForwardedHeaders(t *testing.T) {
	be := newBackend(t, echoHeaders)
	l := newLab(t, basic("", "", be.addr()), nil)
	for _, tc := range []struct {
		name, xff, via, wantXFF, wantVia string
	}{
		{"fresh", "", "", "127.0.0.1,127.0.0.1", "1.1 spillway"},
		{"appended", "203.0.113.9", "1.0 edge", "203.0.113.9,127.0.0.1,127.0.0.1", "1.0 edge, 1.1 spillway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", l.url+"/p/a%2Fb?q=1&r=2", nil)
			req.Host = "www.example.com:8080"
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			if tc.via != "" {
				req.Header.Set("Via", tc.via)
			}
			req.Header.Set("Connection", "keep-alive, X-Hop")
			req.Header.Set("X-Hop", "secret")
			req.Header.Set("Keep-Alive", "timeout=5")
			req.Header.Set("Proxy-Authorization", "Basic Zm9v")
			req.Header.Set("Te", "trailers, deflate")
			req.Header.Set("X-End-To-End", "kept")
			resp, body := l.do(req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			e := decodeEcho(t, body)
			if got := strings.Join(e.Header["X-Forwarded-For"], "|"); got != tc.wantXFF {
				t.Errorf("X-Forwarded-For = %q, want %q", got, tc.wantXFF)
			}
			if got := e.Header.Get("X-Forwarded-Proto"); got != "http" {
				t.Errorf("X-Forwarded-Proto = %q, want http", got)
			}
			if got := strings.Join(e.Header["Via"], "|"); got != tc.wantVia {
				t.Errorf("Via = %q, want %q", got, tc.wantVia)
			}
			for _, h := range []string{"X-Hop", "Keep-Alive", "Proxy-Authorization"} {
				if v, ok := e.Header[h]; ok {
					t.Errorf("hop-by-hop %s = %q reached the backend", h, v)
				}
			}
			if got := e.Header.Get("Te"); got != "trailers" {
				t.Errorf("Te = %q, want trailers", got)
			}
			if got := e.Header.Get("X-End-To-End"); got != "kept" {
				t.Errorf("X-End-To-End = %q, want kept", got)
			}
			if e.Host != "www.example.com:8080" {
				t.Errorf("Host = %q, want www.example.com:8080 (preserved)", e.Host)
			}
			if e.RawPath != "/p/a%2Fb" || e.Query != "q=1&r=2" {
				t.Errorf("path %q (raw %q) query %q, want raw /p/a%%2Fb and q=1&r=2", e.Path, e.RawPath, e.Query)
			}
			if _, ok := e.Header["User-Agent"]; !ok {
				// Go's client sent one; the proxy must pass it on.
				t.Errorf("User-Agent dropped")
			}
		})
	}
}

func TestResponseHopByHopStripped(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=9")
		w.Header().Set("X-Kept", "1")
		io.WriteString(w, "ok")
	})
	l := newLab(t, basic("", "", be.addr()), nil)
	resp, _ := l.get("/", "")
	for _, h := range []string{"X-Resp-Hop", "Keep-Alive"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("response hop-by-hop %s = %q reached the client", h, v)
		}
	}
	if resp.Header.Get("X-Kept") != "1" {
		t.Errorf("X-Kept lost")
	}
}

func TestAllUnhealthyIs503WithReason(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {})
	l := newLab(t, basic("", "", be.addr()), nil)
	l.setHealthy(be.addr(), false)
	resp, body := l.get("/", "")
	if resp.StatusCode != 503 {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	if want := "503 Service Unavailable: no healthy upstream (failed_to_pick_backend)\n"; body != want {
		t.Errorf("body %q, want %q", body, want)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if be.hits.Load() != 0 {
		t.Errorf("backend contacted %d times", be.hits.Load())
	}
}

func TestConnectRefusedIsRetriedElsewhere(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	dead := refusedAddr(t)
	l := newLab(t, basic("", "", dead, be.addr()), nil)
	const n = 6
	for i := range n {
		resp, body := l.get("/", "")
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q, want 200 ok", i, resp.StatusCode, body)
		}
	}
	if got := be.hits.Load(); got != n {
		t.Errorf("healthy backend saw %d requests, want %d", got, n)
	}
	refused := 0
	for _, o := range l.observed() {
		if o.Endpoint.Addr == dead {
			refused++
			if !o.ConnectFailure || o.Status != 0 || o.Err == nil {
				t.Errorf("outcome for dead endpoint: %+v, want a connect failure", o)
			}
		}
	}
	if refused == 0 {
		t.Errorf("no attempt went to the dead endpoint; the test proves nothing")
	}
}

func TestConnectRefusedEverywhereIs503(t *testing.T) {
	dead := refusedAddr(t)
	l := newLab(t, basic("", "", dead), nil)
	resp, body := l.get("/", "")
	if resp.StatusCode != 503 {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	want := "503 Service Unavailable: upstream connect error or disconnect/reset before headers (failed_to_connect_to_backend)\n"
	if body != want {
		t.Errorf("body %q, want %q", body, want)
	}
}

func TestDefaultPolicyRetriesGetNotPost(t *testing.T) {
	bad := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(503)
		io.WriteString(w, "bad")
	})
	good := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "good")
	})
	l := newLab(t, basic("", "", bad.addr(), good.addr()), nil)

	// GET: every request ends at the good backend.
	for i := range 4 {
		resp, body := l.get("/", "")
		if resp.StatusCode != 200 || body != "good" {
			t.Fatalf("GET %d: %d %q, want 200 good", i, resp.StatusCode, body)
		}
	}
	if bad.hits.Load() == 0 {
		t.Fatal("no GET reached the failing backend; the test proves nothing")
	}

	// POST with a body: never retried, so the 503 reaches the client.
	bad.hits.Store(0)
	good.hits.Store(0)
	const n = 4
	got503 := 0
	for range n {
		req, _ := http.NewRequest("POST", l.url+"/", strings.NewReader("payload"))
		resp, _ := l.do(req)
		if resp.StatusCode == 503 {
			got503++
		}
	}
	if got503 == 0 || int64(got503) != bad.hits.Load() {
		t.Errorf("POST: %d answers were 503, failing backend saw %d: want equal and > 0", got503, bad.hits.Load())
	}
	if total := bad.hits.Load() + good.hits.Load(); total != n {
		t.Errorf("POST: backends saw %d requests for %d POSTs: a POST was retried", total, n)
	}
}

// Without a retry policy, a body-less request answered 502/503/504 is
// retried only when its method is idempotent (RFC 9110 §9.2.2: a proxy
// must not retry a non-idempotent request automatically; the backend
// that answered 503 may already have acted on it). A connect failure,
// where nothing was sent, is retried for any method. An explicit
// retryPolicy keeps retrying every method (config warns about it).
func TestRetryReplaysOnlyIdempotentBodylessRequests(t *testing.T) {
	unavailable := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }
	for _, tc := range []struct {
		method string
		policy bool // the route has retryPolicy gateway-error
		hits   int64
	}{
		{"POST", false, 1}, {"PATCH", false, 1}, {"LOCK", false, 1},
		{"GET", false, 2}, {"HEAD", false, 2}, {"OPTIONS", false, 2}, {"PUT", false, 2}, {"DELETE", false, 2},
		{"POST", true, 2}, {"PATCH", true, 2},
	} {
		a := newBackend(t, unavailable)
		b := newBackend(t, unavailable)
		yaml := basic("", "", a.addr(), b.addr())
		if tc.policy {
			yaml = basic("", "  defaultRouteAction:\n    weightedBackendServices: [{backendService: bs, weight: 1}]\n"+
				"    retryPolicy: {retryConditions: [gateway-error]}\n", a.addr(), b.addr())
		}
		l := newLab(t, yaml, nil)
		req, _ := http.NewRequest(tc.method, l.url+"/", nil)
		resp, _ := l.do(req)
		if resp.StatusCode != 503 {
			t.Errorf("%s (policy %v): status %d, want 503", tc.method, tc.policy, resp.StatusCode)
		}
		if got := a.hits.Load() + b.hits.Load(); got != tc.hits {
			t.Errorf("%s (policy %v): backends got %d requests, want %d", tc.method, tc.policy, got, tc.hits)
		}
	}

	// A connect failure is retried whatever the method.
	good := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	dead := refusedAddr(t)
	l := newLab(t, basic("", "", dead, good.addr()), nil)
	for i := range 4 {
		req, _ := http.NewRequest("POST", l.url+"/", nil)
		if resp, body := l.do(req); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("POST %d after a connect failure: %d %q, want 200 ok", i, resp.StatusCode, body)
		}
	}
	refused := 0
	for _, o := range l.observed() {
		if o.Endpoint.Addr == dead && o.ConnectFailure {
			refused++
		}
	}
	if refused == 0 {
		t.Error("no POST went to the dead endpoint first; the test proves nothing")
	}
}

func TestRetryPolicyGatewayError(t *testing.T) {
	var calls int
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		calls++ // the handler runs serially in this test
		if calls == 1 {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "second time lucky")
	})
	um := "  defaultService: bs\n  defaultRouteAction:\n    retryPolicy:\n      retryConditions: [gateway-error]\n      numRetries: 2\n"
	um = strings.Replace(um, "  defaultService: bs\n", "", 1) +
		"    weightedBackendServices: [{backendService: bs, weight: 1}]\n"
	l := newLab(t, basic("", um, be.addr()), nil)
	resp, body := l.get("/", "")
	if resp.StatusCode != 200 || body != "second time lucky" {
		t.Fatalf("got %d %q, want 200", resp.StatusCode, body)
	}
	var statuses []int
	for _, o := range l.observed() {
		statuses = append(statuses, o.Status)
	}
	if len(statuses) != 2 || statuses[0] != 503 || statuses[1] != 200 {
		t.Errorf("observed statuses %v, want [503 200]", statuses)
	}
}

func TestPerTryTimeoutRetriesElsewhere(t *testing.T) {
	t.Parallel()
	slow := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	})
	fast := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "fast") })
	um := "  defaultRouteAction:\n    weightedBackendServices: [{backendService: bs, weight: 1}]\n" +
		"    retryPolicy:\n      retryConditions: [gateway-error]\n      perTryTimeout: {nanos: 200000000}\n"
	l := newLab(t, basic("", um, slow.addr(), fast.addr()), nil)
	within(t, 10*time.Second, "two requests (the slow endpoint holds 30 s)", func() {
		for i := range 2 {
			resp, body := l.get("/", "")
			if resp.StatusCode != 200 || body != "fast" {
				t.Fatalf("request %d: %d %q, want 200 fast", i, resp.StatusCode, body)
			}
		}
	})
	if slow.hits.Load() == 0 {
		t.Fatal("no request tried the slow endpoint first; the test proves nothing")
	}
	timedOut := 0
	for _, o := range l.observed() {
		if o.Endpoint.Addr == slow.addr() && o.Timeout && o.Status == 0 {
			timedOut++
		}
	}
	if timedOut == 0 {
		t.Errorf("no timed-out outcome reported for the slow endpoint: %+v", l.observed())
	}
}

func TestServiceTimeoutIs504(t *testing.T) {
	t.Parallel()
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	})
	l := newLab(t, basic("  timeoutSec: 1\n", "", be.addr()), nil)
	var resp *http.Response
	var body string
	within(t, 10*time.Second, "timed-out request (the backend holds 30 s)", func() { resp, body = l.get("/", "") })
	if resp.StatusCode != 504 {
		t.Fatalf("status %d %q, want 504", resp.StatusCode, body)
	}
	if body != "504 Gateway Timeout: upstream request timeout (backend_timeout)\n" {
		t.Errorf("body %q", body)
	}
}

func TestTimeoutMidBodyAbortsStream(t *testing.T) {
	t.Parallel()
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	l := newLab(t, basic("  timeoutSec: 1\n", "", be.addr()), nil)
	resp, err := l.client.Get(l.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("body %q read to a clean end; want the stream aborted", b)
	}
}

func TestHeaderBlockOver60KiBIs431(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {})
	l := newLab(t, basic("", "", be.addr()), nil)
	for _, tc := range []struct {
		size int
		want int
	}{{50 << 10, 200}, {60<<10 - 200, 200}, {60 << 10, 431}, {62 << 10, 431}, {100 << 10, 431}} {
		req, _ := http.NewRequest("GET", l.url+"/", nil)
		req.Header.Set("X-Big", strings.Repeat("a", tc.size))
		resp, err := l.client.Do(req)
		if err != nil {
			t.Fatalf("%d bytes: %v", tc.size, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%d-byte header: status %d, want %d", tc.size, resp.StatusCode, tc.want)
		}
	}
}

func TestHashInPathIs400(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {})
	l := newLab(t, basic("", "", be.addr()), nil)
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /a#b HTTP/1.1\r\nHost: example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 {
		t.Errorf("status %d, want 400", resp.StatusCode)
	}
	if be.hits.Load() != 0 {
		t.Errorf("backend contacted")
	}
}

const routesMap = `  defaultService: bs
  hostRules:
  - hosts: [example.com]
    pathMatcher: pm
  pathMatchers:
  - name: pm
    defaultService: bs
    headerAction:
      requestHeadersToAdd:
      - {headerName: X-Matcher, headerValue: pm}
    routeRules:
    - priority: 1
      matchRules: [{prefixMatch: /old/}]
      urlRedirect: {prefixRedirect: /new/, hostRedirect: example.org}
    - priority: 2
      matchRules: [{prefixMatch: /api/}]
      routeAction:
        weightedBackendServices: [{backendService: bs, weight: 1}]
        urlRewrite: {pathPrefixRewrite: /v2/, hostRewrite: api.internal}
    - priority: 3
      matchRules: [{prefixMatch: /hdr/}]
      headerAction:
        requestHeadersToRemove: [X-Drop]
        requestHeadersToAdd:
        - {headerName: X-Set, headerValue: route}
        - {headerName: X-Append, headerValue: route, replace: false}
        - {headerName: X-Custom, headerValue: from-url-map}
        responseHeadersToRemove: [X-Backend-Secret]
        responseHeadersToAdd:
        - {headerName: X-Resp, headerValue: added}
        - {headerName: X-Served, headerValue: url-map}
      service: bs
    - priority: 4
      matchRules: [{prefixMatch: /fault/}]
      routeAction:
        weightedBackendServices: [{backendService: bs, weight: 1}]
        faultInjectionPolicy:
          abort: {httpStatus: 429, percentage: 100}
`

func TestRedirect(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {})
	l := newLab(t, basic("", routesMap, be.addr()), nil)
	resp, _ := l.get("/old/page?x=1", "example.com")
	if resp.StatusCode != 301 {
		t.Fatalf("status %d, want 301", resp.StatusCode)
	}
	if got, want := resp.Header.Get("Location"), "http://example.org/new/page?x=1"; got != want {
		t.Errorf("Location %q, want %q", got, want)
	}
	if be.hits.Load() != 0 {
		t.Errorf("backend contacted for a redirect")
	}
}

func TestURLRewrite(t *testing.T) {
	be := newBackend(t, echoHeaders)
	l := newLab(t, basic("", routesMap, be.addr()), nil)
	_, body := l.get("/api/users?id=7", "example.com")
	e := decodeEcho(t, body)
	if e.Path != "/v2/users" || e.Query != "id=7" || e.Host != "api.internal" {
		t.Errorf("backend saw host %q path %q query %q, want api.internal /v2/users id=7", e.Host, e.Path, e.Query)
	}
}

func TestHeaderActions(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend-Secret", "s3cr3t")
		w.Header().Set("X-Served", "backend")
		echoHeaders(w, r)
	})
	bs := "  customRequestHeaders: [\"X-Custom: from-service\", \"X-Svc: yes\"]\n  customResponseHeaders: [\"X-Served: service\"]\n"
	l := newLab(t, basic(bs, routesMap, be.addr()), nil)
	req, _ := http.NewRequest("GET", l.url+"/hdr/x", nil)
	req.Host = "example.com"
	req.Header.Set("X-Drop", "gone")
	req.Header.Set("X-Set", "client")
	req.Header.Set("X-Append", "client")
	resp, body := l.do(req)
	e := decodeEcho(t, body)
	for name, want := range map[string]string{
		"X-Set":     "route",
		"X-Append":  "client|route",
		"X-Custom":  "from-url-map", // URL map wins over customRequestHeaders
		"X-Svc":     "yes",
		"X-Matcher": "pm",
	} {
		if got := strings.Join(e.Header[name], "|"); got != want {
			t.Errorf("request %s = %q, want %q", name, got, want)
		}
	}
	if _, ok := e.Header["X-Drop"]; ok {
		t.Errorf("X-Drop not removed")
	}
	if got := resp.Header.Get("X-Resp"); got != "added" {
		t.Errorf("response X-Resp = %q", got)
	}
	if got := resp.Header.Values("X-Served"); len(got) != 1 || got[0] != "url-map" {
		t.Errorf("response X-Served = %q, want [url-map]", got)
	}
	if got := resp.Header.Get("X-Backend-Secret"); got != "" {
		t.Errorf("X-Backend-Secret not removed: %q", got)
	}
}

func TestFaultAbort(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {})
	l := newLab(t, basic("", routesMap, be.addr()), nil)
	resp, body := l.get("/fault/x", "example.com")
	if resp.StatusCode != 429 || !strings.Contains(body, "fault injection abort") {
		t.Errorf("got %d %q, want 429 fault injection abort", resp.StatusCode, body)
	}
	if be.hits.Load() != 0 {
		t.Errorf("backend contacted")
	}
}

func TestDemandCounts(t *testing.T) {
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {})
	l := newLab(t, basic("", "", be.addr()), nil)
	for range 3 {
		l.get("/", "")
	}
	snap := l.snap.Load()
	region := l.plan.RegionIndex["us-east1"]
	if got := snap.Demand.Swap(0, region); got != 3 {
		t.Errorf("demand = %d, want 3", got)
	}
	if got := snap.Demand.Swap(0, region); got != 0 {
		t.Errorf("demand after swap = %d, want 0", got)
	}
}
