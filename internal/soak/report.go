package soak

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Duration is a time.Duration that prints as "1.5s" in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a string written by MarshalJSON.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("soak: duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("soak: duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) String() string { return time.Duration(d).String() }

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("soak: decode: %w", err)
	}
	return nil
}

// Report is a soak run's outcome.
type Report struct {
	// Duration is the chaos phase; Elapsed the whole run.
	Duration Duration `json:"duration"`
	Elapsed  Duration `json:"elapsed"`
	Rate     float64  `json:"rate"`
	Workers  int      `json:"workers"`
	Seed     uint64   `json:"seed"`
	// Window is the convergence window: 3 × Interval ×
	// UnhealthyThreshold + margin after each zone kill or restart and
	// each endpoint stop or restart.
	Window Duration `json:"window"`
	// Covered is the share of the chaos phase inside some window.
	Covered            float64  `json:"windowCoverage"`
	Interval           Duration `json:"healthCheckInterval"`
	ProbeTimeout       Duration `json:"healthCheckTimeout"`
	UnhealthyThreshold int      `json:"unhealthyThreshold"`

	// Well-formed requests of the steady load.
	Sent           int            `json:"sent"`
	OK             int            `json:"ok"`
	Statuses       map[int]int    `json:"statuses"`
	ByProto        map[string]int `json:"byProtocol"`
	Late           int            `json:"lateDispatches"`
	LoadTime       Duration       `json:"loadTime"` // from the first request to the last answer
	Slowest        []outcome      `json:"slowest"`
	P50            Duration       `json:"latencyP50"`
	P99            Duration       `json:"latencyP99"`
	Max            Duration       `json:"latencyMax"`
	Inside         int            `json:"5xxInsideWindows"`
	Outside        int            `json:"5xxOutsideWindows"`
	Lost           int            `json:"lost"`
	Other          int            `json:"otherFailures"` // non-5xx non-2xx, or a 2xx without a lab body
	FailedRequests []outcome      `json:"failedRequests,omitempty"`
	ByWindow       map[string]int `json:"5xxByWindow,omitempty"`
	InsideSamples  []outcome      `json:"5xxInsideSamples,omitempty"`

	// Chaos.
	ZoneKills            int            `json:"zoneKills"`
	ZoneRestarts         int            `json:"zoneRestarts"`
	Flaps                int            `json:"flaps"`
	Reloads              []ReloadRecord `json:"reloads"`
	ValidApplied         int            `json:"validReloadsApplied"`
	ValidFailed          int            `json:"validReloadsFailed"`
	InvalidRejected      int            `json:"invalidReloadsRejected"`
	InvalidAccepted      int            `json:"invalidReloadsAccepted"`
	MetricReloads        int            `json:"metricReloads"`
	MetricReloadFailures int            `json:"metricReloadFailures"`
	Rotations            []Rotation     `json:"rotations"`
	Hostile              HostileStats   `json:"hostile"`
	Errors               []string       `json:"errors,omitempty"`
	// Timeline lists the chaos events (offset, UTC time, event).
	Timeline []string `json:"timeline"`
	// LogNearFailures holds the proxy log's lines from 2 s before the
	// first few failed requests to their end (empty when none failed).
	LogNearFailures []string `json:"logNearFailures,omitempty"`

	// The proxy process.
	Start, End, Peak ProcStats   `json:"-"`
	Proc             procSummary `json:"proxy"`
	Samples          []ProcStats `json:"samples"`
	// Rest is a sample 2 s after the load stopped and its connections
	// closed (not asserted: backend pools idle out over minutes).
	Rest            ProcStats `json:"-"`
	ProxyAliveAtEnd bool      `json:"proxyAliveAtEnd"`
	ProxyExit       string    `json:"proxyExit"`
	LogErrors       []string  `json:"logErrors,omitempty"`
	LogErrorCount   int       `json:"logErrorCount"`
	LogWarnCount    int       `json:"logWarnCount"`
	ProxyLog        string    `json:"proxyLog"`
	Dir             string    `json:"dir,omitempty"`

	// The machine: WorstRunqWait is the proxy's largest run-queue wait
	// (summed over its threads) within one 1-s sample, at
	// WorstRunqWaitAt; SelfStall the soak process's longest stall (a 50 ms
	// ticker's lateness), at SelfStallAt, and how many exceeded 1 s;
	// CPUPressure the share of the run in which some task on the machine
	// waited for a CPU (/proc/pressure/cpu).
	WorstRunqWait    Duration `json:"proxyWorstRunqWaitPerSecond"`
	WorstRunqWaitAt  Duration `json:"proxyWorstRunqWaitAt"`
	SelfStall        Duration `json:"soakWorstStall"`
	SelfStallAt      Duration `json:"soakWorstStallAt"`
	SelfStallsOver1s int      `json:"soakStallsOver1s"`
	CPUPressure      float64  `json:"machineCPUPressure"`

	// Backends is the number of lab backends (addresses).
	Backends int `json:"backends"`
	// FDSlack and GoroutineSlack are the allowed growth (from Options).
	FDSlack        int `json:"fdSlack"`
	GoroutineSlack int `json:"goroutineSlack"`
}

