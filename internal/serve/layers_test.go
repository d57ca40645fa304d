package serve_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// layersConfig is one instance's config of a two-layer deployment: one
// backend service over a zone of us-east1; frontend is that instance's
// frontend, regional the us-east1 regional layer's address ("" for none).
func layersConfig(backend, regional, frontend, logPath string) string {
	layer := ""
	if regional != "" {
		layer = fmt.Sprintf("  regionalLayer: {endpoints: [%q], protocol: H2C}\n", regional)
	}
	return fmt.Sprintf(`healthChecks:
- {name: hc, type: HTTP, checkIntervalSec: 5, timeoutSec: 1, httpHealthCheck: {requestPath: /healthz}}
networkEndpointGroups:
- name: neg-b
  zone: us-east1-b
  endpoints: [%s]
backendServices:
- name: bs
  healthChecks: [hc]
  backends: [{group: neg-b, balancingMode: RATE, maxRatePerEndpoint: 100}]
urlMaps:
- {name: um, defaultService: bs}
regions:
- name: us-east1
%sfrontends:
%s
spillway:
  accessLog: {enable: true, path: %s, format: JSON}
`, ep(backend), layer, frontend, logPath)
}

// layerLogLine is the part of an access log line the two-layer test reads.
type layerLogLine struct {
	Trace       string `json:"trace"`
	HTTPRequest struct {
		Status   int    `json:"status"`
		RemoteIP string `json:"remoteIp"`
	} `json:"httpRequest"`
	Payload struct {
		StatusDetails string `json:"statusDetails"`
		Frontend      string `json:"frontend"`
		Zone          string `json:"zone"`
		Endpoint      string `json:"endpoint"`
		EdgeIP        string `json:"edgeIp"`
		Regional      *struct {
			Address, Region, Zone, Endpoint, StatusDetails string
		} `json:"regionalLayer"`
	} `json:"jsonPayload"`
}

// readLayerLog waits (at most 5 s) for one line in an access log.
func readLayerLog(t *testing.T, path string) layerLogLine {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) == 1 && lines[0] != "" {
			var l layerLogLine
			if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
				t.Fatalf("%s: %v\n%s", path, err, b)
			}
			return l
		} else if len(lines) > 1 {
			t.Fatalf("%s: %d lines for one request:\n%s", path, len(lines), b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no access log line after 5 s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwoLayersAccessLogs: two `serve` instances, an edge and the
// regional layer of us-east1, each with its access log: one client
// request leaves one line in each, with the client's address (the
// regional line also names the edge), one trace, and the regional
// layer's zone, endpoint and statusDetails in the edge's line.
func TestTwoLayersAccessLogs(t *testing.T) {
	backend := obsBackend(t, "us-east1-b")
	dir := t.TempDir()
	regLog, edgeLog := filepath.Join(dir, "regional.log"), filepath.Join(dir, "edge.log")
	reg := servetest.Run(t, servetest.Parse(t, layersConfig(backend, "", "- {name: regional, address: \"127.0.0.1:0\", layer: REGIONAL, region: us-east1, trustedEdges: [127.0.0.1/32]}", regLog)), serve.Options{})
	regAddr := reg.FrontendAddr("regional")
	edge := servetest.Run(t, servetest.Parse(t, layersConfig(backend, regAddr, "- {name: edge, address: \"127.0.0.1:0\", urlMap: um, layer: EDGE, region: us-east1}", edgeLog)), serve.Options{})

	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}}
	tr := &http.Transport{DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+edge.FrontendAddr("edge")+"/hello", nil)
	req.Header.Set("X-Spillway-Edge-Client", "203.0.113.66") // forged: removed by the edge
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "us-east1-b" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	e, r := readLayerLog(t, edgeLog), readLayerLog(t, regLog)
	if e.HTTPRequest.RemoteIP != "127.0.0.9" || r.HTTPRequest.RemoteIP != "127.0.0.9" {
		t.Errorf("remoteIp: edge %q, regional %q; want the client's 127.0.0.9 in both", e.HTTPRequest.RemoteIP, r.HTTPRequest.RemoteIP)
	}
	if r.Payload.EdgeIP != "127.0.0.1" || e.Payload.EdgeIP != "" {
		t.Errorf("edgeIp: regional %q (want 127.0.0.1), edge %q (want none)", r.Payload.EdgeIP, e.Payload.EdgeIP)
	}
	if e.Trace == "" || e.Trace != r.Trace {
		t.Errorf("trace: edge %q, regional %q", e.Trace, r.Trace)
	}
	l := e.Payload.Regional
	if l == nil || l.Address != regAddr || l.Region != "us-east1" || l.Zone != "us-east1-b" || l.Endpoint != backend || l.StatusDetails != "response_sent_by_backend" {
		t.Errorf("edge regionalLayer = %+v, want %s us-east1 us-east1-b %s response_sent_by_backend", l, regAddr, backend)
	}
	if e.Payload.Zone != "us-east1-b" || e.Payload.Endpoint != backend {
		t.Errorf("edge zone/endpoint %q %q", e.Payload.Zone, e.Payload.Endpoint)
	}
	if r.Payload.Regional != nil || r.Payload.Endpoint != backend || r.Payload.StatusDetails != "response_sent_by_backend" {
		t.Errorf("regional line %+v", r.Payload)
	}
}

