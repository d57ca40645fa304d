package config

import (
	"strings"
	"testing"
	"time"
)

// bgpConfig is the documented spillway.bgp example (docs/extensions.md);
// the cases below each change one piece of it.
const bgpConfig = `spillway:
  bgp:
    localAsn: 65001
    routerId: 192.0.2.1
    listenPort: -1
    neighbors:
    - address: 192.0.2.254
      peerAsn: 65000
      port: 179
      holdTimeSec: 9
      passwordFile: /etc/spillway/bgp-md5
      localAddress: 192.0.2.1
    - {address: "2001:db8::fe", peerAsn: 65000}
    minHealthyCapacityPercent: 1
    degraded:
      belowHealthyCapacityPercent: 50
      asPathPrepend: 3
    holdDownSec: 30
    drainSec: 10
networkEndpointGroups:
- name: neg-a
  zone: us-east1-b
  endpoints: [{ipAddress: 10.0.0.1, port: 80}]
backendServices:
- name: bs
  backends: [{group: neg-a}]
urlMaps:
- name: um
  defaultService: bs
frontends:
- name: edge
  address: 203.0.113.10:80
  urlMap: um
  anycastPrefixes: [203.0.113.0/24, "2001:db8:1::/48"]
`

func bgpEdit(t *testing.T, old, new string) string {
	t.Helper()
	if n := strings.Count(bgpConfig, old); n != 1 {
		t.Fatalf("edit %q matches %d times, want 1", old, n)
	}
	return strings.Replace(bgpConfig, old, new, 1)
}

