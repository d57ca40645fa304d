package gslb_test

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// Issue 13, defect 2 (fresh process): a member nobody has probed yet is
// not answered when it is dead. The server probes every member once
// before it answers its first query (with a short bounded wait), so a
// fresh start does not send clients to a dead member until the first
// scheduled probe, which with a 60 s interval may be a minute away.
func TestFreshServerDoesNotAnswerADeadMember(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, deadPort, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close() // nothing listens there now: the check fails at once
	live, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	go func() {
		for {
			c, err := live.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, livePort, _ := net.SplitHostPort(live.Addr().String())
	yaml := header + fmt.Sprintf(`healthChecks:
- {name: dead, type: TCP, checkIntervalSec: 60, tcpHealthCheck: {port: %s}}
- {name: live, type: TCP, checkIntervalSec: 60, tcpHealthCheck: {port: %s}}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: w
    pool:
      members:
      - {name: a, address: 127.0.0.1, healthCheck: dead}
      - {name: b, address: 127.0.0.2, healthCheck: live}
`, deadPort, livePort)
	for i := range 3 { // three fresh servers: the first probe's random offset must not matter
		_, addr := start(t, yaml, gslb.Options{})
		for range 20 {
			r := exchange(t, "udp", addr, query("w.gslb.example.", dns.TypeA, 0, ""))
			got := strings.Join(addrs(r), ",")
			if got != "127.0.0.2" {
				t.Fatalf("server %d: answers %q right after start, want only the live member 127.0.0.2", i, got)
			}
		}
	}
}
