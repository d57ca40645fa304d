package gslb_test

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// Issue 13, defect 1: a DNS frontend bound to a wildcard address answers
// UDP from the address each query arrived on. A resolver drops a reply
// from any other address; a connected UDP socket (as miekg's client and
// dig use) does not even receive it. The server listens on 0.0.0.0 (and
// [::]) and is queried at several loopback addresses.
func TestWildcardBindRepliesFromArrivalAddress(t *testing.T) {
	for _, c := range []struct {
		bind    string
		targets []string
	}{
		{"0.0.0.0:0", []string{"127.0.0.1", "127.0.0.5", "127.3.2.1"}},
		{"[::]:0", []string{"::1", "127.0.0.7"}},
	} {
		t.Run(c.bind, func(t *testing.T) {
			if strings.HasPrefix(c.bind, "[") {
				if ln, err := net.ListenPacket("udp6", "[::1]:0"); err != nil {
					t.Skip("no IPv6 loopback")
				} else {
					ln.Close()
				}
			}
			yaml := strings.Replace(zoneYAML, `address: "127.0.0.1:0"`, `address: "`+c.bind+`"`, 1)
			srv, _ := start(t, yaml, gslb.Options{})
			port := netip.MustParseAddrPort(srv.Addr("dns")).Port()
			for _, ip := range c.targets {
				to := netip.AddrPortFrom(netip.MustParseAddr(ip), port).String()
				cl := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
				r, _, err := cl.Exchange(query("mail.gslb.example.", dns.TypeA, 0, ""), to)
				if err != nil {
					t.Errorf("query to %s: %v (the reply came from another address, or none came)", to, err)
					continue
				}
				if len(r.Answer) != 1 {
					t.Errorf("query to %s: %v", to, r)
				}
			}
		})
	}
}
