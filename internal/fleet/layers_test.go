package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
	"github.com/spillwaylb/spillway/internal/serve"
)

// freeAddr returns ip:port with a port free on ip now (the regional
// layers' addresses must be in the config before they listen).
func freeAddr(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// layersFleetConfig is one config for a fleet of two layers: one backend
// service over a zone of us-east1 and a zone of europe-west1, each
// region with its regional layer, an EDGE frontend for us-east1's
// clients and a REGIONAL frontend per region.
func layersFleetConfig(us, eu []*hcBackend, regUS, regEU string) string {
	eps := func(bs []*hcBackend) string {
		var b strings.Builder
		for _, x := range bs {
			host, port, _ := net.SplitHostPort(x.addr)
			fmt.Fprintf(&b, "  - {ipAddress: %s, port: %s}\n", host, port)
		}
		return b.String()
	}
	return `healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 200, timeoutMs: 150, healthyThreshold: 2, unhealthyThreshold: 3, httpHealthCheck: {requestPath: /healthz}}
networkEndpointGroups:
- name: neg-us
  zone: us-east1-b
  endpoints:
` + eps(us) + `- name: neg-eu
  zone: europe-west1-b
  endpoints:
` + eps(eu) + `backendServices:
- name: bs
  loadBalancingScheme: EXTERNAL_MANAGED
  healthChecks: [hc]
  backends:
  - {group: neg-us, balancingMode: RATE, maxRatePerEndpoint: 100000}
  - {group: neg-eu, balancingMode: RATE, maxRatePerEndpoint: 100000}
urlMaps:
- {name: um, defaultService: bs}
regions:
- name: us-east1
  regionalLayer: {endpoints: ["` + regUS + `"], protocol: H2C}
- name: europe-west1
  regionalLayer: {endpoints: ["` + regEU + `"], protocol: H2C}
frontends:
- {name: edge, address: "127.0.0.1:0", urlMap: um, layer: EDGE, region: us-east1}
- {name: reg-us, address: "` + regUS + `", layer: REGIONAL, region: us-east1, trustedEdges: [127.0.0.0/8]}
- {name: reg-eu, address: "` + regEU + `", layer: REGIONAL, region: europe-west1, trustedEdges: [127.0.0.0/8]}
`
}

// noEndpoints is the edge's backend transport: it counts what would
// reach an endpoint directly and fails it, as an edge that cannot reach
// the endpoints would.
type noEndpoints struct{ calls atomic.Int64 }

func (n *noEndpoints) RoundTrip(*http.Request) (*http.Response, error) {
	n.calls.Add(1)
	return nil, errors.New("the edge cannot reach endpoints")
}

// probesSent sums an instance's spillway_probes_total.
func probesSent(t *testing.T, srv *serve.Server) int {
	t.Helper()
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^spillway_probes_total\{[^}]*\} (\d+)`).FindAllStringSubmatch(adminGet(t, srv, "/metrics"), -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// sentTo sends n requests through the edge's frontend and returns how
// many of them each backend group answered (by the backends' counts),
// failing on any status but 200.
func sentTo(t *testing.T, edge string, n int, us, eu []*hcBackend) (toUS, toEU int64) {
	t.Helper()
	count := func(bs []*hcBackend) (s int64) {
		for _, b := range bs {
			s += b.requests.Load()
		}
		return s
	}
	us0, eu0 := count(us), count(eu)
	for i := range n {
		resp, err := http.Get("http://" + edge + "/x")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}
	return count(us) - us0, count(eu) - eu0
}

// TestLayersShareHealthThroughFleet: an edge, a regional instance in
// us-east1 and one in europe-west1 in one fleet, on one config. The
// edge probes nothing and reaches no endpoint (its transport fails
// every direct attempt); the regional instances probe their own
// regions' endpoints first and publish. The edge's view follows their
// verdicts: when us-east1's endpoints fail their checks, the edge's
// waterfall sends us-east1's clients to europe-west1 on the first
// attempt, and back once they recover.
func TestLayersShareHealthThroughFleet(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	us := []*hcBackend{newHCBackend(t, "127.0.0.60"), newHCBackend(t, "127.0.0.61")}
	eu := []*hcBackend{newHCBackend(t, "127.0.0.62")}
	regUS, regEU := freeAddr(t, "127.0.0.63"), freeAddr(t, "127.0.0.64")
	push(t, st, layersFleetConfig(us, eu, regUS, regEU))

	role := func(region, role string, tr http.RoundTripper) instanceTweaks {
		return instanceTweaks{
			inst: func(io *fleet.InstanceOptions) { io.Region, io.Role, io.Probers = region, role, 2 },
			opts: func(o *serve.Options) {
				if tr != nil {
					o.Transport = tr
				}
			},
		}
	}
	direct := &noEndpoints{}
	edge := startFullInstanceWith(t, e, "edge", role("us-east1", config.LayerEdge, direct))
	rus := startFullInstanceWith(t, e, "reg-us", role("us-east1", config.LayerRegional, nil))
	reu := startFullInstanceWith(t, e, "reg-eu", role("europe-west1", config.LayerRegional, nil))

	// Each instance serves its own layer's frontends only.
	if edge.srv.FrontendAddr("reg-us") != "" || rus.srv.FrontendAddr("edge") != "" || rus.srv.FrontendAddr("reg-eu") != "" || reu.srv.FrontendAddr("reg-eu") != regEU {
		t.Fatalf("frontends: edge serves reg-us at %q, reg-us serves edge at %q and reg-eu at %q, reg-eu serves reg-eu at %q (want only %s)",
			edge.srv.FrontendAddr("reg-us"), rus.srv.FrontendAddr("edge"), rus.srv.FrontendAddr("reg-eu"), reu.srv.FrontendAddr("reg-eu"), regEU)
	}
	// Ownership: the edge probes nothing; us-east1's targets are
	// reg-us's first, then reg-eu's (two probers), and the reverse.
	eventually(t, "probe ownership by role and region", func() (bool, string) {
		e, u, r := edge.inst.Share().Stats(), rus.inst.Share().Stats(), reu.inst.Share().Stats()
		ok := e.Connected && u.Connected && r.Connected && e.Targets == 3 && len(e.Owned) == 0 && len(u.Owned) == 3 && len(r.Owned) == 3
		return ok, fmt.Sprintf("edge %v, reg-us %v, reg-eu %v", e.Owned, u.Owned, r.Owned)
	})
	for _, b := range append(slices.Clone(us), eu...) {
		eventually(t, "the edge sees "+b.addr+" healthy", func() (bool, string) {
			got := endpointState(&sharded{srv: edge.srv}, b.addr)
			return got == "HEALTHY", got
		})
	}
	front := edge.srv.FrontendAddr("edge")
	if toUS, toEU := sentTo(t, front, 20, us, eu); toUS != 20 || toEU != 0 {
		t.Fatalf("healthy: %d requests to us-east1, %d to europe-west1; want all 20 in us-east1 (the clients' region)", toUS, toEU)
	}
	eventually(t, "reg-us counting the 20 requests", func() (bool, string) {
		n := frontendRequests(t, rus.srv, "reg-us")
		return n == 20, fmt.Sprint(n)
	})

	// us-east1's endpoints fail their checks: the regional instances
	// see it and publish, and the edge, which cannot probe them, takes
	// it from the fleet.
	for _, b := range us {
		b.failing.Store(true)
	}
	for _, b := range us {
		eventually(t, "the edge sees "+b.addr+" unhealthy, from reg-us", func() (bool, string) {
			got := endpointState(&sharded{srv: edge.srv}, b.addr)
			return got == "UNHEALTHY" && strings.Contains(endpointDetail(edge.srv, b.addr), "reg-us: "), got + " " + endpointDetail(edge.srv, b.addr)
		})
	}
	regUS0 := frontendRequests(t, rus.srv, "reg-us")
	if toUS, toEU := sentTo(t, front, 20, us, eu); toUS != 0 || toEU != 20 {
		t.Fatalf("us-east1 down: %d requests to us-east1, %d to europe-west1; want all 20 spilled to europe-west1", toUS, toEU)
	}
	if got := frontendRequests(t, rus.srv, "reg-us") - regUS0; got != 0 {
		t.Errorf("us-east1 down: its regional layer got %d requests, want 0 (the edge's waterfall knew)", got)
	}

	// Recovery: back to us-east1.
	for _, b := range us {
		b.failing.Store(false)
	}
	for _, b := range us {
		eventually(t, "the edge sees "+b.addr+" healthy again", func() (bool, string) {
			got := endpointState(&sharded{srv: edge.srv}, b.addr)
			return got == "HEALTHY", got
		})
	}
	if toUS, toEU := sentTo(t, front, 20, us, eu); toUS != 20 || toEU != 0 {
		t.Fatalf("recovered: %d requests to us-east1, %d to europe-west1; want all 20 in us-east1", toUS, toEU)
	}
	if n := probesSent(t, edge.srv); n != 0 || direct.calls.Load() != 0 {
		t.Errorf("the edge sent %d probes and %d requests to endpoints directly, want none", n, direct.calls.Load())
	}
	if probesSent(t, rus.srv) == 0 || probesSent(t, reu.srv) == 0 {
		t.Errorf("the regional instances sent %d and %d probes, want some each", probesSent(t, rus.srv), probesSent(t, reu.srv))
	}
}

// endpointDetail is the health detail of the endpoint at addr in srv's
// /health report.
func endpointDetail(srv *serve.Server, addr string) string {
	for _, svc := range srv.Health().Services {
		for _, b := range svc.Backends {
			for _, e := range b.Endpoints {
				if e.IPAddress == addr {
					return e.Detail
				}
			}
		}
	}
	return ""
}

// frontendRequests sums srv's spillway_requests_total of one frontend.
func frontendRequests(t *testing.T, srv *serve.Server, frontend string) int {
	t.Helper()
	n := 0
	re := regexp.MustCompile(`(?m)^spillway_requests_total\{[^}]*frontend="` + regexp.QuoteMeta(frontend) + `"[^}]*\} (\d+)`)
	for _, m := range re.FindAllStringSubmatch(adminGet(t, srv, "/metrics"), -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// loadBackend is an instance that reports its utilisation in ORCA's
// endpoint-load-metrics header: the requests it served in the last
// second over perSec, as if each request cost 1/perSec of its CPU.
type loadBackend struct {
	mu       sync.Mutex
	recent   []time.Time
	perSec   float64
	requests atomic.Int64
}

func (b *loadBackend) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	b.mu.Lock()
	for len(b.recent) > 0 && now.Sub(b.recent[0]) > time.Second {
		b.recent = b.recent[1:]
	}
	u := float64(len(b.recent)) / b.perSec // the second before this request
	b.recent = append(b.recent, now)
	b.mu.Unlock()
	b.requests.Add(1)
	w.Header().Set("Endpoint-Load-Metrics", fmt.Sprintf("TEXT cpu_utilization=%.3f, mem_utilization=0.5", u))
	fmt.Fprint(w, "ok")
}

// startLoadBackends starts one loadBackend per ip, all on one port (an
// instance group's named port), and returns them and the port.
func startLoadBackends(t *testing.T, perSec float64, ips ...string) ([]*loadBackend, int) {
	t.Helper()
	port := 0
	var out []*loadBackend
	for _, ip := range ips {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("listen on %s:%d: %v", ip, port, err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		b := &loadBackend{perSec: perSec}
		srv := &http.Server{Handler: b}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		out = append(out, b)
	}
	return out, port
}

// TestLayersShareLoadThroughFleet: UTILIZATION backends behind the
// regional layers report their utilisation; the regional instances
// publish it with the rate they forwarded, and the edge's waterfall,
// which sees no backend response itself, spills us-east1's clients to
// europe-west1 past us-east1's measured capacity. us-east1's two
// instances are at 100% at 10 rps each, so at maxUtilization 0.8 the
// group holds 16 rps: of 30 rps about 16 stay and 14 spill (with the
// configured capacity alone, UTILIZATION sets no rate: nothing spills).
func TestLayersShareLoadThroughFleet(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	us, port := startLoadBackends(t, 10, "127.0.0.70", "127.0.0.71")
	eu, portEU := startLoadBackends(t, 1000, "127.0.0.72")
	regUS, regEU := freeAddr(t, "127.0.0.73"), freeAddr(t, "127.0.0.74")
	push(t, st, fmt.Sprintf(`instanceGroups:
