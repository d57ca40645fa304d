package resolve_test

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/resolve"
)

// zone is a real DNS server on loopback whose records a test changes.
type zone struct {
	mu      sync.Mutex
	a       map[string][]string // name → IPv4 addresses
	ttl     uint32
	fail    bool // answer SERVFAIL
	queries int
	addr    string
}

func startZone(t *testing.T) *zone {
	t.Helper()
	z := &zone{a: map[string][]string{}, ttl: 30}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	z.addr = pc.LocalAddr().String()
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(z.serve)}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return z
}

func (z *zone) serve(w dns.ResponseWriter, q *dns.Msg) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.queries++
	m := new(dns.Msg)
	m.SetReply(q)
	if z.fail {
		m.Rcode = dns.RcodeServerFailure
		_ = w.WriteMsg(m)
		return
	}
	name := strings.TrimSuffix(q.Question[0].Name, ".")
	ips, ok := z.a[name]
	if !ok {
		m.Rcode = dns.RcodeNameError
	}
	if q.Question[0].Qtype == dns.TypeA {
		for _, ip := range ips {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: z.ttl}, A: net.ParseIP(ip)})
		}
	}
	_ = w.WriteMsg(m)
}

func (z *zone) set(f func(z *zone)) {
	z.mu.Lock()
	defer z.mu.Unlock()
	f(z)
}

// TestDNSLookup: every address and the TTL come back from a real server.
func TestDNSLookup(t *testing.T) {
	z := startZone(t)
	z.set(func(z *zone) { z.a["run.example.test"] = []string{"127.0.0.9", "127.0.0.8"}; z.ttl = 42 })
	tests := []struct {
		name    string
		want    []string
		wantTTL time.Duration
		wantErr string
	}{
		{"run.example.test", []string{"127.0.0.8", "127.0.0.9"}, 42 * time.Second, ""},
		{"missing.example.test", nil, 0, "NXDOMAIN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ans, err := resolve.DNS{Server: z.addr}.Lookup(context.Background(), tt.name)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range ans.Addrs {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tt.want) || ans.TTL != tt.wantTTL {
				t.Errorf("got %v ttl %v, want %v ttl %v", got, ans.TTL, tt.want, tt.wantTTL)
			}
		})
	}
}

// TestCacheRespectsTTL: a name is looked up again only when its TTL,
// clamped to [min, max], runs out; new addresses are reported as a
// change; a failed lookup keeps the last good addresses and shows the
// error, retried after min.
func TestCacheRespectsTTL(t *testing.T) {
	z := startZone(t)
	z.set(func(z *zone) { z.a["api.example.test"] = []string{"127.0.0.5"}; z.ttl = 30 })
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := resolve.NewCache(resolve.DNS{Server: z.addr}, 5*time.Second, 60*time.Second, func() time.Time { return now })
	c.SetNames([]string{"api.example.test"})
	ctx := context.Background()
	queries := func() int { z.mu.Lock(); defer z.mu.Unlock(); return z.queries }
	addrs := func() []netip.Addr { return c.Resolved()["api.example.test"] }

	if !c.Refresh(ctx) || len(addrs()) != 1 || addrs()[0] != netip.MustParseAddr("127.0.0.5") {
		t.Fatalf("first refresh: %v", addrs())
	}
	q := queries()
	z.set(func(z *zone) { z.a["api.example.test"] = []string{"127.0.0.5", "127.0.0.6"} })
	now = now.Add(29 * time.Second)
	if c.Refresh(ctx) || queries() != q {
		t.Fatalf("looked up again before the TTL ran out (%d queries, was %d)", queries(), q)
	}
	now = now.Add(time.Second)
	if !c.Refresh(ctx) || len(addrs()) != 2 {
		t.Fatalf("after the TTL: change not reported, addresses %v", addrs())
	}
	// A server failure keeps the last good addresses and is visible.
	z.set(func(z *zone) { z.fail = true })
	now = now.Add(30 * time.Second)
	if c.Refresh(ctx) || len(addrs()) != 2 {
		t.Fatalf("after a failed lookup: addresses %v, want the last good two", addrs())
	}
	st := c.Status()[0]
	if !strings.Contains(st.Error, "SERVFAIL") || st.Failures != 1 || len(st.Addrs) != 2 {
		t.Fatalf("status after failure: %+v", st)
	}
	if want := now.Add(5 * time.Second); !st.Next.Equal(want) {
		t.Errorf("retry at %v, want the floor, %v", st.Next, want)
	}
	// The ceiling: a TTL of a day is held to 60 s.
	z.set(func(z *zone) { z.fail = false; z.ttl = 86400 })
	now = now.Add(5 * time.Second)
	c.Refresh(ctx)
	if st := c.Status()[0]; st.Error != "" || !st.Next.Equal(now.Add(60*time.Second)) {
		t.Errorf("after recovery with TTL 86400: %+v, want no error and next in 60s", st)
	}
}