type procSummary struct {
	Start ProcStats `json:"start"`
	End   ProcStats `json:"end"`
	Peak  ProcStats `json:"peak"`
	Rest  ProcStats `json:"rest"`
}

// fill computes the counts from the load generator, chaos and hostile
// records.
func (r *Report) fill(g *loadGen, ch *chaos, ho *hostile) {
	r.FDSlack, r.GoroutineSlack = ch.o.FDSlack, ch.o.GoroutineSlack
	r.Proc = procSummary{Start: r.Start, End: r.End, Peak: r.Peak, Rest: r.Rest}

	g.mu.Lock()
	r.Sent, r.OK, r.Late, r.Statuses, r.ByProto = g.sent, g.ok, g.late, g.statuses, g.byProto
	r.LoadTime = Duration(g.ended.Sub(g.began))
	r.Slowest = slices.Clone(g.slowest)
	bad := slices.Clone(g.bad)
	g.mu.Unlock()
	r.P50, r.P99, r.Max = Duration(g.quantile(0.5)), Duration(g.quantile(0.99)), Duration(g.quantile(1))
	ch.classify(bad)
	r.ByWindow = map[string]int{}
	for _, o := range bad {
		switch {
		case o.Err != "" && o.Status == 0:
			r.Lost++
		case o.Status >= 500 && o.Window != "":
			r.Inside++
			r.ByWindow[o.Window]++
			if len(r.InsideSamples) < 10 {
				r.InsideSamples = append(r.InsideSamples, o)
			}
			continue // expected: not listed
		case o.Status >= 500:
			r.Outside++
		default:
			r.Other++
		}
		if len(r.FailedRequests) < 50 {
			r.FailedRequests = append(r.FailedRequests, o)
		}
	}

	r.Covered = ch.coverage()
	ch.mu.Lock()
	r.ZoneKills, r.ZoneRestarts, r.Flaps = ch.zoneKills, ch.zoneRestarts, ch.flaps
	r.Reloads, r.Rotations, r.Timeline = ch.reloads, ch.rotations, ch.timeline
	r.Errors = append(r.Errors, ch.errs...)
	ch.mu.Unlock()
	for _, rl := range r.Reloads {
		switch {
		case rl.Valid && rl.Status == 200 && rl.Applied:
			r.ValidApplied++
		case rl.Valid:
			r.ValidFailed++
		case rl.Status == 422 && rl.Applied:
			r.InvalidRejected++
		default:
			r.InvalidAccepted++
		}
	}

	ho.mu.Lock()
	r.Hostile = ho.st
	pipe := slices.Clone(ho.pipe5xx)
	unreached := slices.Clone(ho.unreached)
	ho.mu.Unlock()
	ch.classify(pipe)
	for _, o := range pipe {
		if o.Window == "" {
			r.Hostile.Pipelined5xxOutside++
		}
	}
	ch.classify(unreached)
	r.Hostile.Unreached = len(unreached)
	for _, o := range unreached {
		if o.Window == "" {
			r.Hostile.UnreachedOutside++
		}
	}
}