- name: ig-us
  zone: us-east1-b
  namedPorts: [{name: http, port: %d}]
  instances: [{name: us-1, ipAddress: 127.0.0.70}, {name: us-2, ipAddress: 127.0.0.71}]
- name: ig-eu
  zone: europe-west1-b
  namedPorts: [{name: http, port: %d}]
  instances: [{name: eu-1, ipAddress: 127.0.0.72}]
backendServices:
- name: bs
  loadBalancingScheme: EXTERNAL_MANAGED
  portName: http
  backends:
  - {group: ig-us, balancingMode: UTILIZATION, maxUtilization: 0.8}
  - {group: ig-eu, balancingMode: UTILIZATION, maxUtilization: 0.8}
urlMaps:
- {name: um, defaultService: bs}
regions:
- name: us-east1
  regionalLayer: {endpoints: ["%s"]}
- name: europe-west1
  regionalLayer: {endpoints: ["%s"]}
frontends:
- {name: edge, address: "127.0.0.1:0", urlMap: um, layer: EDGE, region: us-east1}
- {name: reg-us, address: "%s", layer: REGIONAL, region: us-east1, trustedEdges: [127.0.0.0/8]}
- {name: reg-eu, address: "%s", layer: REGIONAL, region: europe-west1, trustedEdges: [127.0.0.0/8]}
`, port, portEU, regUS, regEU, regUS, regEU))
	role := func(region, role string) instanceTweaks {
		return instanceTweaks{inst: func(io *fleet.InstanceOptions) { io.Region, io.Role = region, role }}
	}
	edge := startFullInstanceWith(t, e, "edge", role("us-east1", config.LayerEdge))
	startFullInstanceWith(t, e, "reg-us", role("us-east1", config.LayerRegional))
	startFullInstanceWith(t, e, "reg-eu", role("europe-west1", config.LayerRegional))
	front := edge.srv.FrontendAddr("edge")
	eventually(t, "the edge sharing demand with both regional instances", func() (bool, string) {
		st := edge.inst.Demand().Stats()
		return st.Connected && len(st.Peers) == 2, fmt.Sprint(st)
	})

	// 30 rps of us-east1's clients, paced, until the test ends.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var failed atomic.Int64
	go func() {
		tick := time.NewTicker(time.Second / 30)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				resp, err := http.Get("http://" + front + "/x")
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
				}
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
	}()
	usCapacity := func() float64 {
		for _, b := range edge.srv.Health().Services[0].Backends {
			if b.Group == "ig-us" {
				return b.MeasuredCapacity
			}
		}
		return -1
	}
	eventually(t, "the edge measuring us-east1's capacity near 16 rps", func() (bool, string) {
		c := usCapacity()
		return c > 10 && c < 24, fmt.Sprint(c)
	})
	count := func(bs []*loadBackend) (n int64) {
		for _, b := range bs {
			n += b.requests.Load()
		}
		return n
	}
	us0, eu0 := count(us), count(eu)
	time.Sleep(4 * time.Second)
	dUS, dEU := count(us)-us0, count(eu)-eu0
	frac := float64(dUS) / float64(dUS+dEU)
	t.Logf("over 4 s: %d requests to us-east1, %d to europe-west1 (%.2f stayed; 16/30 = 0.53 expected); measured capacity %.1f rps; %d failed", dUS, dEU, frac, usCapacity(), failed.Load())
	if dUS+dEU < 60 || frac < 0.3 || frac > 0.8 {
		t.Errorf("%d to us-east1, %d to europe-west1: want about 16 of 30 rps to stay in us-east1", dUS, dEU)
	}
	if failed.Load() != 0 {
		t.Errorf("%d requests failed", failed.Load())
	}
}
