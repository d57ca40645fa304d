package plan

import (
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// RetryCond is a set of retry conditions, one bit each.
type RetryCond uint16

// Retry conditions (routeAction.retryPolicy.retryConditions).
const (
	Retry5xx             RetryCond = 1 << iota // any 5xx, or no response at all
	RetryGateway                               // 502, 503, 504, or no response at all
	RetryGatewayCode                           // 502, 503, 504 only (the default without a policy)
	RetryConnect                               // the connection could not be made
	Retry409                                   // retriable-4xx: Google retries 409 only
	RetryRefused                               // HTTP/2 REFUSED_STREAM
	RetryGRPCCancelled                         // grpc-status 1
	RetryGRPCDeadline                          // grpc-status 4
	RetryGRPCExhausted                         // grpc-status 8
	RetryGRPCInternal                          // grpc-status 13
	RetryGRPCUnavailable                       // grpc-status 14
)

// retryCond returns the bit of a retryConditions string, 0 for the
// conditions config accepts and Spillway does not act on.
func retryCond(c string) RetryCond {
	switch c {
	case "5xx":
		return Retry5xx
	case "gateway-error":
		return RetryGateway
	case "connect-failure":
		return RetryConnect
	case "retriable-4xx":
		return Retry409
	case "refused-stream":
		return RetryRefused
	case "cancelled":
		return RetryGRPCCancelled
	case "deadline-exceeded":
		return RetryGRPCDeadline
	case "resource-exhausted":
		return RetryGRPCExhausted
	case "internal":
		return RetryGRPCInternal
	case "unavailable":
		return RetryGRPCUnavailable
	}
	return 0
}

// RetryPolicy is a route's retryPolicy reduced to what a retry loop needs.
type RetryPolicy struct {
	Retries int           // extra attempts after the first
	PerTry  time.Duration // 0: only the request timeout applies
	Cond    RetryCond
}

// CompileRetryPolicy compiles an explicit retry policy (rp not nil). It
// applies to every method (config.Warnings says so when it can replay a
// non-idempotent one).
func CompileRetryPolicy(rp *config.RetryPolicy) RetryPolicy {
	p := RetryPolicy{Retries: 1}
	if rp.NumRetries != nil {
		p.Retries = *rp.NumRetries
	}
	if d := rp.PerTryTimeout; d != nil {
		p.PerTry = time.Duration(d.Seconds)*time.Second + time.Duration(d.Nanos)
	}
	for _, c := range rp.RetryConditions {
		p.Cond |= retryCond(c)
	}
	return p
}

// Failure is how an attempt that got no response failed, as far as
// retries care.
type Failure uint8

// The failures of an attempt without a response.
const (
	// FailedConnect: the connection could not be made (refused,
	// unreachable, a dial that timed out): nothing reached a backend.
	FailedConnect Failure = iota + 1
	// FailedRefusedStream: an HTTP/2 REFUSED_STREAM reset.
	FailedRefusedStream
	// FailedOther: a reset, a per-try timeout, a malformed response:
	// anything after the connection was made.
	FailedOther
)

// RetriesFailure reports whether p retries an attempt that got no
// response and failed as f. The proxy and the simulator both decide
// with it (the proxy first rules out client faults, cancelled requests
// and bodies it cannot replay).
func (p RetryPolicy) RetriesFailure(f Failure) bool {
	switch {
	case f == FailedConnect:
		return p.Cond&(Retry5xx|RetryGateway|RetryConnect) != 0
	case f == FailedRefusedStream && p.Cond&RetryRefused != 0:
		return true
	}
	return p.Cond&(Retry5xx|RetryGateway) != 0
}

// RetriesStatus reports whether p retries an attempt answered with
// HTTP status s (gRPC statuses aside, which need the response's
// headers).
func (p RetryPolicy) RetriesStatus(s int) bool {
	switch {
	case s >= 500 && p.Cond&Retry5xx != 0:
		return true
	case (s == 502 || s == 503 || s == 504) && p.Cond&(RetryGateway|RetryGatewayCode) != 0:
		return true
	}
	return s == 409 && p.Cond&Retry409 != 0
}

// DefaultRetryPolicy is the policy of a route without retryPolicy for a
// request with the given method. Google retries a body-less request once
// after a 502, 503 or 504, and not a POST; Spillway does so only for
// idempotent methods (RFC 9110 §9.2.2: a proxy must not retry a
// non-idempotent request automatically, since the backend that answered
// may have acted on it), and retries any method once after a connect
// failure, when nothing reached a backend.
func DefaultRetryPolicy(method string) RetryPolicy {
	if !config.IdempotentMethod(method) {
		return RetryPolicy{Retries: 1, Cond: RetryConnect}
	}
	return RetryPolicy{Retries: 1, Cond: RetryGatewayCode | RetryConnect}
}

// RetryPolicy returns the retry policy for a request with the given
// method under a route action's retryPolicy rp (nil: none, the default
// for the method). A policy of this plan's config was compiled once by
// Compile; any other is compiled now.
func (p *Plan) RetryPolicy(rp *config.RetryPolicy, method string) RetryPolicy {
	if rp == nil {
		return DefaultRetryPolicy(method)
	}
	if c, ok := p.retry[rp]; ok {
		return c
	}
	return CompileRetryPolicy(rp)
}

// compileRetryPolicies compiles the retry policy of every route action
// of every URL map of c into p.retry.
func (p *Plan) compileRetryPolicies(c *config.Config) {
	p.retry = map[*config.RetryPolicy]RetryPolicy{}
	add := func(ra *config.HTTPRouteAction) {
		if ra != nil && ra.RetryPolicy != nil {
			p.retry[ra.RetryPolicy] = CompileRetryPolicy(ra.RetryPolicy)
		}
	}
	for i := range c.URLMaps {
		um := &c.URLMaps[i]
		add(um.DefaultRouteAction)
		for j := range um.PathMatchers {
			pm := &um.PathMatchers[j]
			add(pm.DefaultRouteAction)
			for k := range pm.RouteRules {
				add(pm.RouteRules[k].RouteAction)
			}
			for k := range pm.PathRules {
				add(pm.PathRules[k].RouteAction)
			}
		}
	}
}
