package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/spillwaylb/spillway/internal/plan"
)

// retryPolicy is the retry policy of one request: the route's, compiled
// by plan when the config was loaded, or plan's default for the method
// (Plan.RetryPolicy).
type retryPolicy plan.RetryPolicy

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
	pol := plan.RetryPolicy(*p)
	if at.resp == nil {
		if errors.Is(o.Err, context.Canceled) {
			return false // the client went away
		}
		f := plan.FailedOther
		switch {
		case o.ConnectFailure:
			f = plan.FailedConnect
		case isRefusedStream(o.Err):
			f = plan.FailedRefusedStream
		}
		return pol.RetriesFailure(f)
	}
	if pol.RetriesStatus(at.resp.StatusCode) {
		return true
	}
	if p.Cond >= plan.RetryGRPCCancelled {
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
		return p.Cond&plan.RetryGRPCCancelled != 0
	case "4":
		return p.Cond&plan.RetryGRPCDeadline != 0
	case "8":
		return p.Cond&plan.RetryGRPCExhausted != 0
	case "13":
		return p.Cond&plan.RetryGRPCInternal != 0
	case "14":
		return p.Cond&plan.RetryGRPCUnavailable != 0
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
