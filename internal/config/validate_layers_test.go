package config

import (
	"strings"
	"testing"
	"time"
)

// TestLayersValid: the two-layer shape of docs/global.md parses.
func TestLayersValid(t *testing.T) {
	s := apply(t, []edit{
		{"- {name: us-east1, latitude: 33.2, longitude: -80.0}\n", "- name: us-east1\n  latitude: 33.2\n  longitude: -80.0\n  regionalLayer:\n    endpoints: [\"198.51.100.10:8443\", \"[2001:db8::1]:8443\"]\n    protocol: H2C\n    maxConnections: 2\n    healthCheck: {checkIntervalMs: 1500, unhealthyThreshold: 3}\n"},
		{"  urlMap: web-map\n", "  urlMap: web-map\n  layer: EDGE\n- name: regional\n  address: 127.0.0.1:8443\n  layer: REGIONAL\n  region: us-east1\n  trustedEdges: [192.0.2.0/24, 2001:db8::7]\n"},
	})
	c, err := Parse([]byte(s), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Regions[0].RegionalLayer; l == nil || len(l.Endpoints) != 2 || l.MaxConnections != 2 {
		t.Fatalf("regionalLayer = %+v", l)
	}
	if iv, to, h, u := c.Regions[0].RegionalLayer.HealthCheck.Values(); iv != 1500*time.Millisecond || to != time.Second || h != 2 || u != 3 {
		t.Errorf("healthCheck values %v %v %d %d, want 1.5s, the default 1s and 2, and 3", iv, to, h, u)
	}
	if _, to, _, _ := (&LayerHealthCheck{CheckIntervalMs: 300}).Values(); to != 300*time.Millisecond {
		t.Errorf("default timeout with a 300 ms interval: %v, want the interval", to)
	}
	if f := c.Frontends[1]; f.Layer != LayerRegional || f.URLMap != "" || len(f.TrustedEdges) != 2 {
		t.Fatalf("regional frontend = %+v", f)
	}
	if p, ok := ParseTrustedEdge("2001:db8::7"); !ok || p.Bits() != 128 {
		t.Fatalf("ParseTrustedEdge(2001:db8::7) = %v, %v", p, ok)
	}
}

func TestLayersInvalid(t *testing.T) {
	region := "- {name: us-east1, latitude: 33.2, longitude: -80.0}\n"
	fe := "  urlMap: web-map\n"
	tests := []struct {
		name  string
		edits []edit
		want  []string
	}{
		{"no endpoints, bad protocol", []edit{{region, "- name: us-east1\n  regionalLayer: {protocol: QUIC}\n"}},
			[]string{"regions[us-east1].regionalLayer.endpoints: at least one endpoint is required", "regions[us-east1].regionalLayer.protocol:"}},
		{"TLS settings on h2c", []edit{{region, "- name: us-east1\n  regionalLayer: {endpoints: [\"198.51.100.1:1\"], caFile: ca.pem, clientCertificate: {certificateFile: c.pem}}\n"}},
			[]string{"regionalLayer.caFile: a CA file is only used with HTTP2", "regionalLayer.clientCertificate: a client certificate is only used with HTTP2", "clientCertificate.privateKeyFile: a private key file is required"}},
		{"endpoint without host, too many connections", []edit{{region, "- name: us-east1\n  regionalLayer: {endpoints: [\":8443\"], maxConnections: 100}\n"}},
			[]string{"regionalLayer.endpoints[0]: \":8443\" has no host", "regionalLayer.maxConnections: 100 is out of range"}},
		{"health check out of range", []edit{{region, "- name: us-east1\n  regionalLayer: {endpoints: [\"198.51.100.1:1\"], healthCheck: {checkIntervalMs: 50, timeoutMs: 5000, healthyThreshold: 11, unhealthyThreshold: -1}}\n"}},
			[]string{"regionalLayer.healthCheck.checkIntervalMs: 50 is out of range", "regionalLayer.healthCheck.timeoutMs: 5000 is out of range", "healthCheck.healthyThreshold: 11 is out of range", "healthCheck.unhealthyThreshold: -1 is out of range"}},
		{"timeout above the default interval", []edit{{region, "- name: us-east1\n  regionalLayer: {endpoints: [\"198.51.100.1:1\"], healthCheck: {timeoutMs: 2500}}\n"}},
			[]string{"regionalLayer.healthCheck.timeoutMs: 2500 is out of range (fix: use 1 up to checkIntervalMs"}},
		{"regional without region or trust", []edit{{fe, fe + "  layer: REGIONAL\n"}},
			[]string{"frontends[web].region: a REGIONAL frontend needs a region", "frontends[web].trustedEdges: a REGIONAL frontend must say which edges it trusts"}},
		{"bad prefix", []edit{{fe, fe + "  layer: REGIONAL\n  region: us-east1\n  trustedEdges: [192.0.2.0/33]\n"}},
			[]string{"frontends[web].trustedEdges[0]: \"192.0.2.0/33\" is not an IP prefix"}},
		{"trusted edges on an edge", []edit{{fe, fe + "  layer: EDGE\n  trustedEdges: [192.0.2.0/24]\n"}},
			[]string{"frontends[web].trustedEdges: trustedEdges is only used by a REGIONAL frontend"}},
		{"unknown layer", []edit{{fe, fe + "  layer: MIDDLE\n"}},
			[]string{"frontends[web].layer:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(apply(t, tc.edits)), "test.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
