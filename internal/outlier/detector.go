package outlier

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Change is one ejection or return reported by Result or Sweep.
type Change struct {
	// Endpoint is the endpoint's index.
	Endpoint int
	// Ejected is true for an ejection, false for a return to service.
	Ejected bool
	// Reason says why, for logs and the admin API: "3 consecutive gateway
	// failures (502/503/504 or no response)", "5 consecutive errors (5xx
	// or no response)", "success rate 12.0% below threshold 61.3%",
	// "ejection time 1m0s over".
	Reason string
	// Until is when the ejection ends: for an ejection the scheduled
	// return time, for a return the time the ejection was due to end
	// (which may be earlier than the Sweep that noticed it).
	Until time.Time
}

// endpoint is the Detector's state for one endpoint.
type endpoint struct {
	ejected bool
	// ejectedInInterval is set while the endpoint is ejected at any time
	// since the previous Sweep; it blocks the backoff decay.
	ejectedInInterval bool
	until             time.Time
	times             int // ejection count: the backoff multiplier
	errors, gateway   int // run counters
	total, success    int // outcomes since the previous Sweep
}

// Detector is the outlier detector of one backend service (in one proxy)
// for N endpoints, indexed 0..N-1. It is not safe for concurrent use: its
// owner serialises Result and Sweep calls.
type Detector struct {
	cfg      Config
	eps      []endpoint
	nEjected int
	// scratch for Sweep's success-rate analysis, reused between calls.
	cand []candidate
}

// rateTolerance is how far (in percentage points) below the threshold a
// success rate must be to count as an outlier.
const rateTolerance = 1e-9

type candidate struct {
	i    int
	rate float64 // percent
}

// New returns a Detector for endpoints endpoints, none of them ejected.
func New(cfg Config, endpoints int) *Detector {
	return &Detector{cfg: cfg, eps: make([]endpoint, endpoints)}
}

// Config returns the configuration d was built with.
func (d *Detector) Config() Config { return d.cfg }

// Len returns the number of endpoints.
func (d *Detector) Len() int { return len(d.eps) }

// Ejected reports whether endpoint i is ejected. An ejection whose time is
// over counts as ejected until a Sweep or Result notices it.
func (d *Detector) Ejected(i int) bool { return d.eps[i].ejected }

// EjectionCount returns endpoint i's current ejection count: the multiplier
// of BaseEjectionTime for an ejection in progress, or the one the next
// ejection would get minus one.
func (d *Detector) EjectionCount(i int) int { return d.eps[i].times }

// NextDeadline returns the earliest time an ejected endpoint is due to
// return, or the zero time if none is ejected.
func (d *Detector) NextDeadline() time.Time {
	var next time.Time
	for i := range d.eps {
		e := &d.eps[i]
		if e.ejected && (next.IsZero() || e.until.Before(next)) {
			next = e.until
		}
	}
	return next
}

// Result records the outcome of one request to endpoint i (0 <= i < N) at
// now. status is the HTTP status, or 0 when there was no response
// (connect failure, reset, timeout); 0 counts as a gateway failure. u is a
// uniform random number for the enforcing percentages. Result returns the
// changes it caused: a return (i's ejection time is over) and/or an
// ejection (a consecutive-failure run completed). When nothing changes it
// returns nil without allocating.
func (d *Detector) Result(i int, status int, now time.Time, u uint64) []Change {
	var out []Change
	e := &d.eps[i]
	if e.ejected && !now.Before(e.until) {
		out = append(out, d.unEject(i))
	}
	e.total++
	if status < 500 && status != 0 {
		e.success++
		e.errors, e.gateway = 0, 0
		return out
	}
	if e.ejected {
		return out
	}
	e.errors++
	if status == 0 || status == 502 || status == 503 || status == 504 {
		e.gateway++
	} else {
		e.gateway = 0
	}
	if n := d.cfg.ConsecutiveGatewayFailure; n > 0 && e.gateway >= n {
		e.gateway = 0
		if enforced(d.cfg.EnforcingConsecutiveGatewayFailure, u) && d.room() {
			out = append(out, d.eject(i, now, fmt.Sprintf("%d consecutive gateway failures (502/503/504 or no response)", n)))
			return out
		}
	}
	if n := d.cfg.ConsecutiveErrors; n > 0 && e.errors >= n {
		e.errors = 0
		if enforced(d.cfg.EnforcingConsecutiveErrors, u/100) && d.room() {
			out = append(out, d.eject(i, now, fmt.Sprintf("%d consecutive errors (5xx or no response)", n)))
		}
	}
	return out
}

