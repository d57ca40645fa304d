package serve_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// obsBackend is a real backend on loopback with misbehaving paths.
func obsBackend(t *testing.T, zone string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hijack := func(w http.ResponseWriter, raw string) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		io.WriteString(c, raw)
		c.Close()
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			io.WriteString(w, "ok")
		case r.URL.Path == "/slow-partial":
			// Head and part of the body, then nothing until the
			// route's timeout has long passed.
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "0123456789")
			http.NewResponseController(w).Flush()
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
		case r.URL.Path == "/stream":
			// A long streamed body, for a client that leaves mid-way.
			chunk := strings.Repeat("x", 16<<10)
			for i := 0; i < 500 && r.Context().Err() == nil; i++ {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
				http.NewResponseController(w).Flush()
				time.Sleep(2 * time.Millisecond)
			}
		case strings.HasPrefix(r.URL.Path, "/slow"):
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
			io.WriteString(w, "late")
		case r.URL.Path == "/close":
			hijack(w, "")
		case r.URL.Path == "/garbage":
			hijack(w, "NOT HTTP AT ALL\r\n\r\n")
		case r.URL.Path == "/partial":
			hijack(w, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
		case r.URL.Path == "/trace":
			fmt.Fprintf(w, "%s|%s", r.Header.Get("Traceparent"), r.Header.Get("X-Cloud-Trace-Context"))
		case r.URL.Path == "/notfound":
			http.Error(w, "nope", http.StatusNotFound)
		default:
			io.WriteString(w, zone)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func ep(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("{ipAddress: %s, port: %s}", host, port)
}

// obsConfig has a healthy service (bs, two zones), a service whose only
// endpoint fails its health check (bs-dead), one whose endpoint refuses
// connections (bs-refused), routes for redirects, faults and timeouts,
// and the access log writing to logPath.
func obsConfig(beB, beC, dead, refused, logPath, extra string) string {
	return fmt.Sprintf(`healthChecks:
- name: hc
  type: HTTP
  checkIntervalMs: 50
  timeoutMs: 40
  healthyThreshold: 1
  unhealthyThreshold: 1
  httpHealthCheck: {requestPath: /healthz}
networkEndpointGroups:
- {name: neg-b, zone: us-east1-b, endpoints: [%s]}
- {name: neg-c, zone: us-east1-c, endpoints: [%s]}
- {name: neg-dead, zone: us-east1-d, endpoints: [%s]}
- {name: neg-refused, zone: us-east1-d, endpoints: [%s]}
backendServices:
- name: bs
  backends:
  - {group: neg-b, balancingMode: RATE, maxRatePerEndpoint: 100000}
  - {group: neg-c, balancingMode: RATE, maxRatePerEndpoint: 100000}
- name: bs-dead
  healthChecks: [hc]
  backends:
  - {group: neg-dead, balancingMode: RATE, maxRatePerEndpoint: 100000}
- name: bs-refused
  logConfig: {enable: true, sampleRate: 1.0, optionalMode: EXCLUDE_ALL_OPTIONAL}
  backends:
  - {group: neg-refused, balancingMode: RATE, maxRatePerEndpoint: 100000}
urlMaps:
- name: um
  defaultService: bs
  hostRules:
  - {hosts: ["*"], pathMatcher: pm}
  pathMatchers:
  - name: pm
    defaultService: bs
    routeRules:
    - priority: 1
      matchRules: [{prefixMatch: /redir}]
      urlRedirect: {pathRedirect: /}
    - priority: 2
      matchRules: [{prefixMatch: /fault}]
      routeAction:
        weightedBackendServices: [{backendService: bs, weight: 1}]
        faultInjectionPolicy:
          abort: {httpStatus: 418, percentage: 100}
    - priority: 3
      matchRules: [{prefixMatch: /dead}]
      service: bs-dead
    - priority: 4
      matchRules: [{prefixMatch: /refused}]
      service: bs-refused
    - priority: 5
      matchRules: [{prefixMatch: /slow}]
      routeAction:
        weightedBackendServices: [{backendService: bs, weight: 1}]
        timeout: {nanos: 300000000}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um, region: us-east1}
spillway:
  pathWithEscapedSlashesAction: REJECT_REQUEST
  accessLog: {enable: true, path: %s, format: JSON}
%s`, ep(beB), ep(beC), ep(dead), ep(refused), logPath, extra)
}

// logLine is the part of an access log line the tests read.
type logLine struct {
	Timestamp   string `json:"timestamp"`
	HTTPRequest struct {
		RequestMethod string `json:"requestMethod"`
		RequestURL    string `json:"requestUrl"`
		RequestSize   string `json:"requestSize"`
		Status        int    `json:"status"`
		ResponseSize  string `json:"responseSize"`
		UserAgent     string `json:"userAgent"`
		RemoteIP      string `json:"remoteIp"`
		ServerIP      string `json:"serverIp"`
		Latency       string `json:"latency"`
		Protocol      string `json:"protocol"`
	} `json:"httpRequest"`
	Trace   string `json:"trace"`
	SpanID  string `json:"spanId"`
	Payload struct {
		StatusDetails  string `json:"statusDetails"`
		Frontend       string `json:"frontend"`
		URLMap         string `json:"urlMap"`
		RouteRule      string `json:"routeRule"`
		BackendService string `json:"backendService"`
		BackendGroup   string `json:"backendGroup"`
		Zone           string `json:"zone"`
		Endpoint       string `json:"endpoint"`
		Retries        int    `json:"retries"`
		Reason         string `json:"reason"`
	} `json:"jsonPayload"`
}

// readLog returns the access log's lines by request path, waiting until
// every path in want has one.
func readLog(t *testing.T, path string, want ...string) map[string]logLine {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := map[string]logLine{}
		b, _ := os.ReadFile(path)
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l logLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("access log line is not JSON: %v\n%s", err, sc.Bytes())
			}
			u := l.HTTPRequest.RequestURL
			if i := strings.Index(u, "://"); i >= 0 {
				u = u[i+3:]
				u = u[strings.IndexByte(u, '/'):]
			}
			got[u] = l
		}
		missing := ""
		for _, w := range want {
			if _, ok := got[w]; !ok {
				missing = w
			}
		}
		if missing == "" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log has no line for %s; it has:\n%s", missing, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// raw sends one raw request on a new connection and returns the status
