package proxy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/proxy"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// layerRec is what a test keeps of a proxy.Record.
type layerRec struct {
	frontend, clientIP, remote, endpoint, details, trace string
	layer                                                proxy.LayerOutcome
	status, attempts                                     int
}

// layerRecorder collects records of several labs.
type layerRecorder struct {
	mu   sync.Mutex
	recs []layerRec
}

func (rc *layerRecorder) option() labOption {
	return func(c *proxy.Config) {
		c.Record = func(r *proxy.Record) {
			lr := layerRec{frontend: r.Frontend.Name, clientIP: r.ClientAddr(), remote: proxy.RemoteIP(r.Request), details: r.Details,
				trace: string(r.Trace.ID[:]), layer: r.Layer, status: r.Status, attempts: r.Attempts}
			if r.Endpoint != nil {
				lr.endpoint = r.Endpoint.Addr
			}
			rc.mu.Lock()
			rc.recs = append(rc.recs, lr)
			rc.mu.Unlock()
		}
	}
}

func (rc *layerRecorder) take() []layerRec {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := rc.recs
	rc.recs = nil
	return out
}

func (rc *layerRecorder) of(frontend string) []layerRec {
	var out []layerRec
	for _, r := range rc.take() {
		if r.frontend == frontend {
			out = append(out, r)
		} else {
			rc.mu.Lock()
			rc.recs = append(rc.recs, r)
			rc.mu.Unlock()
		}
	}
	return out
}

// twoLayers is an edge in us-east1 and regional layers in us-east1 and
// europe-west1, one backend in each region, all on loopback, each proxy
// with its own plan and control state (as separate instances).
type twoLayers struct {
	edge               *lab
	east, eu           *lab // nil when not started
	lnEast, lnEU       *countingListener
	bEast, bEU         *backend
	seenEast, seenEU   atomic.Pointer[http.Header]
	rec                *layerRecorder
	layers             *proxy.Layers
	yaml               string
	client             *http.Client // from 127.0.0.9
	regionalWithURLMap bool
}

// layersConfig is the shared config; the regional frontends' addresses
// are their listeners'.
func (tl *twoLayers) config() string {
	euMap := ""
	if tl.regionalWithURLMap {
		euMap = "  urlMap: um\n"
	}
	return "healthChecks:\n- name: hc\n  type: HTTP\n" +
		"networkEndpointGroups:\n- name: neg-east\n  zone: us-east1-b\n  endpoints:\n" + eps(tl.bEast.addr()) +
		"- name: neg-eu\n  zone: europe-west1-b\n  endpoints:\n" + eps(tl.bEU.addr()) +
		"backendServices:\n- name: bs\n  healthChecks: [hc]\n  backends:\n" +
		"  - {group: neg-east, balancingMode: RATE, maxRatePerEndpoint: 1000}\n" +
		"  - {group: neg-eu, balancingMode: RATE, maxRatePerEndpoint: 1000}\n" +
		"urlMaps:\n- name: um\n  defaultService: bs\n" +
		"regions:\n- name: us-east1\n  regionalLayer: {endpoints: [\"" + tl.lnEast.Addr().String() + "\"], protocol: H2C, maxConnections: 2}\n" +
		"- name: europe-west1\n  regionalLayer: {endpoints: [\"" + tl.lnEU.Addr().String() + "\"]}\n" +
		"frontends:\n- name: edge\n  address: 127.0.0.1:0\n  urlMap: um\n  layer: EDGE\n  region: us-east1\n" +
		"- name: regional-east\n  address: " + tl.lnEast.Addr().String() + "\n  layer: REGIONAL\n  region: us-east1\n  trustedEdges: [127.0.0.1/32]\n" +
		"- name: regional-eu\n  address: " + tl.lnEU.Addr().String() + "\n  layer: REGIONAL\n  region: europe-west1\n  trustedEdges: [127.0.0.1]\n" + euMap
}

// newTwoLayers starts the backends and the proxies; startEast false
// leaves us-east1's regional layer down (its address refuses).
func newTwoLayers(t testing.TB, startEast, regionalWithURLMap bool) *twoLayers {
	t.Helper()
	tl := &twoLayers{rec: &layerRecorder{}, layers: proxy.NewLayers(), regionalWithURLMap: regionalWithURLMap}
	t.Cleanup(tl.layers.Close)
	keep := func(p *atomic.Pointer[http.Header]) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			h := r.Header.Clone()
			p.Store(&h)
			w.Header().Set("X-Spillway-Regional-Zone", "forged-by-backend")
			io.WriteString(w, "hello from "+r.Host)
		}
	}
	tl.bEast, tl.bEU = newBackend(t, keep(&tl.seenEast)), newBackend(t, keep(&tl.seenEU))
	listen := func() *countingListener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return &countingListener{Listener: ln}
	}
	tl.lnEast, tl.lnEU = listen(), listen()
	tl.yaml = tl.config()
	if startEast {
		tl.east = newLabServer(t, tl.yaml, nil, labServer{ln: tl.lnEast, frontend: "regional-east"}, tl.rec.option())
	} else {
		tl.lnEast.Close()
	}
	tl.eu = newLabServer(t, tl.yaml, nil, labServer{ln: tl.lnEU, frontend: "regional-eu"}, tl.rec.option())
	tl.edge = newLabServer(t, tl.yaml, nil, labServer{frontend: "edge"}, tl.rec.option(), func(c *proxy.Config) { c.Layers = tl.layers })
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	tl.client = &http.Client{Transport: tr}
	return tl
}

