package gslb

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// LatencyBuckets is the size of the passive latency histogram. Bucket 0
// holds latencies under 1.024 ms; above that each power of two is split
// into four (log-linear, at most 25 % wide), up to about 34 s in the
// last bucket, which also holds everything slower.
const LatencyBuckets = 64

// latencyBucket returns the histogram bucket of d.
func latencyBucket(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 1024 {
		return 0
	}
	e := bits.Len64(us) - 1 // >= 10
	sub := int(us>>(e-2)) & 3
	return min(1+(e-10)*4+sub, LatencyBuckets-1)
}

// bucketLower returns the smallest latency of bucket i.
func bucketLower(i int) time.Duration {
	if i <= 0 {
		return 0
	}
	e := 10 + (i-1)/4
	sub := (i - 1) % 4
	return time.Duration(uint64(4+sub)<<(e-2)) * time.Microsecond
}

// PassiveCounters count the real requests one of Spillway's frontends
// proxies: cumulative, lock-free counters that the request path bumps
// (two atomic adds per request, no allocation, no channel) and a sampler
// reads every few seconds. The zero value is ready to use.
type PassiveCounters struct {
	errors  atomic.Uint64
	latency [LatencyBuckets]atomic.Uint64
}

// Record counts one request that took latency; failed marks an error
// (a 5xx, a connect failure or a timeout).
func (c *PassiveCounters) Record(latency time.Duration, failed bool) {
	c.latency[latencyBucket(latency)].Add(1)
	if failed {
		c.errors.Add(1)
	}
}

// Sample returns the counters' current totals. Counters are read one
// by one while requests go on, so a sample may be off by the requests
// of those few nanoseconds.
func (c *PassiveCounters) Sample() PassiveSample {
	var s PassiveSample
	for i := range c.latency {
		n := c.latency[i].Load()
		s.Latency[i] = n
		s.Requests += n
	}
	s.Errors = min(c.errors.Load(), s.Requests)
	return s
}

// PassiveSample is a snapshot of cumulative request counters.
type PassiveSample struct {
	Requests, Errors uint64
	// Latency counts requests per latency bucket (see LatencyBuckets).
	Latency [LatencyBuckets]uint64
}

// Add adds o to s (a member served by several frontends).
func (s *PassiveSample) Add(o *PassiveSample) {
	s.Requests += o.Requests
	s.Errors += o.Errors
	for i := range s.Latency {
		s.Latency[i] += o.Latency[i]
	}
}

// PassiveStats are the requests of one window.
type PassiveStats struct {
	Requests, Errors uint64
	// ErrorRate is Errors/Requests (0 without requests).
	ErrorRate float64
	// P95 is the 95th percentile latency, interpolated inside its
	// histogram bucket.
	P95 time.Duration
}

// PassiveWindow turns cumulative samples into the stats of a sliding
// window. It is pure: time is an argument.
type PassiveWindow struct {
	// Window is the span the stats cover.
	Window time.Duration

	samples []timedSample // oldest first
}

type timedSample struct {
	at time.Time
	s  PassiveSample
}

// Add records sample s taken at now. The window keeps the newest sample
// at least Window old as its baseline and drops older ones. Counters that
// went backwards (a restarted frontend) restart the window.
func (w *PassiveWindow) Add(now time.Time, s PassiveSample) {
	if n := len(w.samples); n > 0 && (s.Requests < w.samples[n-1].s.Requests || s.Errors < w.samples[n-1].s.Errors) {
		w.samples = w.samples[:0]
	}
	w.samples = append(w.samples, timedSample{now, s})
	cut := now.Add(-w.Window)
	drop := 0
	for drop+1 < len(w.samples) && !w.samples[drop+1].at.After(cut) {
		drop++
	}
	if drop > 0 {
		w.samples = append(w.samples[:0], w.samples[drop:]...)
	}
}

// Stats returns the requests between the baseline and the newest sample
// (a shorter span until the window has filled).
func (w *PassiveWindow) Stats() PassiveStats {
	n := len(w.samples)
	if n < 2 {
		return PassiveStats{}
	}
	a, b := &w.samples[0].s, &w.samples[n-1].s
	st := PassiveStats{Requests: b.Requests - a.Requests, Errors: b.Errors - a.Errors}
	if st.Requests == 0 {
		return st
	}
	st.ErrorRate = float64(st.Errors) / float64(st.Requests)
	// The 95th percentile: the request of rank ceil(0.95 n), placed
	// linearly inside its bucket.
	rank := (st.Requests*95 + 99) / 100
	var seen uint64
	for i := range b.Latency {
		c := b.Latency[i] - a.Latency[i]
		if c == 0 || seen+c < rank {
			seen += c
			continue
		}
		lo, hi := bucketLower(i), bucketLower(i+1)
		if i == LatencyBuckets-1 {
			hi = lo
		}
		st.P95 = lo + time.Duration(float64(hi-lo)*float64(rank-seen)/float64(c))
		break
	}
	return st
}

// PassivePolicy decides from a window's stats whether a member's weight
// is halved (seed 004: error rate above 1.5 % or p95 above 400 ms over
// 30 s).
type PassivePolicy struct {
	Window       time.Duration
	MaxErrorRate float64
	MaxP95       time.Duration
	// MinRequests is the sample a window needs to change the decision.
	MinRequests uint64
}

// Degraded returns the decision for st given the current one, was: a
// window with too few requests keeps it, an empty one clears it (no
// evidence), a full one decides. With hysteresis, so that a member near
// a threshold does not flap: a member becomes degraded above either
// threshold and recovers only when its error rate is at most half of
// MaxErrorRate and its p95 at most 3/4 of MaxP95.
func (p PassivePolicy) Degraded(st PassiveStats, was bool) bool {
	switch {
	case st.Requests == 0:
		return false
	case st.Requests < p.MinRequests:
		return was
	case was:
		return st.ErrorRate > p.MaxErrorRate/2 || st.P95 > p.MaxP95*3/4
	}
	return st.ErrorRate > p.MaxErrorRate || st.P95 > p.MaxP95
}
