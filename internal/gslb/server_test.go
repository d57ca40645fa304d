package gslb_test

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

var zoneYAML = header + `
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  soa: {minimum: 20}
  records:
  - {name: ns1, type: A, rrdatas: ["127.0.0.1"]}
  - {name: mail, type: A, rrdatas: ["192.0.2.25"]}
  - {name: _sip._udp, type: SRV, rrdatas: ["0 5 5060 sip.gslb.example."]}
  - {name: www, type: CNAME, rrdatas: [web.gslb.example.]}
  - {name: web, type: CNAME, rrdatas: [w.gslb.example.]}
  - {name: out, type: CNAME, rrdatas: [www.other.example.]}
  - {name: big, type: TXT, rrdatas: [` + bigTXT + `]}
  gslbNames:
  - name: w
    pool:
      members:
      - {name: a, address: 192.0.2.1, weight: 70}
      - {name: b, address: 192.0.2.2, weight: 20}
      - {name: c, address: 192.0.2.3, weight: 10}
  - name: geo
    policy: GEO
    pool:
      members:
      - {name: us, address: 198.51.100.1, region: us-east1}
      - {name: eu, address: 198.51.100.2, region: europe-west3}
      - {name: asia, address: 198.51.100.3, region: asia-southeast1}
    locations:
    - {cidr: 10.1.0.0/16, region: us-east1}
    - {cidr: 10.2.0.0/24, region: europe-west3}
    - {cidr: 10.2.0.128/25, region: asia-southeast1}
    - {cidr: 127.0.0.0/8, region: asia-southeast1}
  - name: many
    answerCount: 30
    pool:
      members:` + manyMembers + `
`

var bigTXT = func() string {
	var parts []string
	for i := range 8 {
		parts = append(parts, fmt.Sprintf(`\"%s\"`, strings.Repeat(string(rune('a'+i)), 250)))
	}
	return `"` + strings.Join(parts, " ") + `"`
}()

var manyMembers = func() string {
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "\n      - {name: m%d, address: \"2001:db8::%x\"}", i, i+1)
	}
	return b.String()
}()

// TestWeightedShares sends 10,000 real UDP queries and checks the 70/20/10
// split within 2 points.
func TestWeightedShares(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	dc := &dns.Conn{Conn: conn}
	counts := map[string]int{}
	const n = 10000
	t0 := time.Now()
	for range n {
		r, _, err := c.ExchangeWithConn(query("w.gslb.example.", dns.TypeA, 0, ""), dc)
		if err != nil {
			t.Fatal(err)
		}
		a := addrs(r)
		if len(a) != 1 {
			t.Fatalf("answer %v, want one address", a)
		}
		counts[a[0]]++
	}
	el := time.Since(t0)
	t.Logf("%d sequential UDP queries in %v (%.0f q/s)", n, el, n/el.Seconds())
	for ip, want := range map[string]float64{"192.0.2.1": 70, "192.0.2.2": 20, "192.0.2.3": 10} {
		got := 100 * float64(counts[ip]) / n
		t.Logf("%s: %.2f%% (want %.0f%%)", ip, got, want)
		if math.Abs(got-want) > 2 {
			t.Errorf("%s got %.2f%%, want %.0f%% ± 2", ip, got, want)
		}
	}
}

// TestECSScope checks which member GEO picks and the scope echoed, per
// policy and ECS form.
func TestECSScope(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	for _, tc := range []struct {
		name, qname, ecs string
		want             string
		scope            int
	}{
		{"geo /16 entry", "geo.gslb.example.", "10.1.2.0/24", "198.51.100.1", 16},
		{"geo /24 entry with a /25 inside", "geo.gslb.example.", "10.2.0.0/25", "198.51.100.2", 25},
		{"geo most specific /25", "geo.gslb.example.", "10.2.0.128/25", "198.51.100.3", 25},
		{"geo no entry: scope avoids the table", "geo.gslb.example.", "10.3.0.0/24", "", 16},
		{"geo source prefix 0", "geo.gslb.example.", "0.0.0.0/0", "", 0},
		{"weighted does not depend on the client", "w.gslb.example.", "10.1.2.0/24", "", 0},
		{"static record", "mail.gslb.example.", "10.1.2.0/24", "192.0.2.25", 0},
		{"no ECS: resolver address 127.0.0.1", "geo.gslb.example.", "", "198.51.100.3", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := exchange(t, "udp", addr, query(tc.qname, dns.TypeA, 1232, tc.ecs))
			if got := ecsScope(r); got != tc.scope {
				t.Errorf("scope %d, want %d", got, tc.scope)
			}
			if a := addrs(r); len(a) != 1 || tc.want != "" && a[0] != tc.want {
				t.Errorf("answer %v, want %s", a, tc.want)
			}
		})
	}
}

