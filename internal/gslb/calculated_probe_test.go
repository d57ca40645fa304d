package gslb_test

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// A member with a 2-of-3 calculated check, probed on loopback: it stays
// up while one child's listener is closed and fails over when a second
// closes.
func TestCalculatedCheckProbes(t *testing.T) {
	var lns []net.Listener
	var probes [3]atomic.Int64 // connections each child's listener accepted
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				probes[i].Add(1)
				c.Close()
			}
		}()
		lns = append(lns, ln)
		t.Cleanup(func() { ln.Close() })
	}
	port := func(i int) int { return lns[i].Addr().(*net.TCPAddr).Port }
	var hcs string
	for i := range 3 {
		hcs += fmt.Sprintf("- {name: hc%d, type: TCP, checkIntervalMs: 30, timeoutMs: 25, unhealthyThreshold: 2, healthyThreshold: 1, tcpHealthCheck: {port: %d}}\n", i, port(i))
	}
	cfg := header + "healthChecks:\n" + hcs + `
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: api
    policy: FAILOVER
    pool:
      members:
      - name: primary
        address: 192.0.2.1
        priority: 0
        healthChecks:
        - calculated:
            minHealthy: 2
            checks: [{name: hc0, address: 127.0.0.1}, {name: hc1, address: 127.0.0.1}, {name: hc2, address: 127.0.0.1}]
      - {name: dr, address: 192.0.2.2, priority: 1}
`
	s, addr := start(t, cfg, gslb.Options{})
	if n := len(s.Checks()); n != 3 {
		t.Fatalf("%d probe targets, want the 3 children", n)
	}
	ask := func() string {
		a := addrs(exchange(t, "udp", addr, query("api.gslb.example.", dns.TypeA, 0, "")))
		if len(a) != 1 {
			t.Fatalf("answer %v", a)
		}
		return a[0]
	}
	if a := ask(); a != "192.0.2.1" {
		t.Fatalf("every child up: %s, want primary", a)
	}
	lns[0].Close()
	// Past 2 failed probes of hc0: the other children, probed at the same
	// interval, have had 4 each since (a wait on the probes, not a guess
	// of how long they take). 1 of 3 down keeps 2 of 3 up.
	since := probes[1].Load()
	deadline := time.Now().Add(30 * time.Second)
	for probes[1].Load() < since+4 {
		if time.Now().After(deadline) {
			t.Fatal("hc1 not probed 4 times in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 20 {
		if a := ask(); a != "192.0.2.1" {
			t.Fatalf("2 of 3 children up: %s, want primary", a)
		}
	}
	lns[1].Close()
	deadline = time.Now().Add(30 * time.Second)
	for ask() != "192.0.2.2" {
		if time.Now().After(deadline) {
			t.Fatal("1 of 3 children up: still answering primary")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
