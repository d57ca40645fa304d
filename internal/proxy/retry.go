package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

// Retry conditions (routeAction.retryPolicy.retryConditions).
const (
	cond5xx             uint16 = 1 << iota // any 5xx, or no response at all
	condGateway                            // 502, 503, 504, or no response at all
	condGatewayCode                        // 502, 503, 504 only (the default without a policy)
	condConnect                            // the connection could not be made
	cond409                                // retriable-4xx: Google retries 409 only
	condRefused                            // HTTP/2 REFUSED_STREAM
	condGRPCCancelled                      // grpc-status 1
	condGRPCDeadline                       // grpc-status 4
	condGRPCExhausted                      // grpc-status 8
	condGRPCInternal                       // grpc-status 13
	condGRPCUnavailable                    // grpc-status 14
)

// retryPolicy is a route's retryPolicy reduced to what the loop needs.
type retryPolicy struct {
	retries int           // extra attempts after the first
	perTry  time.Duration // 0: only the request timeout applies
	cond    uint16
}

// newRetryPolicy compiles a retry policy for a request with the given
// method. Without one, Google retries a body-less request once after a
// 502, 503 or 504, and not a POST; Spillway does so only for idempotent
// methods (RFC 9110 §9.2.2: a proxy must not retry a non-idempotent
// request automatically, since the backend that answered may have acted
// on it), and retries any method once after a connect failure, when
// nothing reached a backend. An explicit policy applies to every method
// (config.Warnings says so when it can replay one).
func newRetryPolicy(rp *config.RetryPolicy, method string) retryPolicy {
	if rp == nil {
		if !config.IdempotentMethod(method) {
			return retryPolicy{retries: 1, cond: condConnect}
		}
		return retryPolicy{retries: 1, cond: condGatewayCode | condConnect}
	}
	p := retryPolicy{retries: 1}
	if rp.NumRetries != nil {
		p.retries = *rp.NumRetries
	}
	if d := rp.PerTryTimeout; d != nil {
		p.perTry = duration(d)
	}
	for _, c := range rp.RetryConditions {
		switch c {
		case "5xx":
			p.cond |= cond5xx
		case "gateway-error":
			p.cond |= condGateway
		case "connect-failure":
			p.cond |= condConnect
		case "retriable-4xx":
			p.cond |= cond409
		case "refused-stream":
			p.cond |= condRefused
		case "cancelled":
			p.cond |= condGRPCCancelled
		case "deadline-exceeded":
			p.cond |= condGRPCDeadline
		case "resource-exhausted":
			p.cond |= condGRPCExhausted
		case "internal":
			p.cond |= condGRPCInternal
		case "unavailable":
			p.cond |= condGRPCUnavailable
		}
	}
	return p
}

// retriable reports whether the policy retries an attempt. A request with
// a body is retried only after a connect failure that happened before the
// body was touched: its body cannot be replayed otherwise.
func (p *retryPolicy) retriable(at *attempt, body *trackedBody) bool {
	o := &at.out
	if o.ClientFault {
		return false // the client's body failed; another endpoint would not help
	}
	if body != nil && (!o.ConnectFailure || body.touched.Load()) {
		return false
	}
	if at.resp == nil {
		if errors.Is(o.Err, context.Canceled) {
			return false // the client went away
		}
		switch {
		case o.ConnectFailure:
			return p.cond&(cond5xx|condGateway|condConnect) != 0
		case isRefusedStream(o.Err) && p.cond&condRefused != 0:
			return true
		}
		return p.cond&(cond5xx|condGateway) != 0
	}
	s := at.resp.StatusCode
	switch {
	case s >= 500 && p.cond&cond5xx != 0:
		return true
	case (s == 502 || s == 503 || s == 504) && p.cond&(condGateway|condGatewayCode) != 0:
		return true
	case s == http.StatusConflict && p.cond&cond409 != 0:
		return true
	}
	if p.cond >= condGRPCCancelled {
		return p.grpc(at.resp.Header)
	}
	return false
}

// grpc checks a trailers-only gRPC response's grpc-status header.
func (p *retryPolicy) grpc(h http.Header) bool {
	v := h["Grpc-Status"]
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case "1":
		return p.cond&condGRPCCancelled != 0
	case "4":
		return p.cond&condGRPCDeadline != 0
	case "8":
		return p.cond&condGRPCExhausted != 0
	case "13":
		return p.cond&condGRPCInternal != 0
	case "14":
		return p.cond&condGRPCUnavailable != 0
	}
	return false
}

// isConnectFailure reports whether err happened while dialing.
func isConnectFailure(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isRefusedStream reports an HTTP/2 REFUSED_STREAM reset.
func isRefusedStream(err error) bool {
	return err != nil && strings.Contains(err.Error(), "REFUSED_STREAM")
}
