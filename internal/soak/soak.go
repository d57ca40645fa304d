// Package soak is Spillway's soak test: the real proxy (`spillway serve`,
// a subprocess) in front of the lab's real backends (package lab, in this
// process) on the seed's configs, under a steady rate of well-formed
// requests, while a chaos loop kills and restarts zones, stops single
// endpoints, reloads the config every few seconds (two valid configs and
// one invalid, in turn), rotates the frontend's certificate files, and a
// hostile-client mix (slowloris, slow readers, malformed requests,
// pipelines) runs alongside.
//
// It reports well-formed requests sent and answered, 5xx answers inside
// and outside convergence windows, lost requests (no HTTP answer at all),
// the reloads' outcomes, and the proxy process's RSS, goroutines and file
// descriptors at start, end and peak. See Report.Failures for the pass
// criteria and docs/reliability.md for how to run it.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/lab"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/serve/report"
)

// Options configure a soak run. Short and Full return complete sets.
type Options struct {
	// Exe is the spillway binary; Env is added to its environment (the
	// test re-executes its own binary as `spillway serve` this way).
	Exe string
	Env []string
	// Dir receives the configs, certificates and the proxy's log (default:
	// a temporary directory, removed afterwards unless KeepDir).
	Dir     string
	KeepDir bool

	// Duration is the chaos phase; Warmup (load only, before) and Settle
	// (load only, after) frame it.
	Duration, Warmup, Settle time.Duration
	// Rate is the steady load in requests per second from Workers
	// keep-alive connections (every fourth one HTTP/2).
	Rate    float64
	Workers int
	// Interval and ProbeTimeout are the health checks' interval and
	// timeout written into the configs. They are more generous than the
	// lab's 200 ms and 150 ms: the backends live in the soak's own busy
	// process, and with a 150 ms timeout a stall of that process of about
	// 350 ms (CPU starvation on a shared machine; reproduced with SIGSTOP)
	// fails two probes of every endpoint at once, and the proxy rightly
	// answers 503 "no healthy backend" until they pass again.
	Interval, ProbeTimeout time.Duration
	// WindowMargin is added to 3 × Interval × unhealthyThreshold to make
	// a convergence window.
	WindowMargin time.Duration

	// Chaos schedule: the first zone kill at ZoneFirst, then every
	// ZoneEvery, each for ZoneDown; the same for endpoint flaps; a reload
	// every ReloadEvery; a certificate rotation at RotateFirst, then every
	// RotateEvery.
	ZoneFirst, ZoneEvery, ZoneDown time.Duration
	FlapFirst, FlapEvery, FlapDown time.Duration
	ReloadEvery                    time.Duration
	RotateFirst, RotateEvery       time.Duration
	Slowloris, SlowReaders         int           // concurrent connections of each kind
	HostileHold                    time.Duration // how long a slowloris or slow reader holds on
	MalformedEvery, PipelineEvery  time.Duration
	FDSlack, GoroutineSlack        int // allowed growth from start to end
	Seed                           uint64
	Progress                       io.Writer
}

// Short is the CI version: about 40 s, every kind of chaos at least once,
// with quiet stretches (no convergence window open) in which reloads and
// a rotation happen.
func Short() Options {
	return Options{
		Duration: 25 * time.Second, Warmup: 3 * time.Second, Settle: 5 * time.Second,
		Rate: 200, Workers: 16, Interval: 500 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond,
		WindowMargin: time.Second,
		ZoneFirst:    time.Second, ZoneEvery: 20 * time.Second, ZoneDown: 4 * time.Second,
		FlapFirst: 12 * time.Second, FlapEvery: 10 * time.Second, FlapDown: 2 * time.Second,
		ReloadEvery: 5 * time.Second, RotateFirst: 7 * time.Second, RotateEvery: 10 * time.Second,
		Slowloris: 5, SlowReaders: 3, HostileHold: 8 * time.Second,
		MalformedEvery: 300 * time.Millisecond, PipelineEvery: 300 * time.Millisecond,
		FDSlack: 50, GoroutineSlack: 50, Seed: 1,
	}
}

// Full is the soak: d of chaos (10 minutes for the record).
func Full(d time.Duration) Options {
	o := Short()
	o.Duration, o.Warmup, o.Settle = d, 5*time.Second, 10*time.Second
	o.ZoneEvery, o.ZoneDown = 30*time.Second, 8*time.Second
	o.FlapEvery = 15 * time.Second
	o.RotateEvery = 30 * time.Second
	// A hold past the proxy's 30 s header timeout shows whether it closes
	// slowloris connections.
	o.Slowloris, o.SlowReaders, o.HostileHold = 20, 10, 40*time.Second
	o.MalformedEvery, o.PipelineEvery = 250*time.Millisecond, 250*time.Millisecond
	return o
}

