package outlier

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

const (
	gwReason  = "3 consecutive gateway failures (502/503/504 or no response)"
	errReason = "5 consecutive errors (5xx or no response)"
)

// TestConsecutive feeds one endpoint (of four, so that the ejection cap
// allows one) a sequence of statuses, one per second, and checks at which
// request it is ejected.
func TestConsecutive(t *testing.T) {
	tests := []struct {
		name     string
		cfg      func(c *Config)
		u        uint64
		statuses []int
		wantAt   int // 1-based index of the ejecting request; 0: never
		reason   string
	}{
		{"3 gateway failures eject at the 3rd", nil, 0, []int{503, 503, 503}, 3, gwReason},
		{"N-1 gateway failures do not eject", nil, 0, []int{503, 503}, 0, ""},
		{"502 504 503 are all gateway failures", nil, 0, []int{502, 504, 503}, 3, gwReason},
		{"no response is a gateway failure", nil, 0, []int{0, 0, 0}, 3, gwReason},
		{"success resets", nil, 0, []int{503, 503, 200, 503, 503, 503}, 6, gwReason},
		{"4xx is a success", nil, 0, []int{503, 503, 404, 503, 503, 429, 503}, 0, ""},
		{"500 breaks a gateway run", nil, 0, []int{503, 503, 500, 503, 503}, 0, ""},
		{"5xx runs not enforced by default", nil, 0, []int{500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 501}, 0, ""},
		{
			"5xx run enforced 100",
			func(c *Config) { c.EnforcingConsecutiveErrors = 100 },
			0, []int{500, 500, 500, 500, 500}, 5, errReason,
		},
		{
			"5xx run mixes gateway failures",
			func(c *Config) { c.EnforcingConsecutiveErrors = 100 },
			0, []int{500, 503, 503, 500, 501}, 5, errReason,
		},
		{
			"gateway not enforced",
			func(c *Config) { c.EnforcingConsecutiveGatewayFailure = 0 },
			0, []int{503, 503, 503, 503, 503, 503, 503, 503, 503}, 0, "",
		},
		{
			"gateway not enforced, 5xx enforced",
			func(c *Config) { c.EnforcingConsecutiveGatewayFailure, c.EnforcingConsecutiveErrors = 0, 100 },
			0, []int{503, 503, 503, 503, 503}, 5, errReason,
		},
		{
			"gateway disabled by threshold 0",
			func(c *Config) { c.ConsecutiveGatewayFailure = 0 },
			0, []int{503, 503, 503, 503, 503, 503}, 0, "",
		},
		{
			"gateway enforced 50, roll 49",
			func(c *Config) { c.EnforcingConsecutiveGatewayFailure = 50 },
			149, []int{503, 503, 503}, 3, gwReason,
		},
		{
			"gateway enforced 50, roll 50: counter resets, no ejection later",
			func(c *Config) { c.EnforcingConsecutiveGatewayFailure = 50 },
			150, []int{503, 503, 503, 503, 503, 503, 503}, 0, "",
		},
		{
			"WINTICKET gateway 5",
			func(c *Config) { c.ConsecutiveGatewayFailure = 5 },
			0, []int{503, 503, 503, 503, 503}, 5,
			"5 consecutive gateway failures (502/503/504 or no response)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := apiDefaults
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			d := New(cfg, 4)
			gotAt := 0
			for k, s := range tt.statuses {
				now := at(time.Duration(k) * time.Second)
				ch := d.Result(0, s, now, tt.u)
				if len(ch) == 0 {
					continue
				}
				if gotAt != 0 {
					t.Fatalf("request %d: second change %+v", k+1, ch)
				}
				gotAt = k + 1
				want := []Change{{Endpoint: 0, Ejected: true, Reason: tt.reason, Until: now.Add(30 * time.Second)}}
				if !slices.Equal(ch, want) {
					t.Errorf("request %d: changes %+v, want %+v", k+1, ch, want)
				}
			}
			if gotAt != tt.wantAt {
				t.Errorf("ejected at request %d, want %d", gotAt, tt.wantAt)
			}
			if d.Ejected(0) != (tt.wantAt != 0) {
				t.Errorf("Ejected(0) = %v", d.Ejected(0))
			}
		})
	}
}