// line's code (0 when the connection closed without one).
func raw(t *testing.T, addr, req string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Every statusDetails value a request through `serve` can end with is
// logged with it, from a real request to real backends.
func TestAccessLogStatusDetails(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	beB, beC := obsBackend(t, "us-east1-b"), obsBackend(t, "us-east1-c")
	y := obsConfig(beB, beB, closedAddr(t), closedAddr(t), logPath, "")
	_ = beC
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	addr := s.FrontendAddr("fe")
	base := "http://" + addr
	waitFor(t, "bs-dead unhealthy", func() bool {
		for _, svc := range s.Health().Services {
			if svc.Name == "bs-dead" {
				return svc.Backends[0].Endpoints[0].HealthState == "UNHEALTHY"
			}
		}
		return false
	})
	noRedirect := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(path string) int {
		resp, err := noRedirect.Get(base + path)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	cases := []struct {
		path    string
		send    func() int // nil: GET path
		status  int        // the client's and the log's (0: none)
		details string
	}{
		{path: "/hello", status: 200, details: "response_sent_by_backend"},
		{path: "/notfound", status: 404, details: "response_sent_by_backend"},
		{path: "/redir", status: 301, details: "handled_by_url_map_redirect"},
		{path: "/fault", status: 418, details: "fault_filter_abort"},
		{path: "/dead", status: 503, details: "failed_to_pick_backend"},
		{path: "/refused", status: 503, details: "failed_to_connect_to_backend"},
		{path: "/slow", status: 504, details: "backend_timeout"},
		{path: "/close", status: 503, details: "backend_connection_closed_before_data_sent_to_client"},
		{path: "/garbage", status: 502, details: "backend_response_corrupted"},
		{path: "/a%2Fb", status: 400, details: "invalid_request_path"},
		{path: "/partial", status: 200, details: "backend_connection_closed_after_partial_response_sent"},
		{path: "/slow-partial", status: 200, details: "backend_timeout_after_partial_response_sent"},
		{path: "/stream", send: func() int {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.ReadFull(resp.Body, make([]byte, 1024)) // some of the body, then leave
			c.Close()
			return resp.StatusCode
		}, status: 200, details: "client_disconnected_after_partial_response"},
		{path: "/chunks", send: func() int {
			return raw(t, addr, "POST /chunks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n")
		}, status: 400, details: "malformed_request_body"},
		{path: "/slow-gone", send: func() int {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "GET /slow-gone HTTP/1.1\r\nHost: x\r\n\r\n")
			time.Sleep(100 * time.Millisecond)
			c.Close()
			return 0
		}, status: 0, details: "client_disconnected_before_any_response"},
	}
	var paths []string
	for _, c := range cases {
		got := 0
		if c.send != nil {
			got = c.send()
		} else {
			got = do(c.path)
		}
		if c.path == "/partial" || c.path == "/slow-partial" {
			got = 200 // the client saw the head, then a short body
		}
		if got != c.status {
			t.Errorf("%s: client got status %d, want %d", c.path, got, c.status)
		}
		paths = append(paths, c.path)
	}
	lines := readLog(t, logPath, paths...)
	for _, c := range cases {
		l := lines[c.path]
		if l.Payload.StatusDetails != c.details || l.HTTPRequest.Status != c.status {
			t.Errorf("%s: logged status %d %q, want %d %q", c.path, l.HTTPRequest.Status, l.Payload.StatusDetails, c.status, c.details)
		}
		if len(l.Trace) != 32 {
			t.Errorf("%s: logged trace %q, want 32 hex digits", c.path, l.Trace)
		}
		if l.Payload.Frontend != "fe" || l.Payload.URLMap != "um" {
			t.Errorf("%s: logged frontend %q url map %q", c.path, l.Payload.Frontend, l.Payload.URLMap)
		}
	}
	// The decision: service, group, zone, endpoint, the route rule and
	// the engine's reason for a 503.
	if l := lines["/hello"]; l.Payload.BackendService != "bs" || l.Payload.BackendGroup != "neg-b" && l.Payload.BackendGroup != "neg-c" || l.Payload.Endpoint != beB || l.HTTPRequest.ResponseSize != "10" || l.HTTPRequest.RemoteIP != "127.0.0.1" || l.HTTPRequest.ServerIP != "127.0.0.1" || l.HTTPRequest.Protocol != "HTTP/1.1" {
		t.Errorf("/hello logged %+v", l)
	}
	if l := lines["/dead"]; l.Payload.Reason != "no healthy backend in backend service bs-dead" || l.Payload.BackendService != "bs-dead" {
		t.Errorf("/dead logged reason %q service %q", l.Payload.Reason, l.Payload.BackendService)
	}
	if l := lines["/refused"]; l.Payload.Retries != 1 || !strings.Contains(l.Payload.RouteRule, "priority=4") {
		t.Errorf("/refused logged retries %d route %q, want 1 retry (the connect failure is retried once) and the priority 4 rule", l.Payload.Retries, l.Payload.RouteRule)
	}
}

// The access log writes one line per sampled request: logConfig.enable
// false silences a service, and a reload that changes the path reopens
// the log there.
func TestAccessLogSamplingAndReload(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	be := obsBackend(t, "us-east1-b")
	y := obsConfig(be, be, closedAddr(t), closedAddr(t), first, "")
	y = strings.Replace(y, "- name: bs\n  backends:", "- name: bs\n  logConfig: {enable: false}\n  backends:", 1)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	base := "http://" + s.FrontendAddr("fe")
	for _, p := range []string{"/quiet", "/refused"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	lines := readLog(t, first, "/refused")
	if _, ok := lines["/quiet"]; ok {
		t.Error("a request to a service with logConfig.enable false was logged")
	}
	y2 := obsConfig(be, be, closedAddr(t), closedAddr(t), second, "")
	if err := s.Reload(t.Context(), servetest.Parse(t, y2)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/after-reload")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	readLog(t, second, "/after-reload")
}

// promValue returns the value of the sample line that starts with
// name{labels} in a /metrics text, -1 when absent.
func promValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, series+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[len(series):]), 64)
			if err != nil {
				return -1
			}
			return v
		}
	}
	return -1
}

