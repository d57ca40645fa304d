package sim

import (
	"container/heap"
	"fmt"
	"strconv"
	"time"

	"github.com/spillwaylb/spillway/internal/engine"
	"github.com/spillwaylb/spillway/internal/plan"
)

// FailMode is what a down endpoint does to the requests sent to it before
// the health checks have taken it out (docs/semantics.md §4.3).
type FailMode uint8

// The failure modes of a down endpoint.
const (
	// FailRefused: the process is gone or its listeners are closed; a
	// connection is refused at once, and so is each probe (spillway lab
	// --fail-mode 2). The default.
	FailRefused FailMode = iota
	// FailBlackhole: the host or its network is gone; nothing answers, so
	// a connection attempt waits out the dial timeout (5 s, or less when
	// the per-try or backend timeout comes first) and a probe its
	// health check's timeout.
	FailBlackhole
	// FailHealthOnly: only the health checks fail; requests are still
	// served (spillway lab --fail-mode 1).
	FailHealthOnly
)

// String returns the mode's flag value.
func (m FailMode) String() string {
	switch m {
	case FailBlackhole:
		return "blackhole"
	case FailHealthOnly:
		return "health"
	}
	return "refused"
}

// ParseFailMode parses a --fail-as value.
func ParseFailMode(s string) (FailMode, error) {
	for _, m := range []FailMode{FailRefused, FailBlackhole, FailHealthOnly} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("--fail-as %q: unknown failure (fix: use refused, blackhole or health)", s)
}

// dialTimeout is how long the proxy waits for a backend connection
// (h1.BackendDialTimeout; a test keeps the two equal).
const dialTimeout = 5 * time.Second

// flight is a request whose attempt failed and that waits for its retry
// (or its answer) at virtual time at.
type flight struct {
	at       time.Time
	deadline time.Time
	svc      *plan.Service
	policy   plan.RetryPolicy
	perTry   time.Duration
	failed   *plan.Endpoint // the endpoint of the attempt that failed
	fail     plan.Failure
	tries    int // attempts made
	bucket   int // timeline index, -1 in count mode
}

// flights is a queue of requests in flight, earliest first.
type flights []*flight

func (q flights) Len() int           { return len(q) }
func (q flights) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q flights) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *flights) Push(x any)        { *q = append(*q, x.(*flight)) }
func (q *flights) Pop() any {
	old := *q
	f := old[len(old)-1]
	*q = old[:len(old)-1]
	return f
}

// attempt sends one attempt of f to ep at s.now. It returns true when the
// endpoint answers; otherwise f holds the failure and f.at when it is
// known: at once for a refused connection, after the dial, per-try or
// backend timeout (whichever comes first) for a blackholed endpoint, as
// the proxy's transport does.
func (s *sim) attempt(f *flight, ep *plan.Endpoint) bool {
	f.tries++
	f.failed = ep
	if !s.down[ep.ID] || s.o.FailAs == FailHealthOnly {
		return true
	}
	f.at, f.fail = s.now, plan.FailedConnect
	if s.o.FailAs != FailBlackhole {
		return false
	}
	wait := min(dialTimeout, f.deadline.Sub(s.now))
	if f.perTry > 0 && f.perTry < wait {
		// The per-try timeout ends the attempt: not a connect failure
		// to the proxy, which answers 504 if it is not retried.
		wait, f.fail = f.perTry, plan.FailedOther
	}
	f.at = s.now.Add(max(wait, 0))
	return false
}

// retry makes the retry of f, due now, or answers its failure. It
// returns the status code and the zone that served it ("" for none).
func (s *sim) retry(f *flight) (code string, zone string, done bool) {
	if f.tries > f.policy.Retries || !s.now.Before(f.deadline) || !f.policy.RetriesFailure(f.fail) {
		return s.failure(f), "", true
	}
	s.res.Retries++
	if f.bucket >= 0 {
		s.res.Timeline[f.bucket].Retried++
	}
	d := s.view.PickExcept(f.svc.ID, s.client, s.rng.Uint64(), f.failed)
	if d.Status != 0 {
		return s.failure(f), "", true
	}
	if s.attempt(f, d.Endpoint) {
		return "200", d.Backend.Group.ZoneOrRegion(), true
	}
	return "", "", false
}

// failure counts why f failed and returns the proxy's answer: 503
// (failed_to_connect_to_backend) after a connect failure, 504 after a
// per-try timeout.
func (s *sim) failure(f *flight) string {
	code, why := 503, "failed_to_connect_to_backend: endpoint down, not yet detected by its health checks"
	if f.fail != plan.FailedConnect {
		code, why = 504, "backend_timeout: endpoint down, not yet detected by its health checks"
	}
	s.reason(why)
	return strconv.Itoa(code)
}

// land settles requests in flight whose next step is due by until,
// advancing the clock to each.
func (s *sim) land(until time.Time) {
	for len(s.flying) > 0 && !s.flying[0].at.After(until) {
		f := heap.Pop(&s.flying).(*flight)
		if f.at.After(s.now) {
			s.advance(f.at)
		}
		code, zone, done := s.retry(f)
		if !done {
			heap.Push(&s.flying, f)
			continue
		}
		s.count(f.bucket, code, zone)
	}
}

// count adds a request's answer to the result and to its timeline bucket.
func (s *sim) count(bucket int, code, zone string) {
	s.res.Status[code]++
	if zone != "" {
		s.res.Zones[zone]++
		s.res.Regions[s.zoneRegion(zone)]++
	}
	if bucket < 0 {
		return
	}
	b := &s.res.Timeline[bucket]
	b.Status[code]++
	if zone != "" {
		b.Zones[zone]++
	}
}

// zoneRegion returns the region of a zone of the plan (a regional
// group's zone is its region).
func (s *sim) zoneRegion(zone string) string {
	for _, g := range s.p.Groups {
		if g.ZoneOrRegion() == zone {
			return g.Region
		}
	}
	return ""
}

// send makes the first attempt of a request to decision d of service svc
// under retry policy pol and timeout; it returns the answer when it is
// known now, or queues the request in flight.
func (s *sim) send(d engine.Decision, pol plan.RetryPolicy, timeout time.Duration, bucket int) (code, zone string, done bool) {
	if !s.down[d.Endpoint.ID] || s.o.FailAs == FailHealthOnly {
		return "200", d.Backend.Group.ZoneOrRegion(), true // no flight to allocate
	}
	f := &flight{deadline: s.now.Add(timeout), svc: d.Service, policy: pol, perTry: pol.PerTry, bucket: bucket}
	if s.attempt(f, d.Endpoint) {
		return "200", d.Backend.Group.ZoneOrRegion(), true
	}
	for f.at.Equal(s.now) {
		if code, zone, done = s.retry(f); done {
			return code, zone, true
		}
	}
	heap.Push(&s.flying, f)
	return "", "", false
}
