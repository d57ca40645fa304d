package serve_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// The DNS GSLB answers from the same View as the proxy: when the US
// region's only backend fails its health check, the name answered for a
// US client moves to the EU frontend.
func TestDNSFollowsProxyHealth(t *testing.T) {
	us := startBackend(t, "us")
	eu := startBackend(t, "eu")
	uh, up, _ := net.SplitHostPort(us.addr)
	eh, ep, _ := net.SplitHostPort(eu.addr)
	cfg := fmt.Sprintf(`healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 50, timeoutMs: 40, httpHealthCheck: {requestPath: /healthz}}
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
- {name: web-us, address: "127.0.0.21:0", protocol: HTTP, urlMap: um, region: us-east1}
- {name: web-eu, address: "127.0.0.22:0", protocol: HTTP, urlMap: um, region: europe-west3}
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
`, uh, up, eh, ep)
	c, err := config.Parse([]byte(cfg), "dns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startServer(t, c)
	addr := s.DNSAddr("dns")
	if addr == "" {
		t.Fatal("DNS frontend not bound")
	}
	ask := func() string {
		m := new(dns.Msg)
		m.SetQuestion("www.gslb.example.", dns.TypeA)
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(1232)
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.51.100.7").To4()})
		m.Extra = append(m.Extra, o)
		r, err := dns.Exchange(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Answer) == 0 {
			return "no answer: " + dns.RcodeToString[r.Rcode]
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	waitFor(t, "US client answered with the US frontend", func() bool { return ask() == "127.0.0.21" })
	us.unready.Store(true)
	waitFor(t, "US client moved to the EU frontend", func() bool { return ask() == "127.0.0.22" })
	// Recovery: the US frontend comes back (gradually, through the
	// failback ramp).
	us.unready.Store(false)
	waitFor(t, "US frontend answered again", func() bool { return ask() == "127.0.0.21" })
}

// A reload keeps the DNS members' health (issue 13, defect 2): a pool
// member that is down stays unanswered right after the reload, instead
// of being answered again until the new generation's probes catch up
// (3 failures, about a second here).
func TestDNSReloadKeepsMemberHealth(t *testing.T) {
	be := startBackend(t, "a")
	host, port, _ := net.SplitHostPort(be.addr)
	cfg := fmt.Sprintf(`healthChecks:
- {name: hc, type: HTTP, checkIntervalMs: 300, timeoutMs: 200, httpHealthCheck: {port: %s, requestPath: /healthz}}
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: www
    pool:
      members:
      - {name: a, address: %s, healthCheck: hc}
      - {name: b, address: 192.0.2.2}
`, port, host)
	c, err := config.Parse([]byte(cfg), "dns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := servetest.Run(t, c, serve.Options{WatchInterval: -1})
	addr := s.DNSAddr("dns")
	// answersA reports whether any of n answers is member a.
	answersA := func(n int) bool {
		for range n {
			m := new(dns.Msg)
			m.SetQuestion("www.gslb.example.", dns.TypeA)
			r, err := dns.Exchange(m, s.DNSAddr("dns"))
			if err != nil {
				t.Fatal(err)
			}
			for _, rr := range r.Answer {
				if a, ok := rr.(*dns.A); ok && a.A.String() == host {
					return true
				}
			}
		}
		return false
	}
	waitFor(t, "member a answered", func() bool { return answersA(20) })
	be.unready.Store(true)
	waitFor(t, "member a down", func() bool { return !answersA(40) })
	if err := s.Reload(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if addr == "" || s.DNSAddr("dns") == "" {
		t.Fatal("DNS frontend not bound")
	}
	if answersA(100) {
		t.Fatal("member a, down before the reload, is answered right after it")
	}
}

// Issue 13, defect 4: a reload keeps the DNS sockets. An open TCP
// connection carries on across reloads (answered by the new config: a
// record added by the reload resolves on the same connection), and UDP
// queries sent back to back during a run of reloads are all answered,
// where rebinding the sockets dropped some and closed every connection.
func TestDNSReloadKeepsSockets(t *testing.T) {
	const base = `frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: a, type: A, rrdatas: ["192.0.2.1"]}
`
	parse := func(extra string) *config.Config {
		c, err := config.Parse([]byte(base+extra), "dns.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	s := servetest.Run(t, parse(""), serve.Options{WatchInterval: -1})
	addr := s.DNSAddr("dns")

	conn, err := dns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ask := func(c *dns.Conn, name string) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if err := c.WriteMsg(m); err != nil {
			return nil, err
		}
		return c.ReadMsg()
	}
	if r, err := ask(conn, "a.gslb.example."); err != nil || len(r.Answer) != 1 {
		t.Fatalf("before the reload: %v %v", r, err)
	}

	// UDP, back to back, while reloading 5 times.
	udp, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	reloads := make(chan error, 1)
	go func() {
		for i := range 5 {
			time.Sleep(20 * time.Millisecond)
			if err := s.Reload(t.Context(), parse(fmt.Sprintf("  - {name: r%d, type: A, rrdatas: [\"192.0.2.%d\"]}\n", i, 10+i))); err != nil {
				reloads <- err
				return
			}
		}
		reloads <- nil
	}()
	lost := 0
	buf := make([]byte, 512)
	for i := range 300 {
		m := new(dns.Msg)
		m.SetQuestion("a.gslb.example.", dns.TypeA)
		m.Id = uint16(i)
		b, _ := m.Pack()
		udp.SetDeadline(time.Now().Add(time.Second))
		if _, err := udp.Write(b); err != nil {
			lost++
			continue
		}
		if _, err := udp.Read(buf); err != nil {
			lost++
		}
	}
	if err := <-reloads; err != nil {
		t.Fatal(err)
	}
	if lost > 0 {
		t.Errorf("%d of 300 UDP queries lost during 5 reloads; the sockets must stay open", lost)
	}
	// The TCP connection opened before the reloads still works, and sees
	// the last config.
	r, err := ask(conn, "r4.gslb.example.")
	if err != nil {
		t.Fatalf("TCP connection after the reloads: %v", err)
	}
	if len(r.Answer) != 1 {
		t.Errorf("r4, added by the last reload, on the old connection: %v", r)
	}
	if s.DNSAddr("dns") != addr {
		t.Errorf("address changed from %s to %s", addr, s.DNSAddr("dns"))
	}
}

// DNS queries are counted by name, type, rcode and answering member, and
// member health is exported, as seen from a real resolver's queries.
func TestDNSMetrics(t *testing.T) {
	us := startBackend(t, "us")
	uh, up, _ := net.SplitHostPort(us.addr)
	cfg := fmt.Sprintf(`networkEndpointGroups:
- {name: neg-us, zone: us-east1-b, endpoints: [{ipAddress: %s, port: %s}]}
backendServices:
- name: web
  backends:
  - {group: neg-us, balancingMode: RATE, maxRatePerEndpoint: 1000}
urlMaps:
- {name: um, defaultService: web}
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
- {name: web-us, address: "127.0.0.21:0", protocol: HTTP, urlMap: um, region: us-east1}
dnsZones:
- name: gslb.example.
  soa: {mname: ns1.gslb.example., rname: hostmaster.gslb.example., serial: 1, minimum: 30}
  nameServers: [ns1.gslb.example.]
  records:
  - {name: ns1, type: A, rrdatas: ["127.0.0.1"]}
  gslbNames:
  - {name: www, policy: GEO, backendService: web}
`, uh, up)
	c, err := config.Parse([]byte(cfg), "dns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startServer(t, c)
	addr := s.DNSAddr("dns")
	ask := func(name string, qtype uint16) int {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		r, err := dns.Exchange(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		return r.Rcode
	}
	for range 7 {
		if rc := ask("www.gslb.example.", dns.TypeA); rc != dns.RcodeSuccess {
			t.Fatalf("www: rcode %s", dns.RcodeToString[rc])
		}
	}
	for range 3 {
		ask("ns1.gslb.example.", dns.TypeA)
	}
	for _, n := range []string{"a.gslb.example.", "b.gslb.example."} {
		if rc := ask(n, dns.TypeA); rc != dns.RcodeNameError {
			t.Fatalf("%s: rcode %s", n, dns.RcodeToString[rc])
		}
	}
	ask("www.gslb.example.", 65280) // a private-use type
	m := metricsText(t, s)
	for series, want := range map[string]float64{
		`spillway_dns_queries_total{member="web-us",name="www.gslb.example.",rcode="NOERROR",type="A"}`: 7,
		`spillway_dns_queries_total{member="",name="ns1.gslb.example.",rcode="NOERROR",type="A"}`:       3,
		`spillway_dns_queries_total{member="",name="",rcode="NXDOMAIN",type="A"}`:                       2,
		`spillway_dns_queries_total{member="",name="www.gslb.example.",rcode="NOERROR",type="OTHER"}`:   1,
		`spillway_dns_member_healthy{member="web-us",name="www.gslb.example."}`:                         1,
	} {
		if got := promValue(m, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// Scraping /metrics and the dashboard's /ui/state while reloads swap the
// DNS server reads the server under the lock the swap writes it under
// (run with -race; review finding 5).
func TestDNSSwapWhileScraping(t *testing.T) {
	const base = `frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: a, type: A, rrdatas: ["192.0.2.1"]}
`
	parse := func(extra string) *config.Config {
		c, err := config.Parse([]byte(base+extra), "dns.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	s := servetest.Run(t, parse(""), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	done := make(chan error, 1)
	go func() {
		for i := range 5 {
			if err := s.Reload(t.Context(), parse(fmt.Sprintf("  - {name: r%d, type: A, rrdatas: [\"192.0.2.%d\"]}\n", i, 10+i))); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for scraped := 0; ; scraped++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		for _, p := range []string{"/metrics", "/ui/state"} {
			r, err := http.Get("http://" + s.AdminAddr() + p)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode != 200 {
				t.Fatalf("%s: %d", p, r.StatusCode)
			}
		}
	}
}

// Response rate limiting's counters reach /metrics: a flood of ten
// denials from one address at 2 per second, slip 2, is 2 answered, 4
// slipped and 4 dropped; the other classes show zeros, and the signature
// cap its two transports.
func TestDNSRateLimitMetrics(t *testing.T) {
	c, err := config.Parse([]byte(`frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: ns1, type: A, rrdatas: ["127.0.0.1"]}
spillway:
  dnsMaxDenialSignaturesPerSecond: 100
  dnsResponseRateLimit: {responsesPerSecond: 2, slip: 2}
`), "dns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The limiter's credit refills with the clock: a stopped one keeps
	// the counts exact however slowly a loaded machine sends the ten
	// queries.
	stopped := time.Now()
	s := servetest.Run(t, c, serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1, Now: func() time.Time { return stopped }})
	conn, err := net.Dial("udp", s.DNSAddr("dns"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 10 {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("r%d.gslb.example.", i), dns.TypeA)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]float64{
		`spillway_dns_rrl_limited_total{action="slipped",class="nxdomain"}`: 4,
		`spillway_dns_rrl_limited_total{action="dropped",class="nxdomain"}`: 4,
		`spillway_dns_rrl_limited_total{action="dropped",class="answer"}`:   0,
		`spillway_dns_rrl_evictions_total`:                                  0,
		`spillway_dns_denial_signatures_refused_total{transport="udp"}`:     0,
		`spillway_dns_denial_signatures_refused_total{transport="tcp"}`:     0,
	}
	var m string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m = metricsText(t, s); promValue(m, `spillway_dns_rrl_limited_total{action="dropped",class="nxdomain"}`) == 4 {
			break
		}
	}
	for series, v := range want {
		if got := promValue(m, series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
}