// Failures lists the pass criteria the run missed (none: it passed):
// no lost request, no 5xx outside a convergence window, no other failed
// well-formed request, every valid reload applied and every invalid one
// rejected (by the API and in the metrics), no chaos error, the proxy
// alive at the end, and file descriptors and goroutines at the end within
// the slack of the start.
func (r *Report) Failures() []string {
	var f []string
	if r.Sent == 0 {
		f = append(f, "no requests were sent")
	}
	if r.Lost > 0 {
		f = append(f, fmt.Sprintf("%d well-formed requests lost (no HTTP answer)", r.Lost))
	}
	if r.Outside > 0 {
		f = append(f, fmt.Sprintf("%d well-formed requests answered 5xx outside convergence windows", r.Outside))
	}
	if r.Other > 0 {
		f = append(f, fmt.Sprintf("%d well-formed requests answered neither 2xx with a backend body nor 5xx", r.Other))
	}
	if r.ValidFailed > 0 {
		f = append(f, fmt.Sprintf("%d valid reloads were not applied", r.ValidFailed))
	}
	if r.InvalidAccepted > 0 {
		f = append(f, fmt.Sprintf("%d invalid reloads were not rejected with 422 and no change", r.InvalidAccepted))
	}
	if r.MetricReloads != r.ValidApplied || r.MetricReloadFailures != r.InvalidRejected {
		f = append(f, fmt.Sprintf("reload metrics say %d applied and %d rejected; the soak made %d and %d",
			r.MetricReloads, r.MetricReloadFailures, r.ValidApplied, r.InvalidRejected))
	}
	for _, e := range r.Errors {
		f = append(f, "chaos: "+e)
	}
	if !r.ProxyAliveAtEnd {
		f = append(f, "the proxy was not running at the end: "+r.ProxyExit)
	}
	// The backend pool keeps connections idle for 600 s by design (as
	// Google's load balancer does), so it grows with the highest
	// concurrency per backend seen and does not shrink within a soak:
	// the pool is bounded separately, everything else must stay flat.
	if s, e := r.Start.NonBackendFDs(), r.End.NonBackendFDs(); e > s+r.FDSlack {
		f = append(f, fmt.Sprintf("file descriptors other than backend connections grew from %d to %d (slack %d)", s, e, r.FDSlack))
	}
	if _, o := r.End.Backend(); o > r.FDSlack {
		f = append(f, fmt.Sprintf("%d connections to backends at the end are not established (the backend closed them; the proxy did not): %v", o, r.End.Kinds))
	}
	if e, _ := r.End.Backend(); e > r.Backends*r.Workers {
		f = append(f, fmt.Sprintf("%d established connections to backends at the end: more than the load's %d connections could need on each of the %d backends", e, r.Workers, r.Backends))
	}
	if n := r.Hostile.UnreachedOutside; n > 0 {
		f = append(f, fmt.Sprintf("%d malformed-body requests answered 503 (no backend reached) outside convergence windows", n))
	}
	// An HTTP/2 connection that never completes a request is closed at
	// the header timeout (30 s), as an HTTP/1.1 slowloris is.
	if d := time.Duration(r.Hostile.H2SlowlorisMaxClose); d > 35*time.Second {
		f = append(f, fmt.Sprintf("an HTTP/2 connection without a complete request was held %s (header timeout 30 s)", d.Round(time.Second)))
	}
	// A client's mistake never gets a 5xx (505 for HTTP/9.9 is right).
	for kind, n := range r.Hostile.Notes {
		if strings.HasPrefix(kind, "malformed ") {
			f = append(f, fmt.Sprintf("%d× %s: a malformed request blamed on the backends (%s)", n, kind, r.Hostile.NoteExamples[kind]))
		}
	}
	// Rotated certificate files are picked up by the next reload (the
	// soak runs the proxy with --watch 0 and reloads every 5 s): every
	// rotation but the last, which the run may end before, must be seen.
	for i, rt := range r.Rotations {
		if !rt.Observed && i < len(r.Rotations)-1 {
			f = append(f, fmt.Sprintf("certificate rotation %d (%s at %s) was never served", i+1, rt.Mode, time.Duration(rt.At).Round(time.Second)))
		}
	}
	// Likewise net/http's pooled backend connections keep two goroutines
	// each while they idle (600 s).
	if s, e := r.Start.NonPoolGoroutines(), r.End.NonPoolGoroutines(); e > s+r.GoroutineSlack {
		f = append(f, fmt.Sprintf("goroutines other than pooled backend connections' grew from %d to %d (slack %d); by entry function: %s",
			s, e, r.GoroutineSlack, entryDiff(r.Start.ByEntry, r.End.ByEntry)))
	}
	return f
}