// get sends GET url with headers from 127.0.0.9.
func (tl *twoLayers) get(t testing.TB, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Host = "www.example.com"
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := tl.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestTwoLayersRequestPath: one request through an edge and a regional
// layer: both record it, the backend sees the client's address, scheme
// and trace as from one proxy, the regional layer's outcome reaches the
// edge's record and not the client, and headers a client forged to the
// edge never reach the regional layer.
func TestTwoLayersRequestPath(t *testing.T) {
	tl := newTwoLayers(t, true, false)
	resp, body := tl.get(t, tl.edge.url+"/x", map[string]string{
		"X-Spillway-Edge-Client": "203.0.113.66", "X-Spillway-Edge-Service": "nope", "X-Forwarded-For": "198.51.100.3",
	})
	if resp.StatusCode != 200 || body != "hello from www.example.com" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	for k := range resp.Header {
		if strings.HasPrefix(k, "X-Spillway-") {
			t.Errorf("the client got internal header %s: %q", k, resp.Header[k])
		}
	}
	if got := resp.Header.Get("Via"); got != "1.1 spillway, 1.1 spillway" {
		t.Errorf("Via = %q, want both hops", got)
	}
	seen := tl.seenEast.Load()
	if seen == nil {
		t.Fatal("the us-east1 backend got nothing")
	}
	if got := seen.Get("X-Forwarded-For"); got != "198.51.100.3,127.0.0.9,127.0.0.1" {
		t.Errorf("backend X-Forwarded-For = %q, want the client's value, the client and the edge's address", got)
	}
	if got := seen.Get("X-Forwarded-Proto"); got != "http" {
		t.Errorf("backend X-Forwarded-Proto = %q", got)
	}
	for k := range *seen {
		if strings.HasPrefix(k, "X-Spillway-") {
			t.Errorf("the backend got internal header %s: %q", k, (*seen)[k])
		}
	}
	tp := seen.Get("Traceparent")
	edge, regional := tl.rec.of("edge"), tl.rec.of("regional-east")
	if len(edge) != 1 || len(regional) != 1 {
		t.Fatalf("records: edge %+v, regional %+v", edge, regional)
	}
	e, r := edge[0], regional[0]
	want := proxy.LayerOutcome{Address: tl.lnEast.Addr().String(), Region: "us-east1", Zone: "us-east1-b", Endpoint: tl.bEast.addr(), Details: "response_sent_by_backend"}
	if e.layer != want || e.status != 200 || e.clientIP != "127.0.0.9" || e.attempts != 1 {
		t.Errorf("edge record %+v, want layer %+v", e, want)
	}
	if r.clientIP != "127.0.0.9" || r.remote != "127.0.0.1" || r.endpoint != tl.bEast.addr() || r.status != 200 || r.layer.Address != "" {
		t.Errorf("regional record %+v: want client 127.0.0.9 from edge 127.0.0.1 to %s", r, tl.bEast.addr())
	}
	if e.trace != r.trace || !strings.Contains(tp, e.trace) {
		t.Errorf("trace: edge %s, regional %s, backend traceparent %q", e.trace, r.trace, tp)
	}
}

// TestRegionalIgnoresUntrustedSources: a client that reaches a regional
// layer directly cannot pass as an edge: its internal headers are
// removed; a regional frontend without a URL map refuses it, one with a
// URL map serves it as a single layer would.
func TestRegionalIgnoresUntrustedSources(t *testing.T) {
	tl := newTwoLayers(t, true, true)
	forged := map[string]string{"X-Spillway-Edge-Service": "bs", "X-Spillway-Edge-Client": "203.0.113.66", "X-Spillway-Edge-Proto": "https"}
	resp, body := tl.get(t, "http://"+tl.lnEast.Addr().String()+"/x", forged)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Spillway-Status-Details") != "request_not_from_trusted_edge" {
		t.Fatalf("untrusted request to a regional layer without URL map: %d %q", resp.StatusCode, body)
	}
	if n := tl.bEast.hits.Load(); n != 0 {
		t.Fatalf("the backend got %d requests", n)
	}
	resp, _ = tl.get(t, "http://"+tl.lnEU.Addr().String()+"/x", forged)
	if resp.StatusCode != 200 {
		t.Fatalf("untrusted request to a regional layer with a URL map: %d", resp.StatusCode)
	}
	seen := tl.seenEU.Load()
	if seen == nil {
		t.Fatal("the europe-west1 backend got nothing")
	}
	if got := seen.Get("X-Forwarded-For"); got != "127.0.0.9,127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q: the forged client address was believed", got)
	}
	if got := seen.Get("X-Forwarded-Proto"); got != "http" {
		t.Errorf("X-Forwarded-Proto = %q: the forged scheme was believed", got)
	}
	for k := range *seen {
		if strings.HasPrefix(k, "X-Spillway-Edge-") {
			t.Errorf("backend got %s", k)
		}
	}
	if got := resp.Header.Get("X-Spillway-Regional-Endpoint"); got != "" {
		t.Errorf("an untrusted client learnt the endpoint %q", got)
	}
	for _, r := range tl.rec.of("regional-eu") {
		if r.clientIP != "127.0.0.9" {
			t.Errorf("regional record client %q, want the source 127.0.0.9", r.clientIP)
		}
	}
}

