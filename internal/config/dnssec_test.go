package config

import (
	"strings"
	"testing"
)

func TestDNSSECConfig(t *testing.T) {
	ok := strings.Replace(dnsBase, "  nameServers: [ns1.gslb.example.]\n", "  nameServers: [ns1.gslb.example.]\n  dnssec: {keyFile: /etc/spillway/gslb.example.key}\n", 1)
	c, err := Parse([]byte(ok), "dns.yaml")
	if err != nil {
		t.Fatalf("valid DNSSEC config rejected:\n%v", err)
	}
	if d := c.DNSZones[0].DNSSEC; d == nil || d.KeyFile != "/etc/spillway/gslb.example.key" || d.Disabled {
		t.Fatalf("dnssec = %+v", d)
	}
	bad := strings.Replace(dnsBase, "  nameServers: [ns1.gslb.example.]\n", "  nameServers: [ns1.gslb.example.]\n  dnssec: {disabled: false}\n", 1)
	_, err = Parse([]byte(bad), "dns.yaml")
	if err == nil || !strings.Contains(err.Error(), "dnsZones[0].dnssec.keyFile: a signed zone needs a key file") ||
		!strings.Contains(err.Error(), "spillway dnssec keygen") {
		t.Fatalf("missing keyFile: %v", err)
	}
}