// TestProtocol covers NXDOMAIN, NODATA, REFUSED, CNAME chains, case and
// the header flags.
func TestProtocol(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	for _, tc := range []struct {
		name, qname string
		qtype       uint16
		rcode       int
		answers     int
		soa         bool
		aa          bool
	}{
		{"A record", "mail.gslb.example.", dns.TypeA, dns.RcodeSuccess, 1, false, true},
		{"case-insensitive", "MaIl.GsLb.ExAmPlE.", dns.TypeA, dns.RcodeSuccess, 1, false, true},
		{"NXDOMAIN", "nope.gslb.example.", dns.TypeA, dns.RcodeNameError, 0, true, true},
		{"NODATA", "mail.gslb.example.", dns.TypeTXT, dns.RcodeSuccess, 0, true, true},
		{"empty non-terminal is NODATA", "_udp.gslb.example.", dns.TypeA, dns.RcodeSuccess, 0, true, true},
		{"GSLB name NODATA for AAAA", "w.gslb.example.", dns.TypeAAAA, dns.RcodeSuccess, 0, true, true},
		{"outside zones is REFUSED", "www.example.com.", dns.TypeA, dns.RcodeRefused, 0, false, false},
		{"CNAME chain to GSLB name", "www.gslb.example.", dns.TypeA, dns.RcodeSuccess, 3, false, true},
		{"CNAME query", "www.gslb.example.", dns.TypeCNAME, dns.RcodeSuccess, 1, false, true},
		{"CNAME out of zone stops", "out.gslb.example.", dns.TypeA, dns.RcodeSuccess, 1, false, true},
		{"SOA at apex", "gslb.example.", dns.TypeSOA, dns.RcodeSuccess, 1, false, true},
		{"NS at apex", "gslb.example.", dns.TypeNS, dns.RcodeSuccess, 1, false, true},
		{"SRV", "_sip._udp.gslb.example.", dns.TypeSRV, dns.RcodeSuccess, 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, network := range []string{"udp", "tcp"} {
				r := exchange(t, network, addr, query(tc.qname, tc.qtype, 0, ""))
				if r.Rcode != tc.rcode || len(r.Answer) != tc.answers || r.Authoritative != tc.aa || r.RecursionAvailable {
					t.Errorf("%s: rcode %s answers %d aa %v ra %v; want %s %d aa %v ra false\n%v", network,
						dns.RcodeToString[r.Rcode], len(r.Answer), r.Authoritative, r.RecursionAvailable,
						dns.RcodeToString[tc.rcode], tc.answers, tc.aa, r)
				}
				hasSOA := len(r.Ns) == 1 && r.Ns[0].Header().Rrtype == dns.TypeSOA
				if hasSOA != tc.soa {
					t.Errorf("%s: SOA in authority %v, want %v", network, hasSOA, tc.soa)
				}
				if hasSOA && r.Ns[0].Header().Ttl != 20 {
					t.Errorf("negative TTL %d, want min(SOA TTL, minimum) = 20", r.Ns[0].Header().Ttl)
				}
			}
		})
	}
	// The glue of an in-zone name server comes with NS.
	r := exchange(t, "udp", addr, query("gslb.example.", dns.TypeNS, 0, ""))
	if len(r.Extra) != 1 {
		t.Errorf("NS answer extra %v, want the glue A of ns1", r.Extra)
	}
}

// TestTruncation: a large answer sets TC over UDP (512 bytes without
// EDNS; at most 1232 with it), with empty answer and authority sections,
// and comes whole over TCP.
func TestTruncation(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	for _, tc := range []struct {
		name    string
		qname   string
		qtype   uint16
		size    uint16
		tc      bool
		answers int
	}{
		// Truncated: an empty answer, as Knot and NSD send (issue 23).
		{"30 AAAA without EDNS", "many.gslb.example.", dns.TypeAAAA, 0, true, 0},
		{"30 AAAA with EDNS 1232", "many.gslb.example.", dns.TypeAAAA, 1232, false, 30},
		{"2 KB TXT with EDNS 4096 (capped at 1232)", "big.gslb.example.", dns.TypeTXT, 4096, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := exchange(t, "udp", addr, query(tc.qname, tc.qtype, tc.size, ""))
			if r.Truncated != tc.tc || len(r.Answer) != tc.answers || tc.tc && len(r.Ns) != 0 {
				t.Errorf("udp: tc %v answers %d, want tc %v answers %d", r.Truncated, len(r.Answer), tc.tc, tc.answers)
			}
			r.Compress = true // as sent
			if r.Len() > max(512, min(int(tc.size), gslb.MaxUDPSize)) {
				t.Errorf("udp reply is %d bytes", r.Len())
			}
			r = exchange(t, "tcp", addr, query(tc.qname, tc.qtype, tc.size, ""))
			want := 30
			if tc.qtype == dns.TypeTXT {
				want = 1
			}
			if r.Truncated || len(r.Answer) != want {
				t.Errorf("tcp: tc %v answers %d, want the full %d", r.Truncated, len(r.Answer), want)
			}
		})
	}
}

