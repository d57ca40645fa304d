package fleet_test

import (
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/fleet"
	"github.com/spillwaylb/spillway/internal/fleet/fleettest"
)

// TestDNSFromFleetView (issue 11, item 7): a GSLB name backed by a
// backend service answers from the fleet's view, wherever the DNS server
// runs. With one prober per target, the US backend is probed by one
// instance only; when it fails, the other instance's DNS server (which
// never probes it) stops answering the US frontend for a US client, and
// answers it again once the backend recovers.
func TestDNSFromFleetView(t *testing.T) {
	t.Parallel()
	e := fleettest.Start(t)
	st := fleet.NewStore(dial(t, e), "")
	us, eu := newHCBackend(t, "127.0.0.41"), newHCBackend(t, "127.0.0.42")
	uh, up, _ := net.SplitHostPort(us.addr)
	eh, ep, _ := net.SplitHostPort(eu.addr)
	push(t, st, fmt.Sprintf(`healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 200, timeoutMs: 150, healthyThreshold: 2, unhealthyThreshold: 3, httpHealthCheck: {requestPath: /healthz}}
networkEndpointGroups:
- {name: neg-us, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
- {name: neg-eu, zone: europe-west3-a, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- name: web
  healthChecks: [hc]
  backends:
  - {group: neg-us, balancingMode: RATE, maxRatePerEndpoint: 1000}
  - {group: neg-eu, balancingMode: RATE, maxRatePerEndpoint: 1000}
urlMaps:
- {name: um, defaultService: web}
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
- {name: web-us, address: "127.0.0.43:0", protocol: HTTP, urlMap: um, region: us-east1}
- {name: web-eu, address: "127.0.0.44:0", protocol: HTTP, urlMap: um, region: europe-west3}
dnsZones:
- name: gslb.example.
  soa: {mname: ns1.gslb.example., rname: hostmaster.gslb.example., serial: 1, minimum: 30}
  nameServers: [ns1.gslb.example.]
  records:
  - {name: ns1, type: A, rrdatas: ["127.0.0.1"]}
  gslbNames:
  - name: www
    policy: GEO
    backendService: web
    locations:
    - {cidr: 198.51.100.0/24, region: us-east1}
    - {cidr: 203.0.113.0/24, region: europe-west3}
`, uh, up, eh, ep))
	ins := []*sharded{startSharded(t, e, "i1", 1), startSharded(t, e, "i2", 1)}
	keys := []string{us.addr + "/hc", eu.addr + "/hc"}
	slices.Sort(keys)
	eventually(t, "each target owned by exactly one instance", func() (bool, string) { return ownership(keys, ins, 1) })

	// obs is the instance that does not probe the US backend.
	obs := ins[0]
	if fleet.Owners(us.addr+"/hc", []string{"i1", "i2"}, 1)[0] == obs.name {
		obs = ins[1]
	}
	addr := obs.srv.DNSAddr("dns")
	if addr == "" {
		t.Fatal("DNS frontend not bound")
	}
	// answer is what obs's DNS server answers a US client (ECS
	// 198.51.100.0/24) for www.
	answer := func() (bool, string) {
		m := new(dns.Msg)
		m.SetQuestion("www.gslb.example.", dns.TypeA)
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(1232)
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.51.100.7").To4()})
		m.Extra = append(m.Extra, o)
		r, err := dns.Exchange(m, addr)
		if err != nil {
			return false, err.Error()
		}
		if len(r.Answer) == 0 {
			return false, "no answer: " + dns.RcodeToString[r.Rcode]
		}
		return true, r.Answer[0].(*dns.A).A.String()
	}
	want := func(ip string) func() (bool, string) {
		return func() (bool, string) {
			ok, got := answer()
			return ok && got == ip, got
		}
	}
	eventually(t, obs.name+" answers the US frontend to a US client", want("127.0.0.43"))
	probesBefore := us.probes.Load()

	us.failing.Store(true)
	eventually(t, obs.name+" (not probing the US backend) answers the EU frontend to a US client", want("127.0.0.44"))
	us.failing.Store(false)
	eventually(t, obs.name+" answers the US frontend again", want("127.0.0.43"))
	if got := endpointState(obs, us.addr); got != "HEALTHY" {
		t.Errorf("%s's /health has the US backend %s, want HEALTHY", obs.name, got)
	}
	t.Logf("the US backend got %d probes meanwhile, all from the other instance", us.probes.Load()-probesBefore)
}
