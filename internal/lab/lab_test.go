package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/probe"
	"github.com/spillwaylb/spillway/internal/sim"
)

func seedConfig(t *testing.T, name string) Config {
	t.Helper()
	cs, err := SeedConfigs([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	return cs[0]
}

func seedPlan(t *testing.T, name string) *plan.Plan {
	t.Helper()
	cfg, err := seedConfig(t, name).Parse()
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// share returns a zone's or region's share in percent.
func share(r *Result, n int) float64 { return r.Share(n) }

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.1f%%, want %.1f ± %.1f", what, got, want, tol)
	}
}

// waitGoroutines waits (up to 30 s) for the goroutine count to fall back
// to at most n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutines leaked: %d > %d\n%s", runtime.NumGoroutine(), n, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBackends(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := context.Background()
	bs, err := StartBackends(ctx, seedPlan(t, "with-policy"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(bs.Addrs()); n != 18 {
		t.Fatalf("started %d backends, want 18 (6 zones × 3 instances)", n)
	}
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	get := func(addr, path string) (int, string, error) {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if path == "/healthz" {
			req.Header.Set("User-Agent", probe.UserAgent)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	const a1 = "127.1.1.1:18080"
	if code, body, err := get(a1, "/"); err != nil || code != 200 || !strings.Contains(body, `{"zone":"us-south1-a","instance":"us-south1-a-vm1"}`) {
		t.Fatalf("GET / = %d %q %v", code, body, err)
	}
	if code, body, err := get(a1, "/healthz"); err != nil || code != 200 || body != "ok" {
		t.Fatalf("GET /healthz = %d %q %v", code, body, err)
	}

	// Mode 1: the health path fails, / keeps working.
	if err := bs.FailHealth("us-south1-a"); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := get(a1, "/healthz"); code != 503 {
		t.Errorf("failed zone: /healthz = %d, want 503", code)
	}
	if code, _, _ := get(a1, "/"); code != 200 {
		t.Errorf("failed zone: / = %d, want 200", code)
	}
	if code, _, _ := get("127.1.2.1:18080", "/healthz"); code != 200 {
		t.Errorf("other zone: /healthz = %d, want 200", code)
	}

	// Mode 2: listeners and open connections close.
	if err := bs.StopListeners("us-south1-a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(a1, "/"); err == nil {
		t.Errorf("stopped zone still answers")
	}
	if err := bs.Recover(ctx, "us-south1-a"); err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(a1, "/healthz"); err != nil || code != 200 {
		t.Errorf("recovered zone: /healthz = %d %v, want 200", code, err)
	}
	// One endpoint stops; its zone's others keep answering.
	if err := bs.StopEndpoint(a1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := get(a1, "/"); err == nil {
		t.Errorf("stopped endpoint still answers")
	}
	if code, _, err := get("127.1.1.2:18080", "/"); err != nil || code != 200 {
		t.Errorf("the stopped endpoint's neighbour: / = %d %v, want 200", code, err)
	}
	if err := bs.StartEndpoint(ctx, a1); err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(a1, "/"); err != nil || code != 200 {
		t.Errorf("restarted endpoint: / = %d %v, want 200", code, err)
	}
	if z := bs.ZoneOf(a1); z != "us-south1-a" {
		t.Errorf("ZoneOf(%s) = %q", a1, z)
	}
	if err := bs.StopEndpoint("127.9.9.9:1"); err == nil {
		t.Errorf("StopEndpoint of an unknown address: no error")
	}
	// pad=N makes the answer about N bytes longer.
	if code, body, err := get(a1, "/?pad=5000"); err != nil || code != 200 || len(body) < 5000 || !strings.Contains(body, `"zone":"us-south1-a"`) {
		t.Errorf("GET /?pad=5000 = %d, %d bytes, %v", code, len(body), err)
	}
	if err := bs.FailHealth("us-nowhere1-z"); err == nil {
		t.Errorf("FailHealth of an unknown zone: no error")
	}
	client.CloseIdleConnections()
	bs.Close()
	ln, err := net.Listen("tcp", a1)
	if err != nil {
		t.Fatalf("address not released after Close: %v", err)
	}
	ln.Close()
	waitGoroutines(t, before)
}

func TestBackendsBindError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.1.3.2:18080")
	if err != nil {
		t.Skip(err)
	}
	defer ln.Close()
	_, err = StartBackends(context.Background(), seedPlan(t, "with-policy"))
	if err == nil || !strings.Contains(err.Error(), "127.1.3.2:18080") || !strings.Contains(err.Error(), "us-south1-c-vm2") {
		t.Fatalf("err = %v, want a clear error naming the address and instance", err)
	}
	// Everything started before the failure was closed again.
	ln2, err := net.Listen("tcp", "127.1.1.1:18080")
	if err != nil {
		t.Fatalf("earlier backends not closed: %v", err)
	}
	ln2.Close()
}

// TestLab is a reduced lab: real backends, real serve, real HTTPS.
func TestLab(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	before := runtime.NumGoroutine()
	ctx := context.Background()
	var progress bytes.Buffer
	rep, err := Run(ctx, Options{
		Configs:   []Config{seedConfig(t, "with-policy")},
		Scenarios: [][]string{nil, {"us-south1-a", "us-south1-b"}},
		Requests:  200,
		Progress:  &progress,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	steady, ab := &rep.Scenarios[0], &rep.Scenarios[1]
	for _, z := range []string{"us-south1-a", "us-south1-b", "us-south1-c"} {
		near(t, "with-policy steady "+z, share(steady, steady.Zones[z]), 23.3, 8)
	}
	for _, z := range []string{"us-east4-a", "us-east4-b", "us-east4-c"} {
		near(t, "with-policy steady "+z, share(steady, steady.Zones[z]), 10, 8)
	}
	near(t, "with-policy a,b down us-south1-c", share(ab, ab.Zones["us-south1-c"]), 70, 8)
	if ab.Zones["us-south1-a"] != 0 || ab.Zones["us-south1-b"] != 0 {
		t.Errorf("with-policy a,b down: us-south1-a/b served %d/%d requests, want 0", ab.Zones["us-south1-a"], ab.Zones["us-south1-b"])
	}
	if !strings.Contains(progress.String(), "with-policy / us-south1-a,b down: waiting for convergence...") {
		t.Errorf("progress:\n%s", progress.String())
	}

	// Full outage with fail mode 2 (listeners stop).
	rep2, err := Run(ctx, Options{
		Configs:   []Config{seedConfig(t, "baseline"), seedConfig(t, "no-policy")},
		Scenarios: [][]string{{"us-south1-a", "us-south1-b", "us-south1-c"}},
		Requests:  200,
		FailMode:  FailListeners,
	})
	if err != nil {
		t.Fatal(err)
	}
	base, np := &rep2.Scenarios[0], &rep2.Scenarios[1]
	near(t, "baseline outage 503", share(base, base.Status["503"]), 70, 10)
	near(t, "baseline outage us-east4", share(base, base.Regions["us-east4"]), 30, 10)
	if np.Regions["us-east4"] != np.Requests {
		t.Errorf("no-policy outage: us-east4 served %d of %d, want all (status %v)", np.Regions["us-east4"], np.Requests, np.Status)
	}

	var out bytes.Buffer
	if err := WriteTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	waitGoroutines(t, before)
}

// TestSimulateAndLabAgree: the simulator and the real lab run the same
// engine, so they must agree.
// The lab (real proxy, real probes) and simulate agree zone by zone, for
// SPRAY_TO_REGION and for WATERFALL_BY_REGION, where simulate is told the
// lab's client address (127.0.0.1) so it binds to the same proxies.
func TestSimulateAndLabAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	down := []string{"us-south1-a"}
	names := []string{"with-policy", "no-policy"}
	var cfgs []Config
	for _, n := range names {
		cfgs = append(cfgs, seedConfig(t, n))
	}
	rep, err := Run(context.Background(), Options{Configs: cfgs, Scenarios: [][]string{down}, Requests: 300})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		got := &rep.Scenarios[i]
		simRes, err := sim.Run(seedPlan(t, n), sim.Options{Requests: 20000, Seed: 1, Down: down, ClientIP: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		for z, c := range simRes.Zones {
			want := 100 * float64(c) / float64(simRes.Requests)
			near(t, n+": lab vs simulate "+z, share(got, got.Zones[z]), want, 8)
		}
		if v := Verdict(got); v != "match" {
			t.Errorf("%s %v: verdict %q, want match", n, down, v)
		}
	}
}

func TestWaterfallSpread(t *testing.T) {
	for _, c := range []struct {
		live, dead, proxies int
		lo, hi              float64
	}{
		{3, 0, 8, 0.375, 0.875}, // P(busiest ≤ 6/8) = 0.9922 < 0.995
		{2, 1, 8, 0.5, 0.875},
		{3, 0, 1, 1, 1}, // one proxy: one zone
		{2, 0, 2, 0.5, 1},
	} {
		lo, hi := WaterfallSpread(c.live, c.dead, c.proxies)
		if math.Abs(lo-c.lo) > 1e-9 || math.Abs(hi-c.hi) > 1e-9 {
			t.Errorf("WaterfallSpread(%d, %d, %d) = %v, %v; want %v, %v", c.live, c.dead, c.proxies, lo, hi, c.lo, c.hi)
		}
	}
}

// The seed's own no-policy rows are inside the model: each of its region
// splits, read as a lab result, gets "match" with 8 proxies. With one
// proxy (a region's share in one zone) none of them would.
func TestSeedNoPolicyRowsFitTheModel(t *testing.T) {
	prim, sec := seedZones()
	for k := 0; k <= 3; k++ {
		down := prim[:k]
		ref := seedReference("no-policy", down)
		zones := map[string]int{}
		for i, z := range prim {
			zones[z] = int(math.Round(10 * ref.primaryZones[i]))
		}
		for i, z := range sec {
			zones[z] = int(math.Round(10 * ref.secondaryZones[i]))
		}
		r := seedResult("no-policy", slices.Clone(down), zones, 0)
		for _, proxies := range []int{8, 1} {
			r.Proxies = proxies
			want := "match"
			if proxies == 1 {
				want = "DIFF"
			}
			if got := Verdict(&r); got != want {
				t.Errorf("seed row %q with %d proxies: %s, want %s", ScenarioName(down), proxies, got, want)
			}
		}
	}
}

// The default of spillway.secondLayerProxies is fitted to the seed: the
// likelihood of the seed's six busiest-zone fractions is within two
// log-units of the best P in 2..16 at P = 8, and one proxy per client (the
// old model) is far worse. Each observation has its region's sampling
// noise plus 3 points for the proxies' unequal shares of one client's
// connections (without it the likelihood follows how close each
// observation happens to sit to a multiple of 1/P). This is the
// computation docs/semantics.md §2.4 quotes.
func TestSecondLayerProxiesFitTheSeed(t *testing.T) {
	obs := []struct {
		live, dead int
		busiest    float64
		n          float64 // requests in the region
	}{
		{3, 0, 31.8 / 69.5, 695}, {3, 0, 23.1 / 30.5, 305}, // steady
		{2, 1, 49.1 / 68.1, 681}, {3, 0, 18.4 / 31.9, 319}, // 1 down
		{3, 0, 30.9 / 54.7, 547}, // 2 down (us-east4)
		{3, 0, 49.6 / 100, 1000}, // all down (us-east4)
	}
	loglik := func(p int) float64 {
		ll := 0.0
		for _, o := range obs {
			l := 0.0
			for _, d := range Spread(o.live, o.dead, p) {
				sd := math.Sqrt(math.Max(d.Busiest*(1-d.Busiest), 0.01)/o.n + 0.03*0.03)
				z := (o.busiest - d.Busiest) / sd
				l += d.P * math.Exp(-z*z/2) / (sd * math.Sqrt(2*math.Pi))
			}
			ll += math.Log(l)
		}
		return ll
	}
	best, bestP := math.Inf(-1), 0
	var line []string
	for p := 2; p <= 16; p++ {
		ll := loglik(p)
		line = append(line, fmt.Sprintf("%d:%.1f", p, ll))
		if ll > best {
			best, bestP = ll, p
		}
	}
	t.Logf("log-likelihood by proxies: %s (best %d)", strings.Join(line, " "), bestP)
	if ll := loglik(config.DefaultSecondLayerProxies); best-ll > 2 {
		t.Errorf("default %d proxies: log-likelihood %.2f, more than 1 below the best (%d: %.2f)", config.DefaultSecondLayerProxies, ll, bestP, best)
	}
	if ll := loglik(1); best-ll < 10 {
		t.Errorf("one proxy per client: log-likelihood %.2f, want far below the best %.2f", ll, best)
	}
}

func TestScenarioName(t *testing.T) {
	for _, c := range []struct {
		down []string
		want string
	}{
		{nil, "steady"},
		{[]string{"us-south1-a"}, "us-south1-a down"},
		{[]string{"us-south1-a", "us-south1-b", "us-south1-c"}, "us-south1-a,b,c down"},
		{[]string{"us-south1-a", "us-east4-b"}, "us-south1-a,us-east4-b down"},
	} {
		if got := ScenarioName(c.down); got != c.want {
			t.Errorf("ScenarioName(%v) = %q, want %q", c.down, got, c.want)
		}
	}
}

func seedResult(cfg string, down []string, zones map[string]int, s503 int) Result {
	r := Result{
		Config: cfg, Down: down, Requests: 1000, Zones: zones, Status: map[string]int{"200": 1000 - s503, "503": s503},
		Regions: map[string]int{}, Primary: "us-south1",
		RegionZones: map[string][]string{
			"us-south1": {"us-south1-a", "us-south1-b", "us-south1-c"},
			"us-east4":  {"us-east4-a", "us-east4-b", "us-east4-c"},
		},
		RegionOrder: []string{"us-south1", "us-east4"},
	}
	for z, n := range zones {
		r.Regions[z[:strings.LastIndexByte(z, '-')]] += n
	}
	return r
}

func TestVerdictAndReport(t *testing.T) {
	ok := seedResult("with-policy", nil, map[string]int{
		"us-south1-a": 234, "us-south1-b": 233, "us-south1-c": 233, "us-east4-a": 100, "us-east4-b": 100, "us-east4-c": 100,
	}, 0)
	bad := seedResult("with-policy", []string{"us-south1-a"}, map[string]int{
		"us-south1-a": 0, "us-south1-b": 600, "us-south1-c": 100, "us-east4-a": 100, "us-east4-b": 100, "us-east4-c": 100,
	}, 0)
	base := seedResult("baseline", []string{"us-south1-a", "us-south1-b", "us-south1-c"}, map[string]int{
		"us-south1-a": 0, "us-south1-b": 0, "us-south1-c": 0, "us-east4-a": 100, "us-east4-b": 100, "us-east4-c": 100,
	}, 700)
	// no-policy: a region's whole share in one zone (one proxy, the old
	// model) is outside what 8 proxies give; an uneven mix inside it is
	// a match.
	np := seedResult("no-policy", nil, map[string]int{
		"us-south1-a": 700, "us-south1-b": 0, "us-south1-c": 0, "us-east4-a": 300, "us-east4-b": 0, "us-east4-c": 0,
	}, 0)
	np.Proxies = 8
	npOK := seedResult("no-policy", nil, map[string]int{
		"us-south1-a": 175, "us-south1-b": 350, "us-south1-c": 175, "us-east4-a": 38, "us-east4-b": 75, "us-east4-c": 187,
	}, 0)
	npOK.Proxies = 8
	// With the simulated clients' ranges: the same counts match when each
	// zone is inside its zone's p1-p99, and not when one is outside.
	spread := map[string]sim.ZoneRange{}
	for _, z := range []string{"us-south1-a", "us-south1-b", "us-south1-c"} {
		spread[z] = sim.ZoneRange{P1: 8.7, P99: 43.7}
	}
	for _, z := range []string{"us-east4-a", "us-east4-b", "us-east4-c"} {
		spread[z] = sim.ZoneRange{P1: 3.7, P99: 18.8}
	}
	npIn := npOK
	npIn.AnyClient = spread
	npOut := npOK
	npOut.AnyClient = map[string]sim.ZoneRange{"us-south1-b": {P1: 8.7, P99: 30}}
	for _, c := range []struct {
		r    Result
		want string
	}{{ok, "match"}, {bad, "DIFF"}, {base, "match"}, {np, "DIFF"}, {npOK, "match"}, {npIn, "match"}, {npOut, "DIFF"}} {
		if got := Verdict(&c.r); got != c.want {
			t.Errorf("Verdict(%s %v) = %q, want %q", c.r.Config, c.r.Down, got, c.want)
		}
	}

	rep := &Report{Scenarios: []Result{ok, bad, base, np, npIn}, Requests: 1000, FailMode: FailHealthCheck, Interval: DefaultInterval, Rate: DefaultRate}
	var tbl bytes.Buffer
	if err := WriteTable(&tbl, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"us-south1 (a / b / c)",
		" 70.3% (23.4 / 23.8 / 23.1)", // the seed's steady row
		"70.0%",                       // the baseline's 503 share
		"match", "DIFF",
		"any client p1-p99", "(9-44 / 9-44 / 9-44)",
	} {
		if !strings.Contains(tbl.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tbl.String())
		}
	}

	var js bytes.Buffer
	if err := WriteJSON(&js, &Report{Scenarios: []Result{ok}}); err != nil {
		t.Fatal(err)
	}
	var got map[string][]map[string]any
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	s := got["scenarios"][0]
	if len(got) != 1 || len(s) != 6 {
		t.Errorf("JSON keys: %v", s)
	}
	if d, ok := s["down"].([]any); !ok || len(d) != 0 {
		t.Errorf(`steady "down" = %v, want []`, s["down"])
	}
	if s["config"] != "with-policy" || s["requests"] != 1000.0 || len(s["zones"].(map[string]any)) != 6 {
		t.Errorf("JSON scenario = %v", s)
	}
}