// /metrics scraped after real traffic counts what the clients saw: per
// zone and status class, bytes, retries and latency observations.
func TestRequestMetricsMatchClients(t *testing.T) {
	dir := t.TempDir()
	beB, beC := obsBackend(t, "us-east1-b"), obsBackend(t, "us-east1-c")
	dead := closedAddr(t)
	y := obsConfig(beB, beC, dead, closedAddr(t), filepath.Join(dir, "a.log"), "")
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	base := "http://" + s.FrontendAddr("fe")
	// The health check of bs-dead's endpoint fails: probes are counted.
	probes := fmt.Sprintf(`spillway_probes_total{result="failure",target="%s",type="HTTP"}`, dead)
	waitFor(t, "failed probes counted", func() bool { return promValue(metricsText(t, s), probes) >= 2 })
	if got := promValue(metricsText(t, s), fmt.Sprintf(`spillway_probe_duration_seconds_count{target="%s",type="HTTP"}`, dead)); got < 2 {
		t.Errorf("probe latency observations = %v", got)
	}
	var (
		mu     sync.Mutex
		zones  = map[string]int{}
		bytes  int
		wg     sync.WaitGroup
		status = map[int]int{}
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{Timeout: 5 * time.Second}
			for i := 0; i < 100; i++ {
				path := "/z"
				if i%10 == 0 {
					path = "/refused"
				}
				resp, err := cl.Get(base + path)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				status[resp.StatusCode]++
				if resp.StatusCode == 200 {
					zones[string(b)]++
				}
				bytes += len(b)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	m := metricsText(t, s)
	for zone, group := range map[string]string{"us-east1-b": "neg-b", "us-east1-c": "neg-c"} {
		series := fmt.Sprintf(`spillway_requests_total{backend_service="bs",code_class="2xx",frontend="fe",group="%s",zone="%s"}`, group, zone)
		if got := promValue(m, series); got != float64(zones[zone]) {
			t.Errorf("%s = %v, clients saw %d", series, got, zones[zone])
		}
	}
	refused := `{backend_service="bs-refused",frontend="fe",group="neg-refused",zone="us-east1-d"}`
	if got := promValue(m, `spillway_requests_total{backend_service="bs-refused",code_class="5xx",frontend="fe",group="neg-refused",zone="us-east1-d"}`); got != float64(status[503]) || got != 40 {
		t.Errorf("5xx to bs-refused = %v, clients saw %d 503s", got, status[503])
	}
	// Each refused request made two attempts (the default retry of a
	// connect failure), both failing to connect.
	if got := promValue(m, "spillway_retries_total"+refused); got != 40 {
		t.Errorf("retries = %v, want 40", got)
	}
	if got := promValue(m, "spillway_upstream_connect_errors_total"+refused); got != 80 {
		t.Errorf("connect errors = %v, want 80", got)
	}
	var respBytes, count float64
	for _, l := range []string{refused, `{backend_service="bs",frontend="fe",group="neg-b",zone="us-east1-b"}`, `{backend_service="bs",frontend="fe",group="neg-c",zone="us-east1-c"}`} {
		respBytes += promValue(m, "spillway_response_bytes_total"+l)
		count += promValue(m, "spillway_request_duration_seconds_count"+l)
	}
	if respBytes != float64(bytes) {
		t.Errorf("response bytes = %v, clients read %d", respBytes, bytes)
	}
	if count != 400 {
		t.Errorf("latency observations = %v, want 400", count)
	}
	if got := promValue(m, "spillway_access_log_dropped_total"); got != 0 {
		t.Errorf("access log dropped %v lines", got)
	}
	if got := promValue(m, "spillway_access_log_lines_total"); got < 0 {
		t.Error("no spillway_access_log_lines_total")
	}
}

// get-health shows the split each frontend's region gets and the split
// its requests took.
func TestHealthSplitByFrontendRegion(t *testing.T) {
	dir := t.TempDir()
	beB, beC := obsBackend(t, "us-east1-b"), obsBackend(t, "us-east1-c")
	y := obsConfig(beB, beC, closedAddr(t), closedAddr(t), filepath.Join(dir, "a.log"), "")
	y = strings.Replace(y, "frontends:\n", "frontends:\n- {name: fe-noregion, address: \""+closedAddr(t)+"\", protocol: HTTP, urlMap: um}\n", 1)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	cl := &http.Client{Timeout: 5 * time.Second}
	zones := map[string]int{}
	for i := 0; i < 200; i++ {
		b, err := getBody(cl, "http://"+s.FrontendAddr("fe")+"/")
		if err != nil {
			t.Fatal(err)
		}
		zones[b]++
	}
	body, err := getBody(http.DefaultClient, "http://"+s.AdminAddr()+"/health")
	if err != nil {
		t.Fatal(err)
	}
	var r report.Health
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	var svc *report.Service
	for i := range r.Services {
		if r.Services[i].Name == "bs" {
			svc = &r.Services[i]
		}
	}
	if svc == nil || len(svc.Frontends) != 2 {
		t.Fatalf("bs has frontends %+v, want fe and fe-noregion", svc)
	}
	for _, f := range svc.Frontends {
		sum := 0.0
		for _, b := range f.Backends {
			sum += b.Share
		}
		if sum < 0.999 || sum > 1.001 {
			t.Errorf("%s: computed shares sum to %v", f.Frontend, sum)
		}
		switch f.Frontend {
		case "fe":
			if f.ClientRegion != "us-east1" || f.MeasuredRequests != 200 {
				t.Errorf("fe: region %q, measured over %d requests, want us-east1 and 200", f.ClientRegion, f.MeasuredRequests)
			}
			for _, b := range f.Backends {
				if want := float64(zones[b.Zone]) / 200; b.MeasuredShare != want {
					t.Errorf("fe: %s measured %v, clients saw %v", b.Zone, b.MeasuredShare, want)
				}
			}
		case "fe-noregion":
			if f.ClientRegion != "" || f.MeasuredRequests != 0 {
				t.Errorf("fe-noregion: region %q, measured %d", f.ClientRegion, f.MeasuredRequests)
			}
		}
	}
	m := metricsText(t, s)
	if !strings.Contains(m, `spillway_backend_traffic_share_by_frontend{backend_service="bs",client_region="us-east1",frontend="fe",group="neg-b",zone="us-east1-b"}`) {
		t.Error("/metrics lacks spillway_backend_traffic_share_by_frontend for fe")
	}
}

// Trace context: a request without one gets both headers with the same
// trace; a traceparent is forwarded unchanged with a matching
// X-Cloud-Trace-Context; an X-Cloud-Trace-Context gets a matching
// traceparent; an invalid traceparent is replaced. The log has the id.
func TestTracePropagation(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "a.log")
	be := obsBackend(t, "us-east1-b")
	y := obsConfig(be, be, closedAddr(t), closedAddr(t), logPath, "")
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	base := "http://" + s.FrontendAddr("fe")
	get := func(path string, h map[string]string) (tp, ct string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tp, ct, _ = strings.Cut(string(b), "|")
		return tp, ct
	}
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	const given = "00-" + tid + "-00f067aa0ba902b7-01"

	tp, ct := get("/trace?none", nil)
	if len(tp) != 55 || !strings.HasPrefix(tp, "00-") || !strings.HasPrefix(ct, tp[3:35]+"/") || !strings.HasSuffix(ct, ";o=1") {
		t.Errorf("no trace context: backend got traceparent %q, X-Cloud-Trace-Context %q", tp, ct)
	}
	generated := tp[3:35]

	tp, ct = get("/trace?w3c", map[string]string{"Traceparent": given})
	if tp != given || ct != tid+"/"+strconv.FormatUint(0x00f067aa0ba902b7, 10)+";o=1" {
		t.Errorf("traceparent: backend got %q, %q", tp, ct)
	}
	tp, ct = get("/trace?cloud", map[string]string{"X-Cloud-Trace-Context": strings.ToUpper(tid) + "/123;o=1"})
	if tp != "00-"+tid+"-000000000000007b-01" || ct != strings.ToUpper(tid)+"/123;o=1" {
		t.Errorf("X-Cloud-Trace-Context: backend got %q, %q", tp, ct)
	}
	tp, _ = get("/trace?bad", map[string]string{"Traceparent": "00-zz-bad"})
	if tp == "00-zz-bad" || len(tp) != 55 {
		t.Errorf("invalid traceparent: backend got %q, want a new one", tp)
	}
	lines := readLog(t, logPath, "/trace?none", "/trace?w3c", "/trace?cloud")
	if got := lines["/trace?none"].Trace; got != generated {
		t.Errorf("logged trace %q, forwarded %q", got, generated)
	}
	if got := lines["/trace?w3c"]; got.Trace != tid || got.SpanID != "00f067aa0ba902b7" {
		t.Errorf("logged trace %q span %q", got.Trace, got.SpanID)
	}
	if got := lines["/trace?cloud"].Trace; got != tid {
		t.Errorf("logged trace %q", got)
	}
}

// The statusDetails values that only net/http's HTTP/1.1 server lets
// through to the handler (h1.Server refuses these requests itself).
func TestAccessLogStatusDetailsNetHTTP(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	be := obsBackend(t, "us-east1-b")
	y := obsConfig(be, be, closedAddr(t), closedAddr(t), logPath, "  http1Server: NET_HTTP\n")
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	addr := s.FrontendAddr("fe")
	if got := raw(t, addr, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"); got != 405 {
		t.Errorf("CONNECT: status %d, want 405", got)
	}
	// Over 60 KiB of head, but within net/http's 4 KiB of slop: the
	// handler's exact check answers.
	big := strings.Repeat("a", 61<<10)
	if got := raw(t, addr, "GET /big HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\n\r\n"); got != 431 {
		t.Errorf("big head: status %d, want 431", got)
	}
	lines := readLog(t, logPath, "example.com:443", "/big")
	if l := lines["example.com:443"]; l.Payload.StatusDetails != "unsupported_method" || l.HTTPRequest.Status != 405 {
		t.Errorf("CONNECT logged %d %q", l.HTTPRequest.Status, l.Payload.StatusDetails)
	}
	if l := lines["/big"]; l.Payload.StatusDetails != "headers_too_long" || l.HTTPRequest.Status != 431 {
		t.Errorf("big head logged %d %q", l.HTTPRequest.Status, l.Payload.StatusDetails)
	}
}

// HTTP/2 requests (h2c here) are recorded and logged like HTTP/1.1 ones.
func TestAccessLogHTTP2(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	be := obsBackend(t, "us-east1-b")
	y := obsConfig(be, be, closedAddr(t), closedAddr(t), logPath, "")
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	cl := &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 5 * time.Second}
	for _, path := range []string{"/h2", "/dead-h2"} {
		resp, err := cl.Get("http://" + s.FrontendAddr("fe") + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s: answered over %s, want HTTP/2", path, resp.Proto)
		}
	}
	lines := readLog(t, logPath, "/h2", "/dead-h2")
	if l := lines["/h2"]; l.HTTPRequest.Protocol != "HTTP/2.0" || l.HTTPRequest.Status != 200 || l.Payload.StatusDetails != "response_sent_by_backend" || l.HTTPRequest.ResponseSize != "10" {
		t.Errorf("/h2 logged %+v", l)
	}
	if l := lines["/dead-h2"]; l.HTTPRequest.Protocol != "HTTP/2.0" || l.Payload.BackendService != "bs-dead" {
		t.Errorf("/dead-h2 logged %+v", l)
	}
	m := metricsText(t, s)
	b := max(0, promValue(m, `spillway_requests_total{backend_service="bs",code_class="2xx",frontend="fe",group="neg-b",zone="us-east1-b"}`))
	c := max(0, promValue(m, `spillway_requests_total{backend_service="bs",code_class="2xx",frontend="fe",group="neg-c",zone="us-east1-c"}`))
	if b+c != 1 {
		t.Errorf("2xx to bs = %v, want 1", b+c)
	}
}
