package probe_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/probe"
)

func TestTargetValidate(t *testing.T) {
	long := strings.Repeat("a", probe.MaxResponseLen+1)
	tests := []struct {
		name    string
		target  probe.Target
		wantErr string // substring; "" means valid
	}{
		{name: "minimal HTTP", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "HTTP"}}},
		{name: "IPv6", target: probe.Target{Addr: "[2001:db8::1]:443", Spec: probe.Spec{Type: "HTTPS"}}},
		{name: "full TCP", target: probe.Target{Addr: "10.0.0.1:6379", Spec: probe.Spec{
			Type: "TCP", Interval: time.Second, Timeout: time.Second, Request: "PING\r\n", Response: "+PONG", ProxyHeader: "PROXY_V1"}}},
		{name: "timeout defaults below short interval", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "HTTP2", Interval: time.Second}}},
		{name: "hostname addr", target: probe.Target{Addr: "backend:80", Spec: probe.Spec{Type: "HTTP"}}, wantErr: "addr: "},
		{name: "missing port", target: probe.Target{Addr: "10.0.0.1", Spec: probe.Spec{Type: "HTTP"}}, wantErr: "addr: "},
		{name: "port 0", target: probe.Target{Addr: "10.0.0.1:0", Spec: probe.Spec{Type: "HTTP"}}, wantErr: "port must not be 0"},
		{name: "unknown type", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "SSL"}}, wantErr: `type "SSL"`},
		{name: "lower-case type", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "http"}}, wantErr: `type "http"`},
		{name: "timeout above interval", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "TCP", Interval: time.Second, Timeout: 2 * time.Second}}, wantErr: "must not exceed interval"},
		{name: "negative interval", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "TCP", Interval: -time.Second}}, wantErr: "interval -1s"},
		{name: "bad proxy header", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "TCP", ProxyHeader: "PROXY_V2"}}, wantErr: `proxy header "PROXY_V2"`},
		{name: "response too long", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "HTTP", Response: long}}, wantErr: "response: 1025 bytes"},
		{name: "request on HTTP", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "HTTP", Request: "x"}}, wantErr: "only valid for TCP"},
		{name: "relative path", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "HTTP", Path: "healthz"}}, wantErr: "must start with /"},
		{name: "host with slash", target: probe.Target{Addr: "10.0.0.1:80", Spec: probe.Spec{Type: "HTTP", Host: "a/b"}}, wantErr: "not a valid Host header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.target.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate(%+v) = %v, want nil", tc.target, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate(%+v) = %v, want error containing %q", tc.target, err, tc.wantErr)
			}
		})
	}
}

func TestSpecValidateJoinsErrors(t *testing.T) {
	err := probe.Spec{Type: "UDP", ProxyHeader: "X"}.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want two problems")
	}
	if err := hasAll(err.Error(), `type "UDP"`, `proxy header "X"`); err != nil {
		t.Errorf("Validate() reports only some problems: %v", err)
	}
}
