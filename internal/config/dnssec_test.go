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
	if err == nil || !strings.Contains(err.Error(), "dnsZones[gslb.example.].dnssec.keyFile: a signed zone needs a key file") ||
		!strings.Contains(err.Error(), "spillway dnssec keygen") {
		t.Fatalf("missing keyFile: %v", err)
	}
}

// A signed zone cannot also be transferred: its signatures are made
// online and never transferred, so a secondary would serve it unsigned
// under the parent's DS and validators would fail it (review finding
// 4). A disabled dnssec block may stay beside a transfer.
func TestDNSSECWithTransferIsRefused(t *testing.T) {
	with := func(dnssec string) string {
		return strings.Replace(dnsBase, "  nameServers: [ns1.gslb.example.]\n",
			"  nameServers: [ns1.gslb.example.]\n  dnssec: {keyFile: /etc/spillway/gslb.example.key"+dnssec+"}\n  transfer: {allow: [192.0.2.0/24]}\n", 1)
	}
	_, err := Parse([]byte(with("")), "dns.yaml")
	if err == nil || !strings.Contains(err.Error(), "dnsZones[gslb.example.].transfer:") || !strings.Contains(err.Error(), "signatures are made online") {
		t.Fatalf("dnssec with transfer: %v", err)
	}
	if _, err := Parse([]byte(with(", disabled: true")), "dns.yaml"); err != nil {
		t.Fatalf("disabled dnssec with transfer rejected: %v", err)
	}
}