// TestFailoverOnRealBackend: the primary's health check stops answering;
// after three failed probes the name answers the secondary with the
// transition TTL; when the primary answers again it returns at 10%.
func TestFailoverOnRealBackend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	var probed atomic.Int64
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { probed.Add(1); ok(w, r) })
	backend := &httptest.Server{Listener: ln, Config: &http.Server{Handler: counted}}
	backend.Start()
	cfg := fmt.Sprintf(header+`
healthChecks:
- name: hc
  type: HTTP
  checkIntervalMs: 40
  timeoutMs: 30
  httpHealthCheck: {port: %d, requestPath: /healthz}
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  gslbNames:
  - name: api
    policy: FAILOVER
    pool:
      members:
      - {name: primary, address: 127.0.0.1, priority: 0, healthCheck: hc}
      - {name: dr, address: 192.0.2.2, priority: 1}
`, port)
	_, addr := start(t, cfg, gslb.Options{})
	ask := func() (string, uint32) {
		r := exchange(t, "udp", addr, query("api.gslb.example.", dns.TypeA, 0, ""))
		a := addrs(r)
		if len(a) != 1 {
			t.Fatalf("answer %v", a)
		}
		return a[0], r.Answer[0].Header().Ttl
	}
	eventually := func(what string, cond func() bool) time.Duration {
		t0 := time.Now()
		for time.Since(t0) < 30*time.Second {
			if cond() {
				return time.Since(t0)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
		return 0
	}
	if a, ttl := ask(); a != "127.0.0.1" || ttl != 30 {
		t.Fatalf("healthy primary: got %s ttl %d, want 127.0.0.1 ttl 30", a, ttl)
	}
	// Let probes see the primary healthy first: 3 answered (2 for the
	// healthy threshold, and the third's start means both were read).
	eventually("3 probes answered", func() bool { return probed.Load() >= 3 })
	backend.Close()
	d := eventually("failover to dr", func() bool { a, _ := ask(); return a == "192.0.2.2" })
	t.Logf("failed over %v after the backend stopped (3 × 40 ms probes)", d)
	if _, ttl := ask(); ttl != 15 {
		t.Errorf("ttl after failover %d, want transitionTtl 15", ttl)
	}

	ln2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Skipf("cannot rebind the backend port: %v", err)
	}
	srv := &http.Server{Handler: ok}
	go func() { _ = srv.Serve(ln2) }()
	defer srv.Close()
	eventually("primary back", func() bool { a, _ := ask(); return a == "127.0.0.1" })
	primary := 0
	const n = 1000
	for range n {
		if a, _ := ask(); a == "127.0.0.1" {
			primary++
		}
	}
	t.Logf("primary share in its first ramp step: %.1f%%", 100*float64(primary)/n)
	if primary < n*5/100 || primary > n*15/100 {
		t.Errorf("primary answered %d of %d during the 10%% step", primary, n)
	}
}

// TestTCPConnectionOutlivesManyQueries: one TCP connection carries many
// queries, pipelined and one after another (RFC 7766 §6.2.1); miekg's
// default of 128 queries a connection closed it.
func TestTCPConnectionOutlivesManyQueries(t *testing.T) {
	_, addr := start(t, header+`
dnsZones:
- name: gslb.example.
  nameServers: [ns1.gslb.example.]
  records:
  - {name: mail, type: A, rrdatas: [192.0.2.25]}
`, gslb.Options{})
	c, err := dns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	const n = 300
	// Pipelined: every query written before any answer is read.
	for i := range n {
		q := query("mail.gslb.example.", dns.TypeA, 0, "")
		q.Id = uint16(i + 1)
		if err := c.WriteMsg(q); err != nil {
			t.Fatalf("query %d: %v", i+1, err)
		}
	}
	seen := map[uint16]bool{}
	for i := range n {
		r, err := c.ReadMsg()
		if err != nil {
			t.Fatalf("answer %d of %d: %v", i+1, n, err)
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("answer %d: %v", i+1, r)
		}
		seen[r.Id] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct answers, want %d", len(seen), n)
	}
}
