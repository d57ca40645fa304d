package probe_test

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/spillwaylb/spillway/internal/probe"
)

// grpcServer starts a real gRPC server on loopback (TLS when tlsOn) with
// grpc-go's health service when hs is not nil, and stops it at cleanup.
func grpcServer(t *testing.T, hs *health.Server, tlsOn bool) string {
	t.Helper()
	var opts []grpc.ServerOption
	if tlsOn {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{testCert(t)}})))
	}
	srv := grpc.NewServer(opts...)
	if hs != nil {
		healthpb.RegisterHealthServer(srv, hs)
	}
	ln := listen(t)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// testCert is httptest's self-signed loopback certificate.
func testCert(t *testing.T) tls.Certificate {
	t.Helper()
	s := httptest.NewUnstartedServer(nil)
	s.StartTLS()
	defer s.Close()
	return s.TLS.Certificates[0]
}

// TestCheckGRPC: a real grpc-go health server answers Health/Check; only
// SERVING is healthy (Google's semantics), for plaintext GRPC and for
// GRPC_WITH_TLS.
func TestCheckGRPC(t *testing.T) {
	tests := []struct {
		name       string
		typ        string
		service    string
		set        map[string]healthpb.HealthCheckResponse_ServingStatus
		noHealth   bool
		wantOK     bool
		wantDetail string
	}{
		{name: "server SERVING", typ: probe.TypeGRPC, wantOK: true, wantDetail: "gRPC SERVING"},
		{name: "server NOT_SERVING", typ: probe.TypeGRPC, set: map[string]healthpb.HealthCheckResponse_ServingStatus{"": healthpb.HealthCheckResponse_NOT_SERVING}, wantDetail: "gRPC NOT_SERVING"},
		{name: "named service SERVING", typ: probe.TypeGRPC, service: "shop.Cart", set: map[string]healthpb.HealthCheckResponse_ServingStatus{"shop.Cart": healthpb.HealthCheckResponse_SERVING}, wantOK: true, wantDetail: "gRPC SERVING"},
		{name: "named service NOT_SERVING", typ: probe.TypeGRPC, service: "shop.Cart", set: map[string]healthpb.HealthCheckResponse_ServingStatus{"shop.Cart": healthpb.HealthCheckResponse_NOT_SERVING}, wantDetail: "gRPC NOT_SERVING"},
		{name: "unknown service", typ: probe.TypeGRPC, service: "shop.Nope", wantDetail: `gRPC SERVICE_UNKNOWN: the server does not know service "shop.Nope"`},
		{name: "no health service", typ: probe.TypeGRPC, noHealth: true, wantDetail: "gRPC UNIMPLEMENTED"},
		{name: "TLS SERVING", typ: probe.TypeGRPCTLS, wantOK: true, wantDetail: "gRPC SERVING"},
		{name: "TLS NOT_SERVING", typ: probe.TypeGRPCTLS, set: map[string]healthpb.HealthCheckResponse_ServingStatus{"": healthpb.HealthCheckResponse_NOT_SERVING}, wantDetail: "gRPC NOT_SERVING"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hs *health.Server
			if !tc.noHealth {
				hs = health.NewServer()
				for svc, st := range tc.set {
					hs.SetServingStatus(svc, st)
				}
			}
			addr := grpcServer(t, hs, tc.typ == probe.TypeGRPCTLS)
			res := probe.New(func(probe.Result) {}).Check(context.Background(), probe.Target{Addr: addr,
				Spec: probe.Spec{Type: tc.typ, Interval: 5 * time.Second, Timeout: 5 * time.Second, GRPCService: tc.service}})
			if res.OK != tc.wantOK || !strings.HasPrefix(res.Detail, tc.wantDetail) {
				t.Errorf("Check = {OK: %v, Detail: %q}, want {OK: %v, Detail starting %q}", res.OK, res.Detail, tc.wantOK, tc.wantDetail)
			}
		})
	}
}

// TestCheckGRPCFailures: a plaintext probe of a TLS server, a TLS probe
// of a plaintext server, and a refused port all fail with a reason.
func TestCheckGRPCFailures(t *testing.T) {
	tlsAddr := grpcServer(t, health.NewServer(), true)
	plainAddr := grpcServer(t, health.NewServer(), false)
	tests := []struct {
		name, typ, addr string
	}{
		{"plaintext probe, TLS server", probe.TypeGRPC, tlsAddr},
		{"TLS probe, plaintext server", probe.TypeGRPCTLS, plainAddr},
		{"refused", probe.TypeGRPC, refusedAddr(t)},
		{"black hole (accepts, never answers)", probe.TypeGRPC, listen(t).Addr().String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := probe.New(func(probe.Result) {}).Check(context.Background(), probe.Target{Addr: tc.addr,
				Spec: probe.Spec{Type: tc.typ, Interval: 2 * time.Second, Timeout: 300 * time.Millisecond}})
			if res.OK || res.Detail == "" {
				t.Errorf("Check = {OK: %v, Detail: %q}, want a failure with a reason", res.OK, res.Detail)
			}
			t.Logf("%s: %s (%s)", tc.name, res.Detail, res.Latency)
		})
	}
}

// TestGRPCSpecValidate: a gRPC service name only goes with a gRPC type,
// and TCP's request/response do not go with gRPC.
func TestGRPCSpecValidate(t *testing.T) {
	tests := []struct {
		name string
		spec probe.Spec
		want string
	}{
		{"grpc ok", probe.Spec{Type: probe.TypeGRPC, GRPCService: "a.B"}, ""},
		{"service on HTTP", probe.Spec{Type: probe.TypeHTTP, GRPCService: "a.B"}, "only valid for GRPC"},
		{"response on GRPC", probe.Spec{Type: probe.TypeGRPCTLS, Response: "x"}, "not valid for GRPC_WITH_TLS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
