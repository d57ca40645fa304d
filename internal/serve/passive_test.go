package serve_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
)

// A frontend whose backend starts answering 503 to 5 % of requests has
// its region's DNS weight halved by the passive signal: a US client,
// answered only with the US frontend before, gets it for about half its
// queries (the rest go to the next region, EU). When the errors stop,
// the weight comes back. Real sockets throughout: HTTP backends, the
// proxy's frontends, the DNS frontend; the window is shortened with
// passive.windowSec.
//
// Only the error signal is under test, and nothing else may halve the
// weight on a loaded machine: the latency signal is set out of reach
// (maxP95LatencyMs 60000; the default 400 ms p95 is reached when the CPU
// is starved), and the probes are patient (1 s interval and timeout),
// so that a starved prober cannot mark the US endpoint down. Every wait
// is on a condition (waitFor), none on a fixed share of time.
func TestPassiveSignalHalvesRegion(t *testing.T) {
	var failing atomic.Bool
	var n atomic.Uint64
	start := func(zone string, flaky bool) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" && flaky && failing.Load() && n.Add(1)%20 == 0 {
				http.Error(w, "flaky", http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, zone)
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	uh, up, _ := net.SplitHostPort(start("us", true))
	eh, ep, _ := net.SplitHostPort(start("eu", false))
	c, err := config.Parse([]byte(fmt.Sprintf(`healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 1000, timeoutMs: 1000, httpHealthCheck: {requestPath: /healthz}}
networkEndpointGroups:
- {name: neg-us, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
- {name: neg-eu, zone: europe-west3-a, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- name: web
  healthChecks: [hc]
  backends:
  - {group: neg-us, balancingMode: RATE, maxRatePerEndpoint: 100000}
  - {group: neg-eu, balancingMode: RATE, maxRatePerEndpoint: 100000}
urlMaps:
- {name: um, defaultService: web}
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
- {name: web-us, address: "127.0.0.31:0", protocol: HTTP, urlMap: um, region: us-east1}
- {name: web-eu, address: "127.0.0.32:0", protocol: HTTP, urlMap: um, region: europe-west3}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: www
    policy: GEO
    backendService: web
    passive: {windowSec: 3, minRequests: 100, maxP95LatencyMs: 60000}
    locations:
    - {cidr: 198.51.100.0/24, region: us-east1}
`, uh, up, eh, ep)), "passive.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startServer(t, c)
	dnsAddr := s.DNSAddr("dns")
	usURL := "http://" + s.FrontendAddr("web-us") + "/"

	// Load on the US frontend for the whole test.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, errs atomic.Uint64
	for range 4 {
		wg.Go(func() {
			client := &http.Client{Timeout: 2 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get(usURL)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				sent.Add(1)
				if resp.StatusCode >= 500 {
					errs.Add(1)
				}
			}
		})
	}
	t.Cleanup(func() { close(stop); wg.Wait() })

	client := &dns.Client{Timeout: 2 * time.Second}
	usShare := func(q int) float64 {
		us := 0
		for range q {
			m := new(dns.Msg)
			m.SetQuestion("www.gslb.example.", dns.TypeA)
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.51.100.0").To4()})
			r, _, err := client.Exchange(m, dnsAddr)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Answer) == 1 && r.Answer[0].(*dns.A).A.String() == "127.0.0.31" {
				us++
			}
		}
		return float64(us) / float64(q)
	}
	waitFor(t, "US client answered with the US frontend only", func() bool { return usShare(100) == 1 })
	time.Sleep(4 * time.Second) // a clean window
	if sh := usShare(400); sh != 1 {
		t.Fatalf("US share with clean traffic: %.3f", sh)
	}

	failing.Store(true)
	t0, s0, e0 := time.Now(), sent.Load(), errs.Load()
	var share float64
	waitFor(t, "US region's weight halved", func() bool {
		share = usShare(400)
		return share > 0.35 && share < 0.65
	})
	took := time.Since(t0)
	reqs, bad := sent.Load()-s0, errs.Load()-e0
	t.Logf("5%% 503s: %d client requests, %.1f%% 5xx seen by clients (the proxy retries 503 once; the attempts count); US share %.3f after %v", reqs, 100*float64(bad)/float64(reqs), share, took.Round(100*time.Millisecond))
	for range 3 {
		if sh := usShare(400); sh < 0.35 || sh > 0.65 {
			t.Fatalf("US share while degraded: %.3f, want about 0.5", sh)
		}
	}

	failing.Store(false)
	t1 := time.Now()
	waitFor(t, "US region's weight restored", func() bool { return usShare(200) == 1 })
	t.Logf("errors stopped: full weight again after %v", time.Since(t1).Round(100*time.Millisecond))
}
