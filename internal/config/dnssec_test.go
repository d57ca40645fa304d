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

// A signed zone may be transferred (issue 23): the transfer carries its
// static part signed, with an NSEC chain, so a secondary serves it signed
// (it was refused while transfers carried no signatures, review finding
// 4).
func TestDNSSECWithTransfer(t *testing.T) {
	with := func(dnssec string) string {
		return strings.Replace(dnsBase, "  nameServers: [ns1.gslb.example.]\n",
			"  nameServers: [ns1.gslb.example.]\n  dnssec: {keyFile: /etc/spillway/gslb.example.key"+dnssec+"}\n  transfer: {allow: [192.0.2.0/24]}\n", 1)
	}
	for _, d := range []string{"", ", disabled: true"} {
		if _, err := Parse([]byte(with(d)), "dns.yaml"); err != nil {
			t.Fatalf("dnssec%s with transfer: %v", d, err)
		}
	}
}
