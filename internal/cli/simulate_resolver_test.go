package cli

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/sim"
)

// Without ECS a GEO name places the client by the resolver's address, as
// the server does with a real query's source. The simulated resolver is
// explicit: by default an address no locations entry contains, so the
// name answers as WEIGHTED (cdn.gslb.example: weights 1, 1 and 80, which
// is why sin-edge gets ~97.6% of those answers); --resolver inside a
// location places the client there; ECS, when sent, wins.
func TestSimulateDNSResolver(t *testing.T) {
	p, err := loadPlan(dnsExample)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		resolver, subnet string
		matched          bool
		entry, region    string
		want             map[string]float64 // member: share in percent
	}{
		{"", "", false, "", "", map[string]float64{"iad-edge": 100.0 / 82, "fra-edge": 100.0 / 82, "sin-edge": 8000.0 / 82}},
		{"203.0.113.9", "", true, "cidr 203.0.113.0/24", "europe-west3", map[string]float64{"fra-edge": 100}},
		{"203.0.113.9", "198.51.100.0/24", true, "cidr 198.51.100.0/24", "us-east1", map[string]float64{"iad-edge": 100}},
		{"100.64.1.1", "", false, "", "", map[string]float64{"sin-edge": 8000.0 / 82}},
	} {
		r, err := simulateDNS(p, sim.DNSOptions{Name: "cdn.gslb.example", Resolver: tc.resolver, ClientSubnet: tc.subnet, Queries: 4000, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		pl := r.Placement
		if !pl.Places || pl.Matched != tc.matched || pl.Entry != tc.entry || pl.Region != tc.region {
			t.Errorf("resolver %q, ECS %q: placement %+v, want matched %v by %q (%s)", tc.resolver, tc.subnet, pl, tc.matched, tc.entry, tc.region)
		}
		for m, want := range tc.want {
			if got := share(r.Members[m], r.Queries); got < want-1.5 || got > want+1.5 {
				t.Errorf("resolver %q, ECS %q: %s %.1f%%, want %.1f%%", tc.resolver, tc.subnet, m, got, want)
			}
		}
	}
}

// The default resolver is outside every configured range, and the same
// every time.
func TestDefaultResolver(t *testing.T) {
	p, err := loadPlan(dnsExample)
	if err != nil {
		t.Fatal(err)
	}
	got := defaultResolver(p.Config)
	if got != defaultResolver(p.Config) || got != "100.64.0.53" {
		t.Errorf("default resolver %s, want 100.64.0.53 (192.0.2.53, 198.51.100.53 and 203.0.113.53 are in the example's locations)", got)
	}
	a := netip.MustParseAddr(got)
	for _, z := range p.Config.DNSZones {
		for _, n := range z.GSLBNames {
			for _, l := range n.Locations {
				if pfx, err := netip.ParsePrefix(l.CIDR); err == nil && pfx.Contains(a) {
					t.Errorf("%s is inside %s's location %s", got, n.Name, l.CIDR)
				}
			}
		}
	}
	code, out, errs := runMain(t, "simulate", "--config", dnsExample, "--dns", "cdn.gslb.example", "--resolver", "192.0.2.1", "--queries", "100")
	if code != 0 || !strings.Contains(out, "client placed by resolver 192.0.2.1: it matches locations cidr 192.0.2.0/24 → client region asia-southeast1") {
		t.Errorf("exit %d, output does not say what the resolver matched:\n%s%s", code, out, errs)
	}
	if code, _, _ := runMain(t, "simulate", "--config", dnsExample, "--dns", "cdn.gslb.example", "--resolver", "nowhere"); code == 0 {
		t.Error("--resolver nowhere: exit 0, want an error")
	}
	if code, _, _ := runMain(t, "simulate", "--config", dnsExample, "--resolver", "192.0.2.1"); code == 0 {
		t.Error("--resolver without --dns: exit 0, want an error")
	}
}
