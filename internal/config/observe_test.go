package config

import (
	"strings"
	"testing"
)

// spillway.tracing and spillway.accessLog.projectId are checked.
func TestInvalidTracingAndProject(t *testing.T) {
	tests := []struct{ name, spillway, want string }{
		{"tracing not a URL", "{tracing: {otlpEndpoint: 'collector:4318'}}", `spillway.tracing.otlpEndpoint: "collector:4318" is not an http(s) URL`},
		{"tracing without endpoint", "{tracing: {serviceName: edge}}", `spillway.tracing.otlpEndpoint: "" is not an http(s) URL`},
		{"project ID", "{accessLog: {enable: true, projectId: My_Project}}", `spillway.accessLog.projectId: "My_Project" is not a project ID`},
		{"valid", "{tracing: {otlpEndpoint: 'http://127.0.0.1:4318/v1/traces'}, accessLog: {enable: true, projectId: my-project}}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := strings.Replace(baseConfig, "spillway: {undrainHoldSec: 60}", "spillway: "+tt.spillway, 1)
			_, err := Parse([]byte(y), "test.yaml")
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Parse error %v, want %s", err, tt.want)
			}
		})
	}
}
