package gslb

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/probe"
)

// TestGRPCMemberCheck: a DNS pool member checked by a type: GRPC or
// GRPC_WITH_TLS health check is probed with grpc.health.v1.Health/Check
// for the configured service, on the check's port (443 by default for
// GRPC_WITH_TLS when USE_FIXED_PORT names none).
func TestGRPCMemberCheck(t *testing.T) {
	const yaml = `
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
healthChecks:
- {name: hc-grpc, type: GRPC, grpcHealthCheck: {port: 50051, grpcServiceName: shop.Cart}}
- {name: hc-grpcs, type: GRPC_WITH_TLS, grpcTlsHealthCheck: {portSpecification: USE_FIXED_PORT}}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: w
    pool:
      members:
      - {name: a, address: 192.0.2.1, healthCheck: hc-grpc}
      - {name: b, address: 192.0.2.2, healthCheck: hc-grpcs}
`
	now := t0
	s := virtualServer(t, yaml, &now)
	want := []probe.Target{
		{Addr: "192.0.2.1:50051", Spec: probe.Spec{Type: probe.TypeGRPC, GRPCService: "shop.Cart"}},
		{Addr: "192.0.2.2:443", Spec: probe.Spec{Type: probe.TypeGRPCTLS}},
	}
	for i, m := range s.names[0].members {
		if len(m.targets) != 1 {
			t.Fatalf("member %s: %d targets, want 1", m.name, len(m.targets))
		}
		got := m.targets[0]
		if got.Addr != want[i].Addr || got.Spec.Type != want[i].Spec.Type || got.Spec.GRPCService != want[i].Spec.GRPCService {
			t.Errorf("member %s: target %s %+v, want %s type %s service %q", m.name, got.Addr, got.Spec, want[i].Addr, want[i].Spec.Type, want[i].Spec.GRPCService)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("member %s: target invalid: %v", m.name, err)
		}
	}
}
