package serve_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/report"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// getHealth reads the admin API's /health, what spillway get-health prints.
func getHealth(t *testing.T, s *serve.Server) *report.Health {
	t.Helper()
	resp, err := http.Get(adminURL(s) + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h report.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return &h
}

// TestGRPCHealthCheckThroughGetHealth: a real gRPC server with grpc-go's
// health service backs a NEG checked by a type: GRPC health check; when
// the service goes NOT_SERVING the endpoint turns UNHEALTHY in
// get-health, and HEALTHY again when it is SERVING.
func TestGRPCHealthCheckThroughGetHealth(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("shop.Cart", healthpb.HealthCheckResponse_SERVING)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	host, port, _ := net.SplitHostPort(ln.Addr().String())

	y := fmt.Sprintf(`healthChecks:
- name: hc-grpc
  type: GRPC
  checkIntervalMs: 200
  timeoutMs: 200
  healthyThreshold: 2
  unhealthyThreshold: 2
  grpcHealthCheck: {portSpecification: USE_SERVING_PORT, grpcServiceName: shop.Cart}
networkEndpointGroups:
- {name: neg-a, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- {name: bs, healthChecks: [hc-grpc], backends: [{group: neg-a, balancingMode: RATE, maxRatePerEndpoint: 100}]}
urlMaps: [{name: um, defaultService: bs}]
frontends: [{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um, region: us-east1}]
`, host, port)
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})

	endpoint := func() report.Endpoint {
		return getHealth(t, s).Services[0].Backends[0].Endpoints[0]
	}
	steps := []struct {
		status     healthpb.HealthCheckResponse_ServingStatus
		want       string
		wantDetail string
	}{
		{healthpb.HealthCheckResponse_SERVING, "HEALTHY", "gRPC SERVING"},
		{healthpb.HealthCheckResponse_NOT_SERVING, "UNHEALTHY", "gRPC NOT_SERVING"},
		{healthpb.HealthCheckResponse_SERVING, "HEALTHY", "gRPC SERVING"},
	}
	for _, st := range steps {
		hs.SetServingStatus("shop.Cart", st.status)
		var last report.Endpoint
		// A starved machine can time a probe out (UNHEALTHY for another
		// reason): wait for the state with the gRPC status that caused it.
		waitFor(t, "endpoint "+st.want+" ("+st.wantDetail+") after "+st.status.String(), func() bool {
			last = endpoint()
			return last.HealthState == st.want && strings.Contains(last.Detail, st.wantDetail)
		})
	}
}