// Sweep runs the interval analysis at now: returns of endpoints whose
// ejection time is over, backoff decay, and success-rate ejection over the
// outcomes recorded since the previous Sweep (see the package doc). Call
// it every Config.Interval. u is called once for each success-rate
// outlier whose ejection is probabilistic (0 < EnforcingSuccessRate <
// 100), so it may be nil otherwise. Sweep returns the changes, returns
// first, or nil if there are none.
func (d *Detector) Sweep(now time.Time, u func() uint64) []Change {
	var out []Change
	for i := range d.eps {
		e := &d.eps[i]
		switch {
		case e.ejected && !now.Before(e.until):
			out = append(out, d.unEject(i))
		case !e.ejected && !e.ejectedInInterval && e.times > 0:
			e.times--
		}
	}
	out = d.successRate(now, u, out)
	for i := range d.eps {
		e := &d.eps[i]
		e.total, e.success = 0, 0
		e.ejectedInInterval = e.ejected
	}
	return out
}

// successRate is step 3 of Sweep; it appends ejections to out.
func (d *Detector) successRate(now time.Time, u func() uint64, out []Change) []Change {
	volume := max(d.cfg.SuccessRateRequestVolume, 1)
	d.cand = d.cand[:0]
	for i := range d.eps {
		e := &d.eps[i]
		if !e.ejected && e.total >= volume {
			d.cand = append(d.cand, candidate{i, 100 * float64(e.success) / float64(e.total)})
		}
	}
	if len(d.cand) == 0 || len(d.cand) < d.cfg.SuccessRateMinimumHosts {
		return out
	}
	var sum float64
	for _, c := range d.cand {
		sum += c.rate
	}
	mean := sum / float64(len(d.cand))
	var sq float64
	for _, c := range d.cand {
		sq += (c.rate - mean) * (c.rate - mean)
	}
	stdev := math.Sqrt(sq / float64(len(d.cand)))
	threshold := mean - float64(d.cfg.SuccessRateStdevFactor)/1000*stdev
	slices.SortStableFunc(d.cand, func(a, b candidate) int {
		switch {
		case a.rate < b.rate:
			return -1
		case a.rate > b.rate:
			return 1
		}
		return 0
	})
	for _, c := range d.cand {
		// The tolerance keeps rounding in mean and stdev from making an
		// outlier of an endpoint whose rate equals everyone else's.
		if c.rate >= threshold-rateTolerance {
			break
		}
		pct := d.cfg.EnforcingSuccessRate
		var r uint64
		if pct > 0 && pct < 100 {
			r = u()
		}
		if enforced(pct, r) && d.room() {
			out = append(out, d.eject(c.i, now, fmt.Sprintf("success rate %.1f%% below threshold %.1f%%", c.rate, threshold)))
		}
	}
	return out
}

// room reports whether one more ejection stays within MaxEjectionPercent:
// (ejected+1)*100 <= N*MaxEjectionPercent.
func (d *Detector) room() bool {
	return (d.nEjected+1)*100 <= len(d.eps)*d.cfg.MaxEjectionPercent
}

// eject ejects endpoint i at now for BaseEjectionTime × its new ejection
// count and resets its run counters.
func (d *Detector) eject(i int, now time.Time, reason string) Change {
	e := &d.eps[i]
	e.times++
	e.ejected, e.ejectedInInterval = true, true
	e.until = now.Add(time.Duration(e.times) * d.cfg.BaseEjectionTime)
	e.errors, e.gateway = 0, 0
	d.nEjected++
	return Change{Endpoint: i, Ejected: true, Reason: reason, Until: e.until}
}

// unEject returns endpoint i to service. Its ejection count stays, to
// decay in later Sweeps.
func (d *Detector) unEject(i int) Change {
	e := &d.eps[i]
	e.ejected = false
	d.nEjected--
	return Change{
		Endpoint: i,
		Reason:   fmt.Sprintf("ejection time %v over", time.Duration(e.times)*d.cfg.BaseEjectionTime),
		Until:    e.until,
	}
}

// enforced rolls an enforcing percentage with the uniform random u.
func enforced(pct int, u uint64) bool {
	switch {
	case pct <= 0:
		return false
	case pct >= 100:
		return true
	}
	return u%100 < uint64(pct)
}
