package proxy

import (
	"net/http"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/route"
)

// fault applies a route's faultInjectionPolicy: first the delay, then the
// abort. It reports whether the request has been answered (aborted); a
// client that leaves during the delay aborts the handler. Aborted requests are not retried. An
// unset percentage means 100 (the fault is configured, so it applies;
// Google's documentation is silent).
func (h *handler) fault(rec *Record, w http.ResponseWriter, r *http.Request, f *config.FaultInjectionPolicy) bool {
	if d := f.Delay; d != nil && d.FixedDelay != nil && hit(h.rand, d.Percentage) {
		t := time.NewTimer(duration(d.FixedDelay))
		select {
		case <-t.C:
		case <-r.Context().Done():
			// The client left: abort rather than let the server
			// answer an implicit 200 (see exchange.fail).
			t.Stop()
			panic(http.ErrAbortHandler)
		}
	}
	if a := f.Abort; a != nil && hit(h.rand, a.Percentage) {
		lbAnswer(rec, w, a.HTTPStatus, sdFaultAbort, "fault injection abort")
		return true
	}
	return false
}

// hit draws whether an event of the given percentage (nil: 100) happens.
func hit(rand func() uint64, pct *float64) bool { return route.Percent(rand(), pct) }

// duration converts an API Duration.
func duration(d *config.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return time.Duration(d.Seconds)*time.Second + time.Duration(d.Nanos)
}
