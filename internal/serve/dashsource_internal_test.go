package serve

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
)

func TestDetailIndex(t *testing.T) {
	tokens := detailTokens()
	for i, tok := range tokens {
		if got := detailIndex(tok); got != i {
			t.Errorf("detailIndex(%q) = %d, want %d", tok, got, i)
		}
	}
	for _, tok := range []string{"", "fault_filter_abort", "response_sent_by_backend "} {
		if got := detailIndex(tok); got != nDetails-1 || tokens[got] != "other" {
			t.Errorf("detailIndex(%q) = %d, want %d (other)", tok, got, nDetails-1)
		}
	}
}

// seedPlan compiles the 70/30 seed.
func seedPlan(tb testing.TB) *plan.Plan {
	tb.Helper()
	cfg, err := config.Load("../../examples/seed-70-30/with-policy.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	p, err := plan.Compile(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestEndpointCountersSurviveReload: a new plan of the same config takes
// over the counters (by group and address); an endpoint of another plan
// counts nothing; errors are 5xx and no response.
func TestEndpointCountersSurviveReload(t *testing.T) {
	var es endpointStore
	p1, p2 := seedPlan(t), seedPlan(t)
	ec1 := es.forPlan(p1)
	if es.forPlan(p1) != ec1 {
		t.Fatal("forPlan made new counters for the same plan")
	}
	e := p1.Endpoints[3]
	for _, status := range []int{200, 503, 0, 404} {
		ec1.observe(&proxy.Record{Endpoint: e, Status: status})
	}
	ec2 := es.forPlan(p2)
	ec2.observe(&proxy.Record{Endpoint: e, Status: 200}) // p1's endpoint: not counted
	ec2.observe(&proxy.Record{Endpoint: p2.Endpoints[3], Status: 200})
	ec2.observe(&proxy.Record{Status: 503}) // no endpoint reached
	c := ec2.c[3]
	if got, gotErr := c.requests.Load(), c.errors.Load(); got != 5 || gotErr != 2 {
		t.Fatalf("endpoint %s: %d requests, %d errors; want 5, 2", e.Addr, got, gotErr)
	}
}

// BenchmarkDashCounters is the dashboard's per-request work in the
// recorder: the series' counters (with the statusDetails check) and the
// endpoint's counter.
func BenchmarkDashCounters(b *testing.B) {
	p := seedPlan(b)
	m := newRequestMetrics()
	fs := m.forFrontend(p, "fe-http")
	var es endpointStore
	eps := es.forPlan(p)
	svc := p.Services[0]
	rec := &proxy.Record{Service: svc, Backend: svc.Backends[0], Endpoint: svc.Backends[0].Endpoints[0], Status: 200,
		Details: sdSentByBackend, Attempts: 1}
	b.Run("series", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fs.of(rec).observe(rec)
		}
	})
	b.Run("series+endpoint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fs.of(rec).observe(rec)
			eps.observe(rec)
		}
	})
}
