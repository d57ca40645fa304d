// Package outlier is passive outlier detection for one backend service:
// Google Cloud's backendService.outlierDetection, which the Google front
// ends implement with Envoy's outlier detector. It watches the outcome of
// real requests and ejects (temporarily removes from load balancing)
// endpoints that fail too often.
//
// The package is pure: the caller passes every request outcome with its
// time and a random number, and calls Sweep once per Interval. Nothing here
// reads the clock, sleeps, starts goroutines or touches the network, so
// the simulator and the proxy drive the same code.
//
// # Algorithm
//
// Endpoints are dense indexes 0..N-1. For each endpoint the Detector keeps
// two run counters, the interval's request and success counts, an ejection
// count (the backoff multiplier) and, while ejected, the time it returns.
//
// Request outcomes (Detector.Result):
//
//   - An error is any 5xx or no response at all (status 0: connect failure,
//     reset, timeout). Google's proxy maps such local failures to 503, so
//     they are also gateway failures. A gateway failure is 502, 503, 504 or
//     no response. Everything else (1xx-4xx) is a success.
//   - A success resets both run counters. An error increments the errors
//     counter. A gateway failure increments the gateway counter, and any
//     other 5xx resets it (Envoy: the gateway run must be unbroken).
//   - When the gateway counter reaches consecutiveGatewayFailure the
//     counter is reset and the endpoint is ejected with probability
//     enforcingConsecutiveGatewayFailure percent. Then, if the endpoint is
//     still serving, the same is done for the errors counter with
//     consecutiveErrors and enforcingConsecutiveErrors. Resetting the
//     counter on every attempt (as Envoy does) means a failed roll or a
//     blocked ejection is retried after another full run, not on every
//     later error. Ejection is immediate, as in Envoy. A threshold <= 0
//     disables that detector.
//   - With Google's API defaults, consecutiveErrors (5) is not enforced
//     (enforcingConsecutiveErrors 0) while 3 consecutive gateway failures
//     eject with certainty.
//   - Outcomes reported for an endpoint that is already ejected (responses
//     still in flight when it was ejected) count towards the interval's
//     success rate figures but not towards the run counters, which are
//     reset at ejection: a returned endpoint must fail a full run again.
//
// Interval analysis (Detector.Sweep, every interval):
//
//  1. Every ejected endpoint whose time is over returns to service.
//  2. The backoff decays: an endpoint that was not ejected at any time
//     during the interval just ended and has an ejection count above zero
//     gets its count decremented by one (Envoy's ejection-time backoff
//     decay). An endpoint returned in step 1 was ejected during the
//     interval, so its count decays from the next Sweep on.
//  3. Success rate: the candidates are the endpoints that are not ejected
//     and had at least successRateRequestVolume requests (and at least one)
//     since the previous Sweep. If there are at least
//     successRateMinimumHosts candidates, the mean and the population
//     standard deviation of their success rates (percent) give the
//     threshold mean - (successRateStdevFactor/1000)*stdev. Candidates
//     strictly below it are ejected with probability enforcingSuccessRate
//     percent, lowest success rate first (ties by index), so that the
//     worst endpoints win when maxEjectionPercent leaves room for only
//     some of them.
//  4. The interval's request and success counts reset.
//
// Ejection time. The n-th ejection of an endpoint (n = its ejection count
// after incrementing it for this ejection) lasts baseEjectionTime*n.
// Because of the decay, an endpoint that stays healthy for n intervals
// after returning is back to base. Envoy also caps the time at
// max_ejection_time (default 300 s); Google exposes no such field and the
// docs are silent, so Spillway does not cap it. An ejected endpoint returns
// when a Sweep, or a Result for that endpoint, sees a time at or after its
// return time; NextDeadline gives the earliest return time so that a
// simulator can jump its clock there.
//
// Maximum ejection percent. An ejection happens only if, counting it,
// at most maxEjectionPercent of the endpoints are ejected:
// (ejected+1)*100 <= N*maxEjectionPercent. This is Envoy's check
// ((ejected+1)/N as a percentage compared with the maximum) without its
// always_eject_one_host option, which Google does not expose. So with 50%
// four endpoints allow two ejections, two endpoints allow one, and a
// single endpoint is never ejected (ejecting it would leave nothing to
// serve). The limit applies to all detectors together.
//
// Randomness. The enforcing percentages are rolled with uniform uint64
// values: u%100 < percent ejects. A percentage of 0 or below never ejects
// and 100 or above always ejects, without looking at the random value.
//
// Like Envoy and the Google front ends, each proxy instance runs its own
// detector: an ejection here says nothing about what other proxies do.
package outlier
