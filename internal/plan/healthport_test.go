package plan

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
)

// The probe port of each health check shape: with neither port nor
// portSpecification (including no type block at all) probes go to the
// serving port (0), as docs/semantics.md §4 says; a fixed port or
// USE_FIXED_PORT without one gives the type's default.
func TestHealthCheckProbePort(t *testing.T) {
	for _, tc := range []struct {
		hc   string
		want int
	}{
		{`{name: hc, type: HTTP}`, 0},
		{`{name: hc, type: HTTPS}`, 0},
		{`{name: hc, type: HTTP2}`, 0},
		{`{name: hc, type: TCP}`, 0},
		{`{name: hc, type: GRPC}`, 0},
		{`{name: hc, type: HTTP, httpHealthCheck: {requestPath: /healthz}}`, 0},
		{`{name: hc, type: HTTP, httpHealthCheck: {portSpecification: USE_SERVING_PORT}}`, 0},
		{`{name: hc, type: HTTP, httpHealthCheck: {port: 8081}}`, 8081},
		{`{name: hc, type: HTTP, httpHealthCheck: {portSpecification: USE_FIXED_PORT}}`, 80},
		{`{name: hc, type: HTTPS, httpsHealthCheck: {portSpecification: USE_FIXED_PORT}}`, 443},
		{`{name: hc, type: TCP, tcpHealthCheck: {port: 22}}`, 22},
		{`{name: hc, type: GRPC, grpcHealthCheck: {portSpecification: USE_FIXED_PORT}}`, 80},
	} {
		c, err := config.Parse([]byte("healthChecks: ["+tc.hc+"]\n"), "t.yaml")
		if err != nil {
			t.Fatalf("%s: %v", tc.hc, err)
		}
		p, err := Compile(c)
		if err != nil {
			t.Fatalf("%s: %v", tc.hc, err)
		}
		if got := p.HealthChecks[0].Port; got != tc.want {
			t.Errorf("%s: probe port %d, want %d", tc.hc, got, tc.want)
		}
	}
}
