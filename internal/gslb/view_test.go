package gslb

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
)

// TestBackendServiceFollowsView: a backendService name answers the
// frontend of the client's region while the engine View gives the
// service healthy capacity there, and the other region's frontend when
// not.
func TestBackendServiceFollowsView(t *testing.T) {
	c, err := config.Load("../../examples/dns/gslb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	st := control.New(p)
	view := engine.NewView(st)
	now := t0
	s, err := New(c, p, Options{Now: func() time.Time { return now }, View: func() *engine.View { return view }})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(ecs string) (string, uint32) {
		q := new(dns.Msg)
		q.SetQuestion("app.gslb.example.", dns.TypeA)
		q.SetEdns0(1232, false)
		pfx := netip.MustParsePrefix(ecs)
		q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1,
			SourceNetmask: uint8(pfx.Bits()), Address: pfx.Addr().AsSlice()})
		r := s.respond(q, netip.MustParseAddr("127.0.0.1"), false, s.now())
		if len(r.Answer) != 1 {
			t.Fatalf("answer %v", r.Answer)
		}
		return r.Answer[0].(*dns.A).A.String(), r.Answer[0].Header().Ttl
	}
	if a, _ := ask("198.51.100.0/24"); a != "127.0.0.11" {
		t.Fatalf("US client: %s, want the us-east1 frontend 127.0.0.11", a)
	}
	if a, _ := ask("203.0.113.0/24"); a != "127.0.0.12" {
		t.Fatalf("EU client: %s, want the europe-west3 frontend 127.0.0.12", a)
	}
	// The US backend's only endpoint fails its health check.
	for _, e := range p.Endpoints {
		if e.Group.Region == "us-east1" {
			for range 3 {
				st.ObserveProbe(e.ID, false, "down", now)
			}
		}
	}
	view = engine.NewView(st)
	if a, ttl := ask("198.51.100.0/24"); a != "127.0.0.12" || ttl != 15 {
		t.Fatalf("US client with us-east1 unhealthy: %s ttl %d, want 127.0.0.12 ttl 15", a, ttl)
	}
}