// TestMaxEjectionPercent makes every endpoint fail and counts ejections.
func TestMaxEjectionPercent(t *testing.T) {
	tests := []struct{ n, pct, want int }{
		{4, 50, 2},
		{2, 50, 1},
		{1, 50, 0},
		{1, 100, 1},
		{3, 50, 1},
		{5, 50, 2},
		{6, 50, 3},
		{10, 10, 1},
		{9, 10, 0},
		{6, 100, 6},
		{3, 0, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d endpoints %d%%", tt.n, tt.pct), func(t *testing.T) {
			cfg := apiDefaults
			cfg.MaxEjectionPercent = tt.pct
			d := New(cfg, tt.n)
			changes := 0
			for k := range 10 {
				for i := range tt.n {
					changes += len(d.Result(i, 503, at(time.Duration(k)*time.Second), 0))
				}
			}
			got := 0
			for i := range tt.n {
				if d.Ejected(i) {
					got++
				}
			}
			if got != tt.want || changes != tt.want {
				t.Errorf("ejected %d (%d changes), want %d", got, changes, tt.want)
			}
		})
	}
}

// fail3 sends three 503s to endpoint i at now and returns the changes.
func fail3(d *Detector, i int, now time.Time) []Change {
	var out []Change
	for range 3 {
		out = append(out, d.Result(i, 503, now, 0)...)
	}
	return out
}

// TestBackoff checks ejection time = base × count, returns, and decay.
func TestBackoff(t *testing.T) {
	d := New(apiDefaults, 4)
	sweep := func(sec float64) []Change {
		return d.Sweep(at(time.Duration(sec*float64(time.Second))), nil)
	}
	mustEject := func(ch []Change, until time.Time) {
		t.Helper()
		if len(ch) != 1 || !ch[0].Ejected || !ch[0].Until.Equal(until) {
			t.Fatalf("changes %+v, want one ejection until %v", ch, until)
		}
	}

	mustEject(fail3(d, 0, t0), at(30*time.Second))
	for s := 1; s < 30; s++ {
		if ch := sweep(float64(s)); ch != nil {
			t.Fatalf("Sweep at %ds: %+v", s, ch)
		}
	}
	if !d.Ejected(0) {
		t.Fatal("returned before 30 s")
	}
	want := []Change{{Endpoint: 0, Reason: "ejection time 30s over", Until: at(30 * time.Second)}}
	if ch := sweep(30); !slices.Equal(ch, want) {
		t.Fatalf("Sweep at 30s: %+v, want %+v", ch, want)
	}

	// Second ejection, right after returning: 2 × 30 s.
	mustEject(fail3(d, 0, at(30500*time.Millisecond)), at(90500*time.Millisecond))
	if d.EjectionCount(0) != 2 {
		t.Fatalf("EjectionCount = %d, want 2", d.EjectionCount(0))
	}
	for s := 31; s <= 90; s++ {
		sweep(float64(s))
	}
	// A Result past Until returns the endpoint before the next Sweep; the
	// result itself is a success.
	want = []Change{{Endpoint: 0, Reason: "ejection time 1m0s over", Until: at(90500 * time.Millisecond)}}
	if ch := d.Result(0, 200, at(90600*time.Millisecond), 0); !slices.Equal(ch, want) {
		t.Fatalf("Result at 90.6s: %+v, want %+v", ch, want)
	}
	// Decay: the interval ending at 91 s contained ejected time, so no
	// decay there; then one per interval.
	for _, step := range []struct {
		sec   float64
		count int
	}{{91, 2}, {92, 1}, {93, 0}, {94, 0}} {
		sweep(step.sec)
		if got := d.EjectionCount(0); got != step.count {
			t.Fatalf("after Sweep at %vs: EjectionCount = %d, want %d", step.sec, got, step.count)
		}
	}
	// Back to the base time.
	mustEject(fail3(d, 0, at(100*time.Second)), at(130*time.Second))

	// Decay partway: eject, return, one healthy interval, eject again → 2×.
	d = New(apiDefaults, 4)
	mustEject(fail3(d, 1, t0), at(30*time.Second))
	sweep(30) // return (count 1)
	mustEject(fail3(d, 1, at(31*time.Second)), at(91*time.Second))
	sweep(91) // return (count 2)
	sweep(92) // count 1
	mustEject(fail3(d, 1, at(92500*time.Millisecond)), at(152500*time.Millisecond))
}

