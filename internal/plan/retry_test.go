package plan

import (
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
)

func TestCompileRetryPolicy(t *testing.T) {
	three := 3
	rp := &config.RetryPolicy{
		RetryConditions: []string{"5xx", "gateway-error", "connect-failure", "retriable-4xx", "refused-stream",
			"cancelled", "deadline-exceeded", "resource-exhausted", "internal", "unavailable", "reset"},
		NumRetries:    &three,
		PerTryTimeout: &config.Duration{Seconds: 1, Nanos: 5e8},
	}
	want := RetryPolicy{Retries: 3, PerTry: 1500 * time.Millisecond,
		Cond: Retry5xx | RetryGateway | RetryConnect | Retry409 | RetryRefused | RetryGRPCCancelled |
			RetryGRPCDeadline | RetryGRPCExhausted | RetryGRPCInternal | RetryGRPCUnavailable}
	if got := CompileRetryPolicy(rp); got != want {
		t.Errorf("CompileRetryPolicy = %+v, want %+v", got, want)
	}
	if got := CompileRetryPolicy(&config.RetryPolicy{}); got != (RetryPolicy{Retries: 1}) {
		t.Errorf("empty policy = %+v, want one retry on no condition", got)
	}
	for method, want := range map[string]RetryPolicy{
		"GET":  {Retries: 1, Cond: RetryGatewayCode | RetryConnect},
		"PUT":  {Retries: 1, Cond: RetryGatewayCode | RetryConnect},
		"POST": {Retries: 1, Cond: RetryConnect},
	} {
		if got := (&Plan{}).RetryPolicy(nil, method); got != want {
			t.Errorf("default policy for %s = %+v, want %+v", method, got, want)
		}
	}
}

// TestRetryPoliciesCompiledOnce checks that Compile compiles every route
// action's retryPolicy, so a request looks its policy up instead of
// parsing condition strings.
func TestRetryPoliciesCompiledOnce(t *testing.T) {
	c := &config.Config{URLMaps: []config.URLMap{{
		Name:               "um",
		DefaultRouteAction: &config.HTTPRouteAction{RetryPolicy: &config.RetryPolicy{RetryConditions: []string{"5xx"}}},
		PathMatchers: []config.PathMatcher{{
			Name:               "pm",
			DefaultRouteAction: &config.HTTPRouteAction{RetryPolicy: &config.RetryPolicy{RetryConditions: []string{"gateway-error"}}},
			PathRules:          []config.PathRule{{Paths: []string{"/a"}, RouteAction: &config.HTTPRouteAction{RetryPolicy: &config.RetryPolicy{RetryConditions: []string{"connect-failure"}}}}},
			RouteRules:         []config.HTTPRouteRule{{RouteAction: &config.HTTPRouteAction{RetryPolicy: &config.RetryPolicy{RetryConditions: []string{"refused-stream"}}}}},
		}},
	}}}
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	pm := &c.URLMaps[0].PathMatchers[0]
	for rp, cond := range map[*config.RetryPolicy]RetryCond{
		c.URLMaps[0].DefaultRouteAction.RetryPolicy: Retry5xx,
		pm.DefaultRouteAction.RetryPolicy:           RetryGateway,
		pm.PathRules[0].RouteAction.RetryPolicy:     RetryConnect,
		pm.RouteRules[0].RouteAction.RetryPolicy:    RetryRefused,
	} {
		got, ok := p.retry[rp]
		if !ok || got.Cond != cond || got.Retries != 1 {
			t.Errorf("compiled %v = %+v (found %v), want cond %b", rp.RetryConditions, got, ok, cond)
		}
		if p.RetryPolicy(rp, "POST") != got {
			t.Errorf("RetryPolicy(%v) is not the compiled policy", rp.RetryConditions)
		}
	}
}

// The retry decisions the proxy and the simulator share.
func TestRetriesFailureAndStatus(t *testing.T) {
	def := DefaultRetryPolicy("GET")
	post := DefaultRetryPolicy("POST")
	gw := RetryPolicy{Retries: 1, Cond: RetryGateway}
	for _, tc := range []struct {
		name   string
		p      RetryPolicy
		fail   Failure
		status int
		want   bool
	}{
		{"GET connect failure", def, FailedConnect, 0, true},
		{"GET reset", def, FailedOther, 0, false},
		{"GET 503", def, 0, 503, true},
		{"GET 500", def, 0, 500, false},
		{"POST connect failure", post, FailedConnect, 0, true},
		{"POST 503", post, 0, 503, false},
		{"gateway-error reset", gw, FailedOther, 0, true},
		{"refused-stream", RetryPolicy{Cond: RetryRefused}, FailedRefusedStream, 0, true},
		{"refused-stream, other failure", RetryPolicy{Cond: RetryRefused}, FailedOther, 0, false},
		{"5xx 500", RetryPolicy{Cond: Retry5xx}, 0, 500, true},
		{"retriable-4xx 409", RetryPolicy{Cond: Retry409}, 0, 409, true},
	} {
		got := tc.p.RetriesStatus(tc.status)
		if tc.fail != 0 {
			got = tc.p.RetriesFailure(tc.fail)
		}
		if got != tc.want {
			t.Errorf("%s: retried %v, want %v", tc.name, got, tc.want)
		}
	}
}
