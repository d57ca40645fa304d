package serve_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// TestFQDNEndpointResolvedAndHostSet: an INTERNET_FQDN_PORT endpoint is
// resolved through a real DNS server on loopback (spillway.resolver);
// proxied requests carry the name as Host; get-health shows the
// resolution, and a failing server keeps the last good address in use
// with the error shown.
func TestFQDNEndpointResolvedAndHostSet(t *testing.T) {
	var fail atomic.Bool
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if fail.Load() {
			m.Rcode = dns.RcodeServerFailure
		} else if q.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(127, 0, 0, 1)})
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })

	var host atomic.Value
	be := startBackend(t, "ext")
	be.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host.Store(r.Host)
		io.WriteString(w, "ext")
	})
	_, port, _ := net.SplitHostPort(be.addr)
	y := fmt.Sprintf(`spillway:
  resolver: {address: "%s", minTtlSec: 1, maxTtlSec: 2}
networkEndpointGroups:
- {name: neg-ext, region: us-east1, networkEndpointType: INTERNET_FQDN_PORT, endpoints: [{fqdn: api.example.test, port: %s}]}
backendServices:
- {name: bs, backends: [{group: neg-ext}]}
urlMaps: [{name: um, defaultService: bs}]
frontends: [{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um, region: us-east1}]
`, pc.LocalAddr(), port)
	s, url := startServer(t, servetest.Parse(t, y))
	get := func() int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != 200 {
		t.Fatalf("status %d, want 200", code)
	}
	if h, _ := host.Load().(string); h != "api.example.test" {
		t.Errorf("Host at the backend %q, want api.example.test", h)
	}
	res := getHealth(t, s).Resolutions
	if len(res) != 1 || res[0].Name != "api.example.test" || len(res[0].Addresses) != 1 || res[0].Addresses[0] != "127.0.0.1" {
		t.Fatalf("resolutions %+v", res)
	}
	fail.Store(true)
	waitFor(t, "the failed lookup in get-health", func() bool {
		r := getHealth(t, s).Resolutions
		return len(r) == 1 && strings.Contains(r[0].Error, "SERVFAIL") && len(r[0].Addresses) == 1
	})
	if code := get(); code != 200 {
		t.Fatalf("with the DNS server failing: status %d, want 200 on the last good address", code)
	}
}