func TestBGPConfigValid(t *testing.T) {
	cfg := mustParse(t, bgpConfig, "bgp.yaml")
	b := cfg.Spillway.BGP
	if b.LocalASN != 65001 || b.RouterID != "192.0.2.1" || b.Listen() != -1 || len(b.Neighbors) != 2 {
		t.Fatalf("decoded %+v", b)
	}
	n := b.Neighbors[0]
	if n.RemotePort() != 179 || n.HoldTime() != 9 || n.PasswordFile != "/etc/spillway/bgp-md5" || n.LocalAddress != "192.0.2.1" {
		t.Errorf("neighbor %+v", n)
	}
	if got := b.Neighbors[1].HoldTime(); got != 90 {
		t.Errorf("default hold time %d, want 90", got)
	}
	if b.HoldDown() != 30*time.Second || b.Drain() != 10*time.Second || b.MaxStale() != 0 || b.MinHealthyPercent() != 1 {
		t.Errorf("durations %v %v %v %v", b.HoldDown(), b.Drain(), b.MaxStale(), b.MinHealthyPercent())
	}
	if d := b.Degraded; d == nil || d.BelowHealthyCapacityPercent != 50 || d.ASPathPrepend != 3 || d.MED != nil {
		t.Errorf("degraded %+v", d)
	}
	if got := cfg.Frontends[0].Prefixes(); len(got) != 2 || got[1].String() != "2001:db8:1::/48" {
		t.Errorf("prefixes %v", got)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
	// Defaults when the optional fields are absent.
	min := mustParse(t, "spillway: {bgp: {localAsn: 4200000000, routerId: 10.0.0.1, neighbors: [{address: 10.0.0.2, peerAsn: 64512}]}}", "min.yaml")
	mb := min.Spillway.BGP
	if mb.Listen() != -1 || mb.HoldDown() != 30*time.Second || mb.Drain() != 10*time.Second || mb.Neighbors[0].RemotePort() != 179 {
		t.Errorf("defaults: listen %d hold-down %v drain %v port %d", mb.Listen(), mb.HoldDown(), mb.Drain(), mb.Neighbors[0].RemotePort())
	}
}

func TestBGPConfigErrors(t *testing.T) {
	tests := []struct {
		name, old, new string
		want           []string // substrings of the error
	}{
		{"asn missing", "localAsn: 65001", "localAsn: 0", []string{"spillway.bgp.localAsn: an AS number is required"}},
		{"asn too big", "localAsn: 65001", "localAsn: 4294967295", []string{"localAsn: 4294967295 is out of range", "between 1 and 4294967294"}},
		{"asn negative", "localAsn: 65001", "localAsn: -5", []string{"localAsn: -5 is out of range"}},
		{"as_trans", "localAsn: 65001", "localAsn: 23456", []string{"23456 is reserved"}},
		{"peer asn", "peerAsn: 65000\n      port", "peerAsn: 65535\n      port", []string{"neighbors[0].peerAsn: 65535 is reserved"}},
		{"router id v6", "routerId: 192.0.2.1", "routerId: 2001:db8::1", []string{`routerId: "2001:db8::1" is not an IPv4 address`, "32 bits"}},
		{"router id missing", "routerId: 192.0.2.1", "routerId: ''", []string{"routerId: a router ID is required"}},
		{"router id zero", "routerId: 192.0.2.1", "routerId: 0.0.0.0", []string{`"0.0.0.0" is not an IPv4 address`}},
		{"listen port", "listenPort: -1", "listenPort: 0", []string{"listenPort: 0 is out of range", "use -1"}},
		{"hold time 1", "holdTimeSec: 9", "holdTimeSec: 1", []string{"holdTimeSec: 1 is out of range", "0 (no keepalives) or 3 to 65535"}},
		{"hold time 2", "holdTimeSec: 9", "holdTimeSec: 2", []string{"holdTimeSec: 2 is out of range"}},
		{"duplicate neighbor", `address: "2001:db8::fe"`, `address: "192.0.2.254"`, []string{"192.0.2.254 is already neighbors[0]"}},
		{"neighbor address", "address: 192.0.2.254", "address: router1", []string{`address: "router1" is not an IP address`}},
		{"local address family", "localAddress: 192.0.2.1", "localAddress: 2001:db8::1", []string{"localAddress: 2001:db8::1 and the neighbor 192.0.2.254 are of different families"}},
		{"neighbor port", "port: 179", "port: 70000", []string{"port 70000 is out of range"}},
		{"no neighbors", "    neighbors:\n    - address: 192.0.2.254", "    neighbors: []\n    xneighbors:\n    - address: 192.0.2.254", []string{"unknown field"}},
		{"prefix parse", "[203.0.113.0/24,", "[203.0.113.0/33,", []string{`anycastPrefixes[0]: "203.0.113.0/33" is not a prefix`}},
		{"prefix host bits", "[203.0.113.0/24,", "[203.0.113.7/24,", []string{"203.0.113.7/24 has host bits set", "203.0.113.0/24"}},
		{"prefix duplicate", `"2001:db8:1::/48"]`, `"2001:db8:1::/48", 203.0.113.0/24]`, []string{"203.0.113.0/24 is already anycastPrefixes[0]"}},
		{"degraded both", "asPathPrepend: 3", "asPathPrepend: 3\n      med: 100", []string{"asPathPrepend and med are both set"}},
		{"degraded neither", "asPathPrepend: 3", "asPathPrepend: 0", []string{"no way to announce a degraded prefix is set"}},
		{"degraded below min", "belowHealthyCapacityPercent: 50", "belowHealthyCapacityPercent: 1", []string{"1 is not above minHealthyCapacityPercent (1)"}},
		{"prepend range", "asPathPrepend: 3", "asPathPrepend: 40", []string{"asPathPrepend: 40 is out of range"}},
		{"min percent", "minHealthyCapacityPercent: 1", "minHealthyCapacityPercent: 101", []string{"minHealthyCapacityPercent: 101 is out of range"}},
		{"drain", "drainSec: 10", "drainSec: 1000", []string{"drainSec: 1000 is out of range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(bgpEdit(t, tt.old, tt.new)), "bgp.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestBGPConfigNeedsNeighbors(t *testing.T) {
	_, err := Parse([]byte("spillway: {bgp: {localAsn: 65001, routerId: 192.0.2.1}}"), "b.yaml")
	if err == nil || !strings.Contains(err.Error(), "spillway.bgp.neighbors: at least one neighbor is required") {
		t.Errorf("error %v", err)
	}
}

func TestAnycastPrefixesNeedBGP(t *testing.T) {
	y := bgpConfig[strings.Index(bgpConfig, "networkEndpointGroups:"):]
	_, err := Parse([]byte(y), "b.yaml")
	if err == nil || !strings.Contains(err.Error(), "frontends[edge].anycastPrefixes: anycast prefixes need spillway.bgp") {
		t.Errorf("error %v", err)
	}
}

func TestAnycastPrefixWildcardAddress(t *testing.T) {
	// A frontend bound to every address can be reached on any prefix.
	for _, addr := range []string{"0.0.0.0:80", ":80", "[::]:80"} {
		y := bgpEdit(t, "address: 203.0.113.10:80", "address: \""+addr+"\"")
		y = strings.Replace(y, "[203.0.113.0/24,", "[198.51.100.0/24,", 1)
		cfg, err := Parse([]byte(y), "b.yaml")
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		if w := cfg.Warnings(); len(w) != 0 {
			t.Errorf("%s: warnings %q", addr, w)
		}
	}
}

func TestBGPWarnsPrefixWithoutFrontendAddress(t *testing.T) {
	cfg := mustParse(t, bgpEdit(t, "[203.0.113.0/24,", "[198.51.100.0/24,"), "b.yaml")
	w := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(w, "frontends[edge].anycastPrefixes[0]: 198.51.100.0/24 does not contain the frontend's address 203.0.113.10") {
		t.Errorf("warnings %q", w)
	}
}

func TestBGPWarnsFamilyWithoutNeighbor(t *testing.T) {
	y := bgpEdit(t, `    - {address: "2001:db8::fe", peerAsn: 65000}`+"\n", "")
	cfg := mustParse(t, y, "b.yaml")
	w := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(w, "frontends[edge].anycastPrefixes[1]: 2001:db8:1::/48 is announced to no neighbor: IPv6 prefixes go over IPv6 sessions") {
		t.Errorf("warnings %q", w)
	}
}