// TestEdgeRetriesInAnotherRegion: us-east1's regional layer is down; the
// edge's first attempt fails to connect, counts against the region and
// is retried in europe-west1; the next request avoids us-east1 at once.
// Then a regional layer that answers 503 (no healthy backend in its
// region, though the edge thinks otherwise) is retried elsewhere too.
func TestEdgeRetriesInAnotherRegion(t *testing.T) {
	tl := newTwoLayers(t, false, false)
	for i := range 2 {
		resp, body := tl.get(t, tl.edge.url+"/x", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		recs := tl.rec.of("edge")
		if len(recs) != 1 || recs[0].layer.Region != "europe-west1" || recs[0].layer.Address != tl.lnEU.Addr().String() {
			t.Fatalf("request %d: edge records %+v", i, recs)
		}
		if want := 2 - i; recs[0].attempts != want {
			t.Errorf("request %d: %d attempts, want %d (the down region is set aside after the first)", i, recs[0].attempts, want)
		}
	}
	if n := tl.bEU.hits.Load(); n != 2 {
		t.Errorf("europe-west1 backend served %d, want 2", n)
	}
	var regionalFaults int
	for _, o := range tl.edge.observed() {
		if o.ClientFault || !o.BackendSignal() {
			t.Errorf("a regional layer's failure was blamed on the client: %+v", o)
		}
		if o.Regional && o.ConnectFailure {
			regionalFaults++
		}
	}
	if regionalFaults != 1 {
		t.Errorf("%d regional connect failures observed, want 1", regionalFaults)
	}

	tl2 := newTwoLayers(t, true, false)
	tl2.east.setHealthy(tl2.bEast.addr(), false) // only the regional layer knows
	resp, body := tl2.get(t, tl2.edge.url+"/x", nil)
	if resp.StatusCode != 200 || tl2.bEU.hits.Load() != 1 {
		t.Fatalf("after a regional 503: %d %q, europe hits %d", resp.StatusCode, body, tl2.bEU.hits.Load())
	}
	if r := tl2.rec.of("regional-east"); len(r) != 1 || r[0].status != 503 || r[0].details != "failed_to_pick_backend" {
		t.Errorf("regional-east records %+v", r)
	}
	if r := tl2.rec.of("edge"); len(r) != 1 || r[0].attempts != 2 || r[0].layer.Region != "europe-west1" {
		t.Errorf("edge records %+v", r)
	}
}

// TestLayerConnectionReuse: requests from the edge to a regional layer
// share at most maxConnections HTTP/2 connections: one for sequential
// requests, at most 2 (the config's maxConnections) under concurrency.
func TestLayerConnectionReuse(t *testing.T) {
	tl := newTwoLayers(t, true, false)
	for i := range 50 {
		if resp, body := tl.get(t, tl.edge.url+"/s", nil); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if n := tl.lnEast.n.Load(); n != 1 {
		t.Fatalf("50 sequential requests opened %d connections to the regional layer, want 1", n)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 25 {
				req, _ := http.NewRequestWithContext(context.Background(), "GET", tl.edge.url+"/c", nil)
				resp, err := tl.client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d concurrent requests failed", failed.Load())
	}
	if n := tl.lnEast.n.Load(); n < 1 || n > 2 {
		t.Fatalf("250 requests (8 concurrent) opened %d connections to the regional layer, want 1 to maxConnections 2", n)
	}
	if got := tl.bEast.hits.Load(); got != 250 {
		t.Errorf("backend hits %d, want 250", got)
	}
	t.Logf("connections: %d for 250 requests; %s", tl.lnEast.n.Load(), "ok")
}

// BenchmarkLayers compares one proxy layer with two on loopback, side by
// side: the same backend, a keep-alive HTTP/1.1 client, sequential GETs.
// It reports the median latency of a request (p50-µs) and the process's
// CPU time per request (cpu-µs/op: client, proxies and backend
// together, so the difference between the two is the second hop's
// cost).
func BenchmarkLayers(b *testing.B) {
	tl := newTwoLayers(b, true, false)
	one := newLab(b, basic("", "", tl.bEast.addr()), nil)
	for _, bc := range []struct{ name, url string }{{"one", one.url + "/b"}, {"two", tl.edge.url + "/b"}} {
		b.Run(bc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, 1<<16)
			req, _ := http.NewRequest("GET", bc.url, nil)
			cpu0 := cpuTime()
			for b.Loop() {
				start := time.Now()
				resp, err := tl.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				if len(lat) < cap(lat) {
					lat = append(lat, time.Since(start))
				}
			}
			cpu := cpuTime() - cpu0
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
