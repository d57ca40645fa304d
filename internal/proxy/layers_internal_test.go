package proxy

import (
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/plan"
)

// FuzzParseEdgeRetry: whatever a trusted edge's retry header holds, the
// parse does not panic, and what parses formats back to a header that
// parses to the same policy.
func FuzzParseEdgeRetry(f *testing.F) {
	f.Add(formatEdgeRetry(plan.RetryPolicy{Retries: 2, Cond: plan.Retry5xx | plan.RetryConnect, PerTry: 1500 * time.Millisecond}))
	f.Add("1,0,0")
	f.Add("-1,3,5")
	f.Add("1,99999,5")
	f.Add(",,")
	f.Add("1,1,9999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parseEdgeRetry(s)
		if !ok {
			return
		}
		if p.Retries < 0 || p.Retries > 25 || p.PerTry < 0 {
			t.Fatalf("%q parsed to %+v", s, p)
		}
		q, ok := parseEdgeRetry(formatEdgeRetry(p))
		if !ok || q != p {
			t.Fatalf("%q: %+v formats to %q, which parses to %+v, %v", s, p, formatEdgeRetry(p), q, ok)
		}
	})
}