// TestEdgeRoleProbesNothingBehindARegionalLayer: a standalone instance
// with role EDGE does not probe endpoints that only its regions'
// regional layers reach (here a health check on a port the edge cannot
// reach), so it does not mark them down, and serves through the regional
// layer; the same config on an instance of every layer probes and marks
// the endpoint down.
func TestEdgeRoleProbesNothingBehindARegionalLayer(t *testing.T) {
	backend := obsBackend(t, "us-east1-b")
	closed := freePort(t)
	dir := t.TempDir()
	cfg := func(regional, frontend string) string {
		c := layersConfig(backend, regional, frontend, filepath.Join(dir, fmt.Sprintf("%d.log", time.Now().UnixNano())))
		return strings.Replace(c, "{name: hc, type: HTTP, checkIntervalSec: 5, timeoutSec: 1, httpHealthCheck: {requestPath: /healthz}}",
			fmt.Sprintf("{name: hc, type: HTTP, checkIntervalMs: 50, timeoutMs: 50, unhealthyThreshold: 1, httpHealthCheck: {port: %d}}", closed), 1)
	}
	reg := servetest.Run(t, servetest.Parse(t, layersConfig(backend, "", "- {name: regional, address: \"127.0.0.1:0\", layer: REGIONAL, region: us-east1, trustedEdges: [127.0.0.1/32]}", filepath.Join(dir, "r.log"))), serve.Options{})
	regAddr := reg.FrontendAddr("regional")
	front := "- {name: edge, address: \"127.0.0.1:0\", urlMap: um, layer: EDGE, region: us-east1}"
	all := servetest.Run(t, servetest.Parse(t, cfg(regAddr, front)), serve.Options{})
	edge := servetest.Run(t, servetest.Parse(t, cfg(regAddr, front)), serve.Options{Role: config.LayerEdge, Region: "us-east1", Admin: "127.0.0.1:0"})
	state := func(s *serve.Server) string { return s.Health().Services[0].Backends[0].Endpoints[0].HealthState }
	deadline := time.Now().Add(10 * time.Second)
	for state(all) != "UNHEALTHY" {
		if time.Now().After(deadline) {
			t.Fatalf("the instance of every layer never marked the endpoint down: %s", state(all))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // 4 intervals more
	if got := state(edge); got != "UNKNOWN" {
		t.Errorf("the edge's endpoint is %s, want UNKNOWN (never probed)", got)
	}
	resp, err := http.Get("http://" + edge.FrontendAddr("edge") + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "us-east1-b" {
		t.Errorf("through the edge: %d %q, want 200 from us-east1-b", resp.StatusCode, body)
	}
	if m := adminMetrics(t, edge); strings.Contains(m, "spillway_probes_total{") {
		t.Errorf("the edge probed:\n%s", grepLines(m, "spillway_probes_total"))
	}
}

// freePort returns a port nothing listens on (one just closed).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// adminMetrics returns s's /metrics.
func adminMetrics(t *testing.T, s *serve.Server) string {
	t.Helper()
	resp, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// twoZonesConfig has one backend service over the given zones of
// us-east1 (zone name → backend address), without health checks.
func twoZonesConfig(zones map[string]string, regional, frontend string) string {
	var negs, backends strings.Builder
	for _, z := range []string{"us-east1-b", "us-east1-c"} {
		if addr, ok := zones[z]; ok {
			fmt.Fprintf(&negs, "- {name: neg-%s, zone: %s, endpoints: [%s]}\n", z, z, ep(addr))
			fmt.Fprintf(&backends, "  - {group: neg-%s, balancingMode: RATE, maxRatePerEndpoint: 1000}\n", z)
		}
	}
	layer := ""
	if regional != "" {
		layer = fmt.Sprintf("  regionalLayer: {endpoints: [%q]}\n", regional)
	}
	return "networkEndpointGroups:\n" + negs.String() + "backendServices:\n- name: bs\n  backends:\n" + backends.String() +
		"urlMaps:\n- {name: um, defaultService: bs}\nregions:\n- name: us-east1\n" + layer + "frontends:\n" + frontend + "\n"
}

// TestRegionalLayerMetrics: an edge counts its requests under the zone
// the regional layer chose (the regional layer serves from us-east1-c
// only; the edge's own pick would name us-east1-b for about half), and
// its spillway_regional_layer_* metrics count the regional layer's
// answers, its connection, and, once it is gone, the connect failure
// and the endpoint set aside.
func TestRegionalLayerMetrics(t *testing.T) {
	b, c := obsBackend(t, "us-east1-b"), obsBackend(t, "us-east1-c")
	reg, err := serve.New(servetest.Parse(t, twoZonesConfig(map[string]string{"us-east1-c": c}, "", "- {name: regional, address: \"127.0.0.1:0\", layer: REGIONAL, region: us-east1, trustedEdges: [127.0.0.1/32]}")), serve.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopReg := servetest.Start(t, reg)
	regAddr := reg.FrontendAddr("regional")
	edge := servetest.Run(t, servetest.Parse(t, twoZonesConfig(map[string]string{"us-east1-b": b, "us-east1-c": c}, regAddr, "- {name: edge, address: \"127.0.0.1:0\", urlMap: um, layer: EDGE, region: us-east1}")),
		serve.Options{Role: config.LayerEdge, Admin: "127.0.0.1:0"})
	for i := range 20 {
		resp, err := http.Get("http://" + edge.FrontendAddr("edge") + "/x")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "us-east1-c" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	m := adminMetrics(t, edge)
	for _, want := range []string{
		`spillway_requests_total{backend_service="bs",code_class="2xx",frontend="edge",group="neg-us-east1-c",zone="us-east1-c"} 20`,
		`spillway_regional_layer_requests_total{outcome="2xx",region="us-east1"} 20`,
		`spillway_regional_layer_connections{endpoint="` + regAddr + `",region="us-east1"} 1`,
		`spillway_regional_layer_connections_opened_total{endpoint="` + regAddr + `",region="us-east1"} 1`,
		`spillway_regional_layer_endpoint_set_aside{endpoint="` + regAddr + `",region="us-east1"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "zone=\"us-east1-b\"")+grepLines(m, "spillway_regional_layer"))
		}
	}
	if strings.Contains(grepLines(m, "spillway_requests_total{"), `zone="us-east1-b"`) {
		t.Errorf("requests counted under the edge's pick us-east1-b:\n%s", grepLines(m, "spillway_requests_total"))
	}

	stopReg()
	resp, err := http.Get("http://" + edge.FrontendAddr("edge") + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 500 {
		t.Errorf("with the regional layer gone: %d, want a 5xx", resp.StatusCode)
	}
	m = adminMetrics(t, edge)
	for _, want := range []string{
		`spillway_regional_layer_requests_total{outcome="connect_failure",region="us-east1"} 1`,
		`spillway_regional_layer_endpoint_set_aside{endpoint="` + regAddr + `",region="us-east1"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "spillway_regional_layer"))
		}
	}
}

// stallProxy forwards TCP connections to target until stalled: then the
// bytes of every connection, open or new, are dropped both ways (a
// regional layer that hangs, or a path that black-holes).
type stallProxy struct {
	ln      net.Listener
	stalled atomic.Bool
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			pipe := func(dst, src net.Conn) {
				defer dst.Close()
				defer src.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && !p.stalled.Load() {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			go pipe(b, c)
			go pipe(c, b)
		}
	}()
	return p
}

// regionsConfig has one backend service over a zone of each region in
// backends (region → backend address; zone REGION-b), with the regional
// layers in layers (region → regional-layer endpoint; with a fast health
// check) and one frontend.
func regionsConfig(backends, layers map[string]string, frontend string) string {
	var b strings.Builder
	regions := []string{"europe-west1", "us-east1"}
	b.WriteString("networkEndpointGroups:\n")
	for _, r := range regions {
		if a, ok := backends[r]; ok {
			fmt.Fprintf(&b, "- {name: neg-%s, zone: %s-b, endpoints: [%s]}\n", r, r, ep(a))
		}
	}
	b.WriteString("backendServices:\n- name: bs\n  loadBalancingScheme: EXTERNAL_MANAGED\n  backends:\n")
	for _, r := range regions {
		if _, ok := backends[r]; ok {
			fmt.Fprintf(&b, "  - {group: neg-%s, balancingMode: RATE, maxRatePerEndpoint: 1000}\n", r)
		}
	}
	b.WriteString("urlMaps:\n- {name: um, defaultService: bs}\nregions:\n")
	for _, r := range regions {
		fmt.Fprintf(&b, "- name: %s\n", r)
		if l, ok := layers[r]; ok {
			fmt.Fprintf(&b, "  regionalLayer: {endpoints: [%q], healthCheck: {checkIntervalMs: 200, timeoutMs: 150}}\n", l)
		}
	}
	return b.String() + "frontends:\n" + frontend + "\n"
}

// TestRegionalLayerHealthCheck: an edge checks its regional layers'
// endpoints actively: both are SERVING in get-health with a warm
// connection before any request; when us-east1's regional layer stops
// answering (its connections black-holed), its endpoint is set aside
// within two checks, and us-east1's clients go to europe-west1 on the
// first attempt, none to us-east1; once it answers again it serves
// again, without a request having to fail first.
func TestRegionalLayerHealthCheck(t *testing.T) {
	bUS, bEU := obsBackend(t, "us-east1-b"), obsBackend(t, "europe-west1-b")
	regional := func(region, backend string) string {
		s := servetest.Run(t, servetest.Parse(t, regionsConfig(map[string]string{region: backend}, nil,
			fmt.Sprintf("- {name: regional, address: \"127.0.0.1:0\", layer: REGIONAL, region: %s, trustedEdges: [127.0.0.1/32]}", region))), serve.Options{})
		return s.FrontendAddr("regional")
	}
	stall := newStallProxy(t, regional("us-east1", bUS))
	regEU := regional("europe-west1", bEU)
	usLayer := stall.ln.Addr().String()
	edge := servetest.Run(t, servetest.Parse(t, regionsConfig(map[string]string{"us-east1": bUS, "europe-west1": bEU},
		map[string]string{"us-east1": usLayer, "europe-west1": regEU},
		"- {name: edge, address: \"127.0.0.1:0\", urlMap: um, layer: EDGE, region: us-east1}")),
		serve.Options{Role: config.LayerEdge, Admin: "127.0.0.1:0"})
	state := func() map[string]report.RegionalEndpoint {
		out := map[string]report.RegionalEndpoint{}
		for _, l := range adminHealth(t, edge).RegionalLayers {
			for _, e := range l.Endpoints {
				out[l.Region] = e
			}
		}
		return out
	}
	waitFor := func(what string, ok func(map[string]report.RegionalEndpoint) bool) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			st := state()
			if ok(st) {
				return time.Since(start)
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("after 10 s, not %s: %+v", what, st)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("both SERVING, checked, with a warm connection", func(st map[string]report.RegionalEndpoint) bool {
		us, eu := st["us-east1"], st["europe-west1"]
		return us.State == "SERVING" && eu.State == "SERVING" && us.Detail == "ok" && eu.Detail == "ok" && us.Connections == 1 && eu.Connections == 1
	})
	get := func() string {
		t.Helper()
		resp, err := http.Get("http://" + edge.FrontendAddr("edge") + "/x")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return string(body)
	}
	if got := get(); got != "us-east1-b" {
		t.Fatalf("healthy: served by %s, want us-east1-b", got)
	}

	stall.stalled.Store(true)
	took := waitFor("us-east1 SET_ASIDE", func(st map[string]report.RegionalEndpoint) bool {
		return st["us-east1"].State == "SET_ASIDE" && st["europe-west1"].State == "SERVING"
	})
	t.Logf("us-east1's regional layer set aside %v after it stopped answering (2 checks of 150 ms, 200 ms apart); detail %q", took.Round(time.Millisecond), state()["us-east1"].Detail)
	before := adminMetrics(t, edge)
	for range 10 {
		if got := get(); got != "europe-west1-b" {
			t.Fatalf("us-east1 set aside: served by %s, want europe-west1-b", got)
		}
	}
	usAttempts := func(m string) string {
		return grepLines(grepLines(m, "spillway_regional_layer_requests_total{"), `region="us-east1"`)
	}
	if m := adminMetrics(t, edge); usAttempts(m) != usAttempts(before) ||
		!strings.Contains(m, `spillway_regional_layer_requests_total{outcome="2xx",region="europe-west1"} 10`) {
		t.Errorf("attempts while us-east1 was set aside: want 10 to europe-west1 and none to us-east1:\n%s", grepLines(m, "spillway_regional_layer_requests_total"))
	}

	stall.stalled.Store(false)
	took = waitFor("us-east1 SERVING again", func(st map[string]report.RegionalEndpoint) bool { return st["us-east1"].State == "SERVING" })
	t.Logf("back %v after it answered again (2 checks in a row)", took.Round(time.Millisecond))
	if got := get(); got != "us-east1-b" {
		t.Fatalf("recovered: served by %s, want us-east1-b", got)
	}
}

// adminHealth returns s's /health.
func adminHealth(t *testing.T, s *serve.Server) report.Health {
	t.Helper()
	resp, err := http.Get("http://" + s.AdminAddr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h report.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRegionalLayerCertificateReload: an edge reads its regional layer's
// CA file (and client certificate) again when its content changes, as a
// frontend's certificates are: after the CA is replaced by one that does
// not sign the regional layer's certificate, the open connection is
// retired and new ones fail verification (the endpoint is set aside and
// requests fail), although the path did not change; once the regional
// layer serves a certificate of the new CA, requests flow again.
func TestRegionalLayerCertificateReload(t *testing.T) {
	caA, caB := newCA(t, "CA A"), newCA(t, "CA B")
	dir := t.TempDir()
	backend := obsBackend(t, "us-east1-b")
	certFile, keyFile := caA.writePair(t, dir, "regional", "regional-v1", []string{"regional.test"}, false)
	reg := servetest.Run(t, servetest.Parse(t, layersConfig(backend, "", fmt.Sprintf(
		"- {name: regional, address: \"127.0.0.1:0\", protocol: HTTPS, layer: REGIONAL, region: us-east1, trustedEdges: [127.0.0.1/32], certificates: [{certificateFile: %q, privateKeyFile: %q}]}", certFile, keyFile),
		filepath.Join(dir, "r.log"))), serve.Options{WatchInterval: 50 * time.Millisecond})
	caFile := filepath.Join(dir, "edge-ca.pem")
	if err := os.WriteFile(caFile, caA.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(layersConfig(backend, "", "- {name: edge, address: \"127.0.0.1:0\", urlMap: um, layer: EDGE, region: us-east1}", filepath.Join(dir, "e.log")),
		"- name: us-east1\n", fmt.Sprintf("- name: us-east1\n  regionalLayer: {endpoints: [%q], protocol: HTTP2, caFile: %q, serverName: regional.test, healthCheck: {checkIntervalMs: 100, timeoutMs: 100}}\n", reg.FrontendAddr("regional"), caFile), 1)
	edge := servetest.Run(t, servetest.Parse(t, cfg), serve.Options{Role: config.LayerEdge, Admin: "127.0.0.1:0", WatchInterval: 50 * time.Millisecond})
	status := func() int {
		t.Helper()
		resp, err := http.Get("http://" + edge.FrontendAddr("edge") + "/x")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	endpoint := func() report.RegionalEndpoint {
		if ls := adminHealth(t, edge).RegionalLayers; len(ls) == 1 && len(ls[0].Endpoints) == 1 {
			return ls[0].Endpoints[0]
		}
		return report.RegionalEndpoint{}
	}
	waitFor(t, "the regional layer SERVING over TLS", func() bool { return endpoint().State == "SERVING" && endpoint().Detail == "ok" })
	if got := status(); got != 200 {
		t.Fatalf("CA A: %d, want 200", got)
	}

	// A CA file that does not load: counted, and CA A stays in use.
	if err := os.WriteFile(caFile, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken CA file counted", func() bool {
		return strings.Contains(adminMetrics(t, edge), "spillway_tls_file_reload_failures_total 1")
	})
	time.Sleep(300 * time.Millisecond) // three checks
	if got, st := status(), endpoint().State; got != 200 || st != "SERVING" {
		t.Fatalf("after a broken CA file: %d, %s; want 200 on CA A, SERVING", got, st)
	}

	if err := os.WriteFile(caFile, caB.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the regional layer set aside after the CA changed", func() bool { return endpoint().State == "SET_ASIDE" })
	if d := endpoint().Detail; !strings.Contains(d, "certificate") {
		t.Errorf("set aside because %q, want a certificate error", d)
	}
	if got := status(); got < 500 {
		t.Errorf("CA B, the regional layer still on CA A's certificate: %d, want a 5xx", got)
	}
	if m := adminMetrics(t, edge); !strings.Contains(m, "spillway_tls_file_reloads_total 1") {
		t.Errorf("the edge's TLS reloads:\n%s", grepLines(m, "spillway_tls_file_reload"))
	}

	caB.writePair(t, dir, "regional", "regional-v2", []string{"regional.test"}, false)
	waitFor(t, "the regional layer SERVING again on CA B's certificate", func() bool { return endpoint().State == "SERVING" })
	if got := status(); got != 200 {
		t.Fatalf("both on CA B: %d, want 200", got)
	}
}

// echoUpgradeBackend accepts Upgrade: websocket with 101 (saying which
// X-Forwarded-For it got) and echoes the tunnel's bytes; /healthz is 200.
func echoUpgradeBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			io.WriteString(w, "ok")
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Backend-Xff: %s\r\nX-Spillway-Regional-Zone: forged\r\n\r\n", r.Header.Get("X-Forwarded-For"))
		io.Copy(c, brw)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestWebSocketThroughRegionalLayer: an edge's WebSocket upgrade goes
// through the regional layer (an HTTP/1.1 connection of its own), not
// to the endpoint directly: the tunnel echoes, the backend sees the
// client's address first in X-Forwarded-For, no internal header reaches
// the client, both layers log the upgrade, and the edge never reaches
// an endpoint itself (its backend transport fails every attempt).
func TestWebSocketThroughRegionalLayer(t *testing.T) {
	for _, proto := range []string{"H2C", "HTTP2"} {
		t.Run(proto, func(t *testing.T) { testWebSocketThroughRegionalLayer(t, proto) })
	}
}

func testWebSocketThroughRegionalLayer(t *testing.T, proto string) {
	backend := echoUpgradeBackend(t)
	dir := t.TempDir()
	regLog, edgeLog := filepath.Join(dir, "regional.log"), filepath.Join(dir, "edge.log")
	regFront := "- {name: regional, address: \"127.0.0.1:0\", layer: REGIONAL, region: us-east1, trustedEdges: [127.0.0.1/32]}"
	if proto == "HTTP2" {
		certFile, keyFile := newCA(t, "CA").writePair(t, dir, "regional", "regional", []string{"regional.test"}, false)
		regFront = fmt.Sprintf("- {name: regional, address: \"127.0.0.1:0\", protocol: HTTPS, layer: REGIONAL, region: us-east1, trustedEdges: [127.0.0.1/32], certificates: [{certificateFile: %q, privateKeyFile: %q}]}", certFile, keyFile)
	}
	reg := servetest.Run(t, servetest.Parse(t, layersConfig(backend, "", regFront, regLog)), serve.Options{})
	regAddr := reg.FrontendAddr("regional")
	direct := &failingTransport{}
	edgeCfg := strings.Replace(layersConfig(backend, regAddr, "- {name: edge, address: \"127.0.0.1:0\", urlMap: um, layer: EDGE, region: us-east1}", edgeLog), "protocol: H2C", "protocol: "+proto, 1)
	edge := servetest.Run(t, servetest.Parse(t, edgeCfg), serve.Options{Role: config.LayerEdge, Admin: "127.0.0.1:0", Transport: direct})

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}}
	c, err := d.Dial("tcp", edge.FrontendAddr("edge"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Spillway-Edge-Client: 203.0.113.66\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "websocket" {
		t.Fatalf("upgrade through two layers: %d %v", resp.StatusCode, resp.Header)
	}
	if xff := resp.Header.Get("X-Backend-Xff"); !strings.HasPrefix(xff, "127.0.0.9,") {
		t.Errorf("the backend saw X-Forwarded-For %q, want the client's 127.0.0.9 first", xff)
	}
	for k := range resp.Header {
		if strings.HasPrefix(k, "X-Spillway-") {
			t.Errorf("the client got the internal header %s: %v", k, resp.Header[k])
		}
	}
	for _, msg := range []string{"ping", "pong pong"} {
		io.WriteString(c, msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
			t.Fatalf("echo of %q: %q, %v", msg, got, err)
		}
	}
	c.Close()
	e, r := readLayerLog(t, edgeLog), readLayerLog(t, regLog)
	if e.HTTPRequest.Status != 101 || r.HTTPRequest.Status != 101 || r.Payload.EdgeIP != "127.0.0.1" || r.HTTPRequest.RemoteIP != "127.0.0.9" {
		t.Errorf("access logs: edge %d, regional %d from %q (edge %q); want 101 in both, the client 127.0.0.9 via the edge 127.0.0.1", e.HTTPRequest.Status, r.HTTPRequest.Status, r.HTTPRequest.RemoteIP, r.Payload.EdgeIP)
	}
	if l := e.Payload.Regional; l == nil || l.Address != regAddr || l.Zone != "us-east1-b" || l.Endpoint != backend {
		t.Errorf("the edge's regionalLayer: %+v, want %s, us-east1-b, %s", l, regAddr, backend)
	}
	if n := direct.calls.Load(); n != 0 {
		t.Errorf("the edge sent %d requests to endpoints directly, want 0", n)
	}
	if m := adminMetrics(t, edge); !strings.Contains(m, `spillway_regional_layer_requests_total{outcome="1xx",region="us-east1"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(m, "spillway_regional_layer_requests_total"))
	}
}

// failingTransport fails and counts every request: an edge that cannot
// reach endpoints.
type failingTransport struct{ calls atomic.Int64 }

func (f *failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	f.calls.Add(1)
	return nil, fmt.Errorf("the edge cannot reach endpoints")
}