// WriteTable prints the report for people.
func (r *Report) WriteTable(w io.Writer) {
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "  %-34s %s\n", k, fmt.Sprintf(format, args...)) }
	fmt.Fprintf(w, "SOAK REPORT\n")
	row("chaos phase / whole run", "%s / %s", r.Duration, time.Duration(r.Elapsed).Round(time.Second))
	row("steady load", "%.0f rps target from %d keep-alive connections (1 in 4 HTTP/2), %.1f rps achieved", r.Rate, r.Workers, float64(r.Sent)/max(1, time.Duration(r.LoadTime).Seconds()))
	row("health checks", "every %s, timeout %s, unhealthyThreshold %d", r.Interval, r.ProbeTimeout, r.UnhealthyThreshold)
	row("convergence window", "%s (3 × interval × unhealthyThreshold + margin); %.0f%% of the chaos phase inside one", r.Window, 100*r.Covered)
	row("well-formed requests sent", "%d", r.Sent)
	row("  2xx from a backend", "%d", r.OK)
	row("  5xx inside windows", "%d", r.Inside)
	row("  5xx OUTSIDE windows (goal 0)", "%d", r.Outside)
	row("  lost, no HTTP answer (goal 0)", "%d", r.Lost)
	row("  other failures (goal 0)", "%d", r.Other)
	row("  statuses", "%v", r.Statuses)
	row("  by protocol", "%v", r.ByProto)
	row("  latency p50 / p99 / max", "%s / %s / %s", roundD(r.P50), roundD(r.P99), roundD(r.Max))
	row("  late dispatches (>1s no worker)", "%d", r.Late)
	for _, o := range r.Slowest {
		row("  slow request", "%s at %s UTC, %s, status %d %s", o.End.Sub(o.Start).Round(time.Millisecond), o.Start.UTC().Format("15:04:05.000"), o.Proto, o.Status, o.Err)
	}
	row("zone kills / restarts", "%d / %d", r.ZoneKills, r.ZoneRestarts)
	row("endpoint flaps", "%d", r.Flaps)
	row("reloads: valid applied / failed", "%d / %d (200 and the health view shows the config's algorithm)", r.ValidApplied, r.ValidFailed)
	row("reloads: invalid rejected / not", "%d / %d (422 and the algorithm unchanged)", r.InvalidRejected, r.InvalidAccepted)
	row("reload metrics: applied / rejected", "%d / %d", r.MetricReloads, r.MetricReloadFailures)
	obs := 0
	for _, rt := range r.Rotations {
		if rt.Observed {
			obs++
		}
	}
	row("certificate rotations / observed", "%d / %d (each served by a fresh handshake after the next reload)", len(r.Rotations), obs)
	h := r.Hostile
	row("hostile connections / dial errors", "%d / %d", h.Connections, h.DialErrors)
	row("  slowloris / closed by proxy", "%d / %d (after %s..%s)", h.Slowloris, h.SlowlorisServerClosed, roundD(h.SlowlorisMinClose), roundD(h.SlowlorisMaxClose))
	row("  HTTP/2 slowloris / closed by proxy", "%d / %d (after %s..%s)", h.H2Slowloris, h.H2SlowlorisServerClosed, roundD(h.H2SlowlorisMinClose), roundD(h.H2SlowlorisMaxClose))
	row("  slow readers (1 MiB unread)", "%d", h.SlowReaders)
	row("  malformed requests", "%d", h.Malformed)
	row("  pipelines / requests / answered", "%d / %d / %d", h.Pipelines, h.PipelinedRequests, h.PipelinedAnswered)
	row("  pipelined 5xx / outside windows", "%d / %d", h.Pipelined5xx, h.Pipelined5xxOutside)
	row("  malformed body, no backend reached / outside windows", "%d / %d", h.Unreached, h.UnreachedOutside)
	fmt.Fprintf(w, "  %-34s %10s %10s %10s %10s\n", "proxy process", "start", "end", "peak", "at rest")
	fmt.Fprintf(w, "  %-34s %10.1f %10.1f %10.1f %10.1f\n", "  RSS (MiB)", mib(r.Start), mib(r.End), mib(r.Peak), mib(r.Rest))
	fmt.Fprintf(w, "  %-34s %10d %10d %10d %10d\n", "  goroutines", r.Start.Goroutines, r.End.Goroutines, r.Peak.Goroutines, r.Rest.Goroutines)
	fmt.Fprintf(w, "  %-34s %10d %10d %10d %10d\n", "  file descriptors", r.Start.FDs, r.End.FDs, r.Peak.FDs, r.Rest.FDs)
	fmt.Fprintf(w, "  %-34s %10d %10d %10d %10d\n", "  threads", r.Start.Threads, r.End.Threads, r.Peak.Threads, r.Rest.Threads)
	fmt.Fprintf(w, "  %-34s %10d %10d %10s %10d\n", "  goroutines other than pool's", r.Start.NonPoolGoroutines(), r.End.NonPoolGoroutines(), "", r.Rest.NonPoolGoroutines())
	fmt.Fprintf(w, "  %-34s %10d %10d %10s %10d\n", "  FDs other than backend conns", r.Start.NonBackendFDs(), r.End.NonBackendFDs(), "", r.Rest.NonBackendFDs())
	se, so := r.Start.Backend()
	ee, eo := r.End.Backend()
	re, ro := r.Rest.Backend()
	fmt.Fprintf(w, "  %-34s %10d %10d %10s %10d\n", "  backend conns, established", se, ee, "", re)
	fmt.Fprintf(w, "  %-34s %10d %10d %10s %10d\n", "  backend conns, other states", so, eo, "", ro)
	row("  descriptors at start", "%s", kinds(r.Start.Kinds))
	row("  descriptors at end", "%s", kinds(r.End.Kinds))
	row("  descriptors at rest", "%s", kinds(r.Rest.Kinds))
	row("  goroutines, end − start", "%s", entryDiff(r.Start.ByEntry, r.End.ByEntry))
	row("proxy exit", "%s", r.ProxyExit)
	row("machine: CPU pressure", "%.0f%% of the run some task waited for a CPU (shared machine)", 100*r.CPUPressure)
	row("proxy: worst run-queue wait", "%s within 1 s (at %s)", roundD(r.WorstRunqWait), time.Duration(r.WorstRunqWaitAt).Round(100*time.Millisecond))
	row("soak process: worst stall", "%s (at %s); %d over 1 s", roundD(r.SelfStall), time.Duration(r.SelfStallAt).Round(100*time.Millisecond), r.SelfStallsOver1s)
	row("proxy log: ERROR / WARN lines", "%d / %d (%s)", r.LogErrorCount, r.LogWarnCount, r.ProxyLog)
	if len(r.ByWindow) > 0 {
		fmt.Fprintf(w, "5xx inside windows, by window:\n")
		for _, k := range slices.Sorted(maps.Keys(r.ByWindow)) {
			fmt.Fprintf(w, "  %-50s %d\n", k, r.ByWindow[k])
		}
	}
	if len(h.MalformedAnswers) > 0 {
		fmt.Fprintf(w, "malformed requests, answers:\n")
		for _, k := range slices.Sorted(maps.Keys(h.MalformedAnswers)) {
			fmt.Fprintf(w, "  %-60s %d\n", k, h.MalformedAnswers[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(h.Notes)) {
		fmt.Fprintf(w, "hostile anomaly: %s: %d× (%s)\n", k, h.Notes[k], h.NoteExamples[k])
	}
	for _, o := range r.InsideSamples {
		fmt.Fprintf(w, "5xx inside a window (expected): %s %s status=%d body=%q window=%q\n",
			o.Start.Format("15:04:05.000"), o.Proto, o.Status, o.Body, o.Window)
	}
	for _, o := range r.FailedRequests {
		fmt.Fprintf(w, "failed request: %s..%s %s status=%d err=%q body=%q window=%q\n",
			o.Start.Format("15:04:05.000"), o.End.Format("15:04:05.000"), o.Proto, o.Status, o.Err, o.Body, o.Window)
	}
	if len(r.FailedRequests) > 0 {
		fmt.Fprintf(w, "chaos timeline:\n")
		for _, l := range r.Timeline {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	for _, l := range r.LogNearFailures {
		fmt.Fprintf(w, "proxy log near failures: %s\n", truncate(l, 300))
	}
	for _, l := range r.LogErrors {
		fmt.Fprintf(w, "proxy log: %s\n", truncate(l, 300))
	}
	if f := r.Failures(); len(f) > 0 {
		fmt.Fprintf(w, "RESULT: FAIL\n  - %s\n", strings.Join(f, "\n  - "))
	} else {
		fmt.Fprintf(w, "RESULT: PASS\n")
	}
}

// entryDiff lists the entry functions whose goroutine count changed.
func entryDiff(a, b map[string]int) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if d := b[k] - a[k]; d != 0 {
			parts = append(parts, fmt.Sprintf("%s %+d", k, d))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

func mib(s ProcStats) float64 { return float64(s.RSSKiB) / 1024 }

func kinds(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func roundD(d Duration) time.Duration { return time.Duration(d).Round(100 * time.Microsecond) }
