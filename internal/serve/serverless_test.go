package serve_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// httpsRegion is an HTTPS test backend standing for one region's Cloud
// Run service; it answers its name, or 502 while failing.
type httpsRegion struct {
	srv     *httptest.Server
	failing atomic.Bool
	plain   atomic.Int64 // requests that did not arrive over TLS
	host    atomic.Value // last Host header
}

func startHTTPSRegion(t *testing.T, name string) *httpsRegion {
	t.Helper()
	r := &httpsRegion{}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.TLS == nil {
			r.plain.Add(1)
		}
		r.host.Store(req.Host)
		if r.failing.Load() {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		io.WriteString(w, name)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// TestServerlessNEGsOutlierEjection runs seed 003's setup through serve:
// Cloud Run services behind SERVERLESS NEGs in Tokyo and Osaka, mapped by
// spillway.serverless to HTTPS backends on loopback, no health checks,
// and outlier detection ejecting Osaka (nearest to the frontend) after
// consecutive 502s; Tokyo serves meanwhile and Osaka returns after the
// ejection time once it heals.
func TestServerlessNEGsOutlierEjection(t *testing.T) {
	tokyo := startHTTPSRegion(t, "tokyo")
	osaka := startHTTPSRegion(t, "osaka")
	osaka.failing.Store(true)
	y := fmt.Sprintf(`spillway:
  serverless:
  - {region: asia-northeast1, baseUrl: "%s"}
  - {region: asia-northeast2, baseUrl: "%s"}
networkEndpointGroups:
- {name: neg-tokyo, region: asia-northeast1, networkEndpointType: SERVERLESS, cloudRun: {service: wt-web}}
- {name: neg-osaka, region: asia-northeast2, networkEndpointType: SERVERLESS, cloudRun: {service: wt-web}}
backendServices:
- name: bs-default
  loadBalancingScheme: EXTERNAL_MANAGED
  outlierDetection:
    interval: {seconds: 1}
    baseEjectionTime: {seconds: 1}
    maxEjectionPercent: 50
    consecutiveErrors: 5
    consecutiveGatewayFailure: 5
    enforcingConsecutiveGatewayFailure: 100
  backends: [{group: neg-tokyo}, {group: neg-osaka}]
urlMaps:
- {name: um, defaultService: bs-default}
frontends:
- {name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um, region: asia-northeast2}
`, tokyo.srv.URL, osaka.srv.URL)
	s, url := startServer(t, servetest.Parse(t, y))
	get := func() (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	osakaEjected := func() bool {
		for _, b := range s.Health().Services[0].Backends {
			if b.Region == "asia-northeast2" {
				return len(b.Endpoints) == 1 && b.Endpoints[0].Ejected
			}
		}
		return false
	}
	// Osaka is nearest and answers 502; the default retry (GET, 502)
	// goes to Tokyo, so clients see no error while Osaka's gateway
	// failures count towards its ejection.
	for i := 0; i < 20; i++ {
		if code, body := get(); code != 200 || body != "tokyo" {
			t.Fatalf("request %d: %d %q, want 200 from tokyo (retried)", i, code, body)
		}
	}
	waitFor(t, "osaka ejected", osakaEjected)
	for i := 0; i < 20; i++ {
		if code, body := get(); code != 200 || body != "tokyo" {
			t.Fatalf("while Osaka is ejected: %d %q, want 200 from tokyo", code, body)
		}
	}
	osaka.failing.Store(false)
	waitFor(t, "osaka back", func() bool { _, b := get(); return b == "osaka" })
	if n := tokyo.plain.Load() + osaka.plain.Load(); n != 0 {
		t.Errorf("%d requests reached a serverless backend without TLS", n)
	}
	if h, _ := osaka.host.Load().(string); !strings.HasPrefix(h, "127.0.0.1") {
		t.Errorf("Host at the backend %q, want the base URL's host 127.0.0.1", h)
	}
}
