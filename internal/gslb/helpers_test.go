package gslb_test

import (
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/gslb"
	"github.com/spillwaylb/spillway/internal/plan"
)

// header is the part of every test config outside dnsZones.
const header = `
frontends:
- {name: dns, address: "127.0.0.1:0", protocol: DNS}
`

// compile parses a config and builds a Server (not running).
func compile(t testing.TB, yaml string, opts gslb.Options) *gslb.Server {
	t.Helper()
	c, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("config:\n%v", err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if opts.Rand == nil {
		opts.Rand = rand.NewPCG(1, 2)
	}
	s, err := gslb.New(c, p, opts)
	if err != nil {
		t.Fatalf("gslb.New: %v", err)
	}
	return s
}

// start runs a Server on loopback until the test ends and returns it and
// its DNS address.
func start(t testing.TB, yaml string, opts gslb.Options) (*gslb.Server, string) {
	t.Helper()
	s := compile(t, yaml, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("server did not start")
	}
	return s, s.Addr("dns")
}

// query builds a query, optionally with EDNS (size > 0) and ECS.
func query(name string, qtype uint16, size uint16, ecs string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = true
	if size > 0 || ecs != "" {
		m.SetEdns0(max(size, 512), false)
	}
	if ecs != "" {
		pfx := netip.MustParsePrefix(ecs)
		e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, SourceNetmask: uint8(pfx.Bits()), Address: pfx.Addr().AsSlice(), Family: 1}
		if pfx.Addr().Is6() {
			e.Family = 2
		}
		m.IsEdns0().Option = append(m.IsEdns0().Option, e)
	}
	return m
}

// exchange sends m over network ("udp" or "tcp") to addr.
func exchange(t testing.TB, network, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 2 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s: %v", network, m.Question[0].Name, err)
	}
	return r
}

// ecsScope returns the scope of the reply's ECS option (-1 if none).
func ecsScope(r *dns.Msg) int {
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				return int(e.SourceScope)
			}
		}
	}
	return -1
}

// addrs returns the A/AAAA addresses in the answer section.
func addrs(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		}
	}
	return out
}

// fakeWriter is a dns.ResponseWriter that records what is written; it is
// a pure writer, not a network mock. tsig is what TsigStatus reports: a
// real dns.Server reports its verification of a signed query there.
type fakeWriter struct {
	remote net.Addr
	msg    []byte
	tsig   error
}

func (w *fakeWriter) LocalAddr() net.Addr  { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (w *fakeWriter) RemoteAddr() net.Addr { return w.remote }
func (w *fakeWriter) Write(b []byte) (int, error) {
	w.msg = append(w.msg[:0], b...)
	return len(b), nil
}
func (w *fakeWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
func (w *fakeWriter) Close() error        { return nil }
func (w *fakeWriter) TsigStatus() error   { return w.tsig }
func (w *fakeWriter) TsigTimersOnly(bool) {}
func (w *fakeWriter) Hijack()             {}