func (o *Options) check() error {
	if o.Exe == "" {
		return errors.New("soak: Options.Exe (the spillway binary) is required")
	}
	if o.Duration <= 0 || o.Rate <= 0 || o.Workers <= 0 || o.Interval <= 0 || o.ProbeTimeout <= 0 || o.ReloadEvery <= 0 ||
		o.ZoneEvery <= 0 || o.FlapEvery <= 0 || o.RotateEvery <= 0 || o.MalformedEvery <= 0 || o.PipelineEvery <= 0 {
		return errors.New("soak: incomplete Options (start from Short or Full)")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// Run runs the soak and returns its report. An error means the soak could
// not run (a port in use, the proxy not starting); what the soak found is
// in the report (Report.Failures).
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	began := time.Now()
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "spillway-soak-"); err != nil {
			return nil, fmt.Errorf("soak: %w", err)
		}
		if !o.KeepDir {
			defer os.RemoveAll(dir)
		}
	}
	f, err := prepare(dir, o.Interval, o.ProbeTimeout)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(f.valid[0], "soak")
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	p, err := plan.Compile(cfg)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	bs, err := lab.StartBackends(ctx, p)
	if err != nil {
		return nil, err
	}
	defer bs.Close()

	px, err := startProxy(ctx, o.Exe, o.Env, f, filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if px.alive() {
			px.stop()
		}
	}()
	px.ports = map[int]string{portOf(f.httpsAddr): "clients (HTTPS frontend)", portOf(f.httpAddr): "clients (HTTP frontend)", portOf(f.adminAddr): "admin API"}
	px.backendPort = f.backendPort
	fmt.Fprintf(o.Progress, "proxy pid %d, https %s, http %s, admin %s, log %s\n", px.cmd.Process.Pid, f.httpsAddr, f.httpAddr, f.adminAddr, px.logPath)
	if err := waitHealthy(ctx, px, 30*time.Second); err != nil {
		return nil, err
	}

	winLen := 3*o.Interval*time.Duration(f.unhealthyThreshold) + o.WindowMargin
	rep = &Report{
		Duration: Duration(o.Duration), Rate: o.Rate, Workers: o.Workers, Seed: o.Seed,
		Window: Duration(winLen), Backends: len(bs.Addrs()), Interval: Duration(o.Interval), ProbeTimeout: Duration(o.ProbeTimeout), UnhealthyThreshold: f.unhealthyThreshold,
		ProxyLog: px.logPath,
	}
	if o.KeepDir || o.Dir != "" {
		rep.Dir = dir
	}

	// Resource sampler: every second, until the end.
	start := time.Now()
	sampCtx, stopSampler := context.WithCancel(ctx)
	var sampWG sync.WaitGroup
	var sampMu sync.Mutex
	var self stallWatch
	pressure0 := cpuPressure()
	sampWG.Go(func() { self.run(sampCtx) })
	sampWG.Go(func() {
		var prevWait Duration
		next := time.Now()
		for sleepCtx(sampCtx, time.Until(next)) {
			next = next.Add(time.Second)
			s, err := px.sample(sampCtx, time.Since(start))
			if err != nil {
				continue
			}
			sampMu.Lock()
			rep.Peak.RSSKiB = max(rep.Peak.RSSKiB, s.RSSKiB)
			rep.Peak.FDs = max(rep.Peak.FDs, s.FDs)
			rep.Peak.Goroutines = max(rep.Peak.Goroutines, s.Goroutines)
			rep.Peak.Threads = max(rep.Peak.Threads, s.Threads)
			if last := prevWait; last > 0 && s.RunqWait-last > rep.WorstRunqWait {
				rep.WorstRunqWait, rep.WorstRunqWaitAt = s.RunqWait-last, s.At
			}
			prevWait = s.RunqWait
			if len(rep.Samples) == 0 || time.Duration(s.At-rep.Samples[len(rep.Samples)-1].At) >= 10*time.Second {
				rep.Samples = append(rep.Samples, s)
			}
			sampMu.Unlock()
		}
	})
	defer func() {
		stopSampler()
		sampWG.Wait()
	}()

	gen := newLoadGen("https://"+f.httpsAddr+"/soak/steady", o.Rate, o.Workers)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var loadWG sync.WaitGroup
	loadWG.Go(func() { gen.run(loadCtx) })
	fmt.Fprintf(o.Progress, "load %.0f rps from %d connections; warm-up %s\n", o.Rate, o.Workers, o.Warmup)
	if !sleepCtx(ctx, o.Warmup) {
		return nil, ctx.Err()
	}
	if rep.Start, err = px.sample(ctx, time.Since(start)); err != nil {
		return nil, err
	}
	rep.Start.ByEntry = px.goroutines(ctx, filepath.Join(dir, "goroutines-start.txt"))

	// Chaos and the hostile mix.
	fmt.Fprintf(o.Progress, "chaos for %s (convergence window %s)\n", o.Duration, winLen)
	ch := &chaos{
		o: &o, f: f, bs: bs, proxy: px, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed)),
		start: start, winLen: winLen, logw: o.Progress, algorithm: f.algorithms[0],
	}
	ho := &hostile{httpsAddr: f.httpsAddr, httpAddr: f.httpAddr, start: start}
	chaosCtx, stopChaos := context.WithTimeout(ctx, o.Duration)
	defer stopChaos()
	var chaosWG sync.WaitGroup
	chaosWG.Go(func() { ch.run(chaosCtx, ctx) })
	chaosWG.Go(func() { ho.run(chaosCtx, &o) })
	chaosWG.Wait()
	ho.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	fmt.Fprintf(o.Progress, "[%7.1fs] chaos over; settling %s under load\n", time.Since(start).Seconds(), o.Settle)
	if !sleepCtx(ctx, o.Settle) {
		return nil, ctx.Err()
	}
	if rep.End, err = px.sample(ctx, time.Since(start)); err != nil {
		return nil, err
	}
	rep.End.ByEntry = px.goroutines(ctx, filepath.Join(dir, "goroutines-end.txt"))
	stopLoad()
	loadWG.Wait()
	gen.closeIdle()
	// At rest: no load, every client connection closed.
	if sleepCtx(ctx, 2*time.Second) {
		rep.Rest, _ = px.sample(ctx, time.Since(start))
		rep.Rest.ByEntry = px.goroutines(ctx, filepath.Join(dir, "goroutines-rest.txt"))
	}

	m, err := px.metrics(ctx, "spillway_config_reloads_total", "spillway_config_reload_failures_total")
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Sprintf("read reload metrics: %v", err))
	}
	rep.MetricReloads = int(m["spillway_config_reloads_total"])
	rep.MetricReloadFailures = int(m["spillway_config_reload_failures_total"])
	rep.ProxyAliveAtEnd = px.alive()
	stopSampler()
	sampWG.Wait()
	rep.ProxyExit = px.stop()
	rep.LogErrors, rep.LogErrorCount = px.logLines(10, "level=ERROR")
	_, rep.LogWarnCount = px.logLines(0, "level=WARN")

	self.mu.Lock()
	rep.SelfStall, rep.SelfStallAt, rep.SelfStallsOver1s = Duration(self.worst), Duration(self.at.Sub(start)), self.over1
	self.mu.Unlock()
	if p1 := cpuPressure(); p1 > 0 {
		rep.CPUPressure = (p1 - pressure0).Seconds() / time.Since(start).Seconds()
	}
	rep.fill(gen, ch, ho)
	rep.LogNearFailures = px.logAround(rep.FailedRequests, 2*time.Second, 60)
	rep.Elapsed = Duration(time.Since(began))
	return rep, nil
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// waitHealthy waits until every endpoint is HEALTHY in the admin API's
// health view (probed and passing).
func waitHealthy(ctx context.Context, px *proxyProc, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	why := "no health report yet"
	for time.Now().Before(deadline) {
		var body []byte
		if err := px.get(ctx, "/health", &body); err == nil {
			why = notHealthy(body)
			if why == "" {
				return nil
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("soak: backends not all healthy after %s: %s", limit, why)
}

// notHealthy returns "" when every endpoint of the report is HEALTHY.
func notHealthy(body []byte) string {
	var h report.Health
	if err := jsonUnmarshal(body, &h); err != nil {
		return err.Error()
	}
	if len(h.Services) == 0 {
		return "no services"
	}
	for _, s := range h.Services {
		for _, b := range s.Backends {
			for _, e := range b.Endpoints {
				if e.HealthState != "HEALTHY" {
					return fmt.Sprintf("%s %s is %s %s", s.Name, e.IPAddress, e.HealthState, e.Detail)
				}
			}
		}
	}
	return ""
}