// TestWinticket is the seed's scenario 003: interval 10 s, base 180 s, max
// 50%, consecutiveErrors 5, consecutiveGatewayFailure 5 enforced 100%,
// endpoints Tokyo and Osaka, Osaka answering 503. Each live endpoint gets
// one request a second; the owner sweeps every 10 s.
func TestWinticket(t *testing.T) {
	cfg := FromConfig(&config.OutlierDetection{
		Interval:                           &config.Duration{Seconds: 10},
		BaseEjectionTime:                   &config.Duration{Seconds: 180},
		MaxEjectionPercent:                 ptr(50),
		ConsecutiveErrors:                  ptr(5),
		ConsecutiveGatewayFailure:          ptr(5),
		EnforcingConsecutiveGatewayFailure: ptr(100),
	})
	const tokyo, osaka = 0, 1
	status := [2]int{200, 503}
	d := New(cfg, 2)
	var log []string
	record := func(now time.Time, ch []Change) {
		for _, c := range ch {
			name := [2]string{"tokyo", "osaka"}[c.Endpoint]
			log = append(log, fmt.Sprintf("%v %s ejected=%v %s until=%v", now.Sub(t0), name, c.Ejected, c.Reason, c.Until.Sub(t0)))
		}
	}
	for s := 0; s < 400; s++ {
		now := at(time.Duration(s) * time.Second)
		if s > 0 && s%10 == 0 {
			record(now, d.Sweep(now, nil))
		}
		if s == 4 {
			if got := d.NextDeadline(); !got.IsZero() {
				t.Errorf("NextDeadline before ejection = %v", got)
			}
		}
		for i := range 2 {
			if !d.Ejected(i) {
				record(now, d.Result(i, status[i], now, uint64(s)))
			}
		}
		if s == 4 {
			if got, want := d.NextDeadline(), at(184*time.Second); !got.Equal(want) {
				t.Errorf("NextDeadline = %v, want %v", got, want)
			}
		}
		if s == 183 && !d.Ejected(osaka) {
			t.Error("Osaka back before 180 s")
		}
	}
	want := []string{
		"4s osaka ejected=true 5 consecutive gateway failures (502/503/504 or no response) until=3m4s",
		"3m10s osaka ejected=false ejection time 3m0s over until=3m4s",
		"3m14s osaka ejected=true 5 consecutive gateway failures (502/503/504 or no response) until=9m14s",
	}
	if !slices.Equal(log, want) {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	if d.Ejected(tokyo) {
		t.Error("Tokyo ejected")
	}

	// A simulator jumping its clock to NextDeadline gets the return there.
	d = New(cfg, 2)
	for s := range 5 {
		d.Result(osaka, 503, at(time.Duration(s)*time.Second), 0)
	}
	next := d.NextDeadline()
	if ch := d.Sweep(next.Add(-time.Nanosecond), nil); ch != nil {
		t.Errorf("Sweep just before NextDeadline: %+v", ch)
	}
	if ch := d.Sweep(next, nil); len(ch) != 1 || ch[0].Ejected || ch[0].Endpoint != osaka {
		t.Errorf("Sweep at NextDeadline: %+v", ch)
	}
}

func TestNextDeadline(t *testing.T) {
	d := New(apiDefaults, 4)
	if got := d.NextDeadline(); !got.IsZero() {
		t.Fatalf("empty: %v", got)
	}
	fail3(d, 2, at(5*time.Second))
	fail3(d, 0, at(1*time.Second))
	for _, step := range []struct {
		sweep time.Duration
		want  time.Time
	}{
		{2 * time.Second, at(31 * time.Second)},
		{31 * time.Second, at(35 * time.Second)},
		{35 * time.Second, time.Time{}},
	} {
		d.Sweep(at(step.sweep), nil)
		if got := d.NextDeadline(); !got.Equal(step.want) {
			t.Errorf("after Sweep at %v: NextDeadline = %v, want %v", step.sweep, got, step.want)
		}
	}
}

// TestSuccessRate runs one interval of traffic with the given success
// rates (percent) and request counts per endpoint, then sweeps.
func TestSuccessRate(t *testing.T) {
	full := func(rate int) ep { return ep{rate, 200} }
	tests := []struct {
		name    string
		cfg     func(c *Config)
		u       uint64
		eps     []ep
		split   bool // spread the traffic over two intervals
		want    []int
		reasons []string
	}{
		{
			name:    "one outlier among six",
			eps:     []ep{full(100), full(100), full(100), full(100), full(100), full(50)},
			want:    []int{5},
			reasons: []string{"success rate 50.0% below threshold 56.3%"},
		},
		{
			name: "fewer than minimumHosts with volume",
			eps:  []ep{full(100), full(100), full(100), {100, 99}, {100, 99}, full(50)},
		},
		{
			name:  "volume spread over two intervals",
			eps:   []ep{{100, 198}, {100, 198}, {100, 198}, {100, 198}, {100, 198}, {50, 198}},
			split: true,
		},
		{
			name: "minimumHosts 0, no traffic",
			cfg:  func(c *Config) { c.SuccessRateMinimumHosts = 0 },
			eps:  []ep{{100, 0}, {100, 0}},
		},
		{
			name: "equal rates",
			eps:  []ep{full(99), full(99), full(99), full(99), full(99), full(99)},
		},
		{
			name: "two outliers hide each other at 1.9 stdev",
			eps:  []ep{full(100), full(100), full(100), full(100), full(50), full(50)},
		},
		{
			name:    "two outliers at 1.0 stdev",
			cfg:     func(c *Config) { c.SuccessRateStdevFactor = 1000 },
			eps:     []ep{full(100), full(50), full(100), full(100), full(100), full(50)},
			want:    []int{1, 5},
			reasons: []string{"success rate 50.0% below threshold 59.8%", "success rate 50.0% below threshold 59.8%"},
		},
		{
			name:    "max percent lets the worst go first",
			cfg:     func(c *Config) { c.SuccessRateStdevFactor, c.MaxEjectionPercent = 1000, 20 },
			eps:     []ep{full(100), full(100), full(100), full(100), full(50), full(40)},
			want:    []int{5},
			reasons: []string{"success rate 40.0% below threshold 55.6%"},
		},
		{
			name: "not enforced",
			cfg:  func(c *Config) { c.EnforcingSuccessRate = 0 },
			eps:  []ep{full(100), full(100), full(100), full(100), full(100), full(50)},
		},
		{
			name:    "enforced 30, roll 29",
			cfg:     func(c *Config) { c.EnforcingSuccessRate = 30 },
			u:       229,
			eps:     []ep{full(100), full(100), full(100), full(100), full(100), full(50)},
			want:    []int{5},
			reasons: []string{"success rate 50.0% below threshold 56.3%"},
		},
		{
			name: "enforced 30, roll 30",
			cfg:  func(c *Config) { c.EnforcingSuccessRate = 30 },
			u:    230,
			eps:  []ep{full(100), full(100), full(100), full(100), full(100), full(50)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := apiDefaults
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			d := New(cfg, len(tt.eps))
			u := func() uint64 { return tt.u }
			now := t0
			if tt.split {
				// Each interval gets half the traffic: below the volume.
				for half := range 2 {
					feed(t, d, tt.eps, 2, now)
					if ch := d.Sweep(now.Add(time.Duration(half+1)*time.Second), u); ch != nil {
						t.Fatalf("Sweep %d: %+v", half, ch)
					}
				}
				return
			}
			feed(t, d, tt.eps, 1, now)
			ch := d.Sweep(now.Add(time.Second), u)
			var got []int
			var reasons []string
			for _, c := range ch {
				if !c.Ejected || !c.Until.Equal(now.Add(time.Second+30*time.Second)) {
					t.Errorf("change %+v", c)
				}
				got = append(got, c.Endpoint)
				reasons = append(reasons, c.Reason)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) || !slices.Equal(reasons, tt.reasons) {
				t.Errorf("ejected %v %q, want %v %q", got, reasons, tt.want, tt.reasons)
			}
			// Counters reset: the next Sweep without traffic ejects nobody.
			if ch := d.Sweep(now.Add(2*time.Second), u); ch != nil {
				t.Errorf("second Sweep: %+v", ch)
			}
		})
	}
}

type ep struct{ rate, requests int }

// feed sends endpoint i eps[i].requests/div requests at now, with
// (100-rate)% failures. Failures are 500s: consecutive-errors ejection is
// off by default, so only the success-rate detector acts.
func feed(t *testing.T, d *Detector, eps []ep, div int, now time.Time) {
	t.Helper()
	for i, e := range eps {
		n := e.requests / div
		failures := n * (100 - e.rate) / 100
		for k := range n {
			s := 200
			if k < failures {
				s = 500
			}
			if ch := d.Result(i, s, now, 0); ch != nil {
				t.Fatalf("Result: %+v", ch)
			}
		}
	}
}

// TestEjectedExcludedFromSuccessRate checks that an ejected endpoint's
// straggling results neither count in the analysis nor extend its runs.
func TestEjectedExcludedFromSuccessRate(t *testing.T) {
	d := New(apiDefaults, 6)
	fail3(d, 5, t0)
	for range 200 {
		for i := range 6 {
			s := 200
			if i == 5 {
				s = 503 // stragglers of the ejected endpoint
			}
			if ch := d.Result(i, s, t0, 0); ch != nil {
				t.Fatalf("Result(%d): %+v", i, ch)
			}
		}
	}
	if ch := d.Sweep(at(time.Second), nil); ch != nil {
		t.Fatalf("Sweep: %+v", ch)
	}
	// After return a full run is needed again.
	d.Sweep(at(30*time.Second), nil)
	if ch := d.Result(5, 503, at(31*time.Second), 0); ch != nil {
		t.Fatalf("first failure after return ejected: %+v", ch)
	}
}

func TestResultDoesNotAllocate(t *testing.T) {
	d := New(apiDefaults, 8)
	now := t0
	for _, s := range []int{200, 404, 500} {
		if n := testing.AllocsPerRun(1000, func() {
			if d.Result(3, s, now, 0) != nil {
				t.Fatal("change")
			}
		}); n != 0 {
			t.Errorf("status %d: %v allocs per Result", s, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { d.Sweep(now, nil) }); n != 0 {
		t.Errorf("%v allocs per quiet Sweep", n)
	}
}
