package accesslog

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
	"github.com/spillwaylb/spillway/internal/proxy"
)

// Log is the access log component: the writer of the config in force
// (none when spillway.accessLog is off), replaced on reload when its
// settings change, and the line counts, which outlive writers.
type Log struct {
	stdout io.Writer
	log    *slog.Logger
	// cur is the running writer (nil when off); mu serialises its
	// replacement.
	cur    atomic.Pointer[accessLog]
	mu     sync.Mutex
	counts accessLogCounts
	// The DNS query log (dnslog.go): dnsCur is its own writer (nil when
	// it is off or shares cur: dnsShared), dnsRate its sample rate
	// (float64 bits), dnsCounts its line counts.
	dnsCur           atomic.Pointer[accessLog]
	dnsOn, dnsShared atomic.Bool
	dnsRate          atomic.Uint64
	dnsCounts        accessLogCounts
}

// Counts are the access log's lines since the start, all writers
// together.
type Counts struct {
	Written, Dropped, WriteErrors uint64
}

// New returns a Log with no writer; Configure starts one. An access log
// with path "stdout" writes to stdout; log reports a last flush that
// does not finish.
func New(stdout io.Writer, log *slog.Logger) *Log {
	return &Log{stdout: stdout, log: log}
}

// Counts returns the line counts.
func (l *Log) Counts() Counts {
	return Counts{Written: l.counts.written.Load(), Dropped: l.counts.dropped.Load(), WriteErrors: l.counts.writeErrors.Load()}
}

// Record logs rec, kept at rate (see SampleRates), when a writer runs.
// It never blocks: past the writer's queue the line is dropped and
// counted.
func (l *Log) Record(rec *proxy.Record, rate float64) {
	a := l.cur.Load()
	if a == nil {
		return
	}
	if !sampled(rate) {
		return
	}
	a.record(rec)
}

// Sampling returns the access log's own sample rate for config c and
// whether the log is on.
func Sampling(c *config.Config) (rate float64, on bool) {
	_, rate, on = accessLogConfig(c)
	return rate, on
}

// SampleRates returns, by service ID, the fraction of a service's
// requests the access log keeps: its logConfig (enable false: none;
// sampleRate, default 1), else the access log's own rate.
func SampleRates(p *plan.Plan, def float64) []float64 {
	rates := make([]float64, len(p.Services))
	for i, svc := range p.Services {
		rates[i] = def
		if svc.Config == nil || svc.Config.LogConfig == nil {
			continue
		}
		lc := svc.Config.LogConfig
		switch {
		case !lc.Enable:
			rates[i] = 0
		case lc.SampleRate != nil:
			rates[i] = *lc.SampleRate
		default:
			rates[i] = 1
		}
	}
	return rates
}

// sampled draws whether a request kept at rate is logged.
func sampled(rate float64) bool {
	return rate >= 1 || rate > 0 && rand.Float64() < rate
}

// Configure starts, replaces or stops the access log writer for config
// c. A writer whose settings are unchanged keeps running.
func (l *Log) Configure(c *config.Config) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, _, on := accessLogConfig(c)
	if err := l.configureAccess(st, on); err != nil {
		return err
	}
	return l.configureDNS(c, st, on)
}

// configureAccess starts, replaces or stops the access log writer, with
// l.mu held.
func (l *Log) configureAccess(st accessLogSettings, on bool) error {
	old := l.cur.Load()
	// An old writer is stopped without waiting for it: it may be blocked
	// on a destination that does not drain (a stalled stdout pipe), and
	// this runs on the control loop.
	if !on {
		if old != nil {
			l.cur.Store(nil)
			go old.close()
		}
		return nil
	}
	if old != nil && old.settings == st {
		return nil
	}
	a, err := openAccessLog(st, l.stdout, &l.counts, &l.dnsCounts)
	if err != nil {
		return err
	}
	l.cur.Store(a)
	if old != nil {
		go old.close()
	}
	return nil
}

// Start does nothing: the writer starts when Configure names a
// destination. With Stop, it makes the log a component of the server.
func (l *Log) Start(context.Context) error { return nil }

// Stop stops the writer after it wrote what is queued, waiting at most
// 5 s (or until ctx ends) for a destination that does not drain.
func (l *Log) Stop(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range []*accessLog{l.cur.Swap(nil), l.dnsCur.Swap(nil)} {
		if a != nil {
			l.stopWriter(ctx, a)
		}
	}
	return nil
}

// stopWriter stops writer a after it wrote what is queued, waiting at
// most 5 s (or until ctx ends).
func (l *Log) stopWriter(ctx context.Context, a *accessLog) {
	done := make(chan struct{})
	go func() { a.close(); close(done) }()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		l.log.Warn("access log: the destination did not take the last lines within 5 s", "path", a.settings.path)
	case <-ctx.Done():
		l.log.Warn("access log: the destination did not take the last lines before shutdown ended", "path", a.settings.path)
	}
}
