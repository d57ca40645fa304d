package config

import (
	"strings"
	"testing"
)

// dnsTelemetryBase is dnsBase with the query log and dnstap on.
var dnsTelemetryBase = dnsBase + `spillway:
  dnsQueryLog: {enable: true, sampleRate: 0.5, path: /tmp/q.log}
  dnstap: {file: /tmp/dnstap.fstrm, identity: ns1, version: v1, bufferSize: 100}
`

func TestDNSTelemetryConfig(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"valid", "", "", ""},
		{"socket instead", "file: /tmp/dnstap.fstrm", "socket: /tmp/dnstap.sock", ""},
		{"both", "file: /tmp/dnstap.fstrm", "file: /tmp/a, socket: /tmp/b", "spillway.dnstap: socket \"/tmp/b\" and file \"/tmp/a\" (fix: set exactly one of socket"},
		{"neither", "file: /tmp/dnstap.fstrm, ", "", "spillway.dnstap: socket \"\" and file \"\""},
		{"sample rate", "sampleRate: 0.5", "sampleRate: 2", "spillway.dnsQueryLog.sampleRate: 2 is out of range"},
		{"buffer", "bufferSize: 100", "bufferSize: 0", "spillway.dnstap.bufferSize: 0 is out of range"},
		{"unknown field", "identity: ns1", "ident: ns1", `unknown field "ident"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(dnsTelemetryBase, tc.old) {
				t.Fatalf("base config has no %q", tc.old)
			}
			c, err := Parse([]byte(strings.Replace(dnsTelemetryBase, tc.old, tc.new, 1)), "dns.yaml")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if c.Spillway.DNSQueryLog == nil || c.Spillway.DNSTap == nil {
					t.Fatal("blocks not parsed")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got:\n%v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}
