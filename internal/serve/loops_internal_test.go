package serve

import (
	"testing"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/proxy"
)

// The server loops follow spillway.http1Server, http2Server and
// parkIdleConnections, each defaulting to Spillway's own and to parking.
func TestServerLoops(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		name string
		t    *config.Tuning
		want loops
	}{
		{"defaults", nil, loops{h1: true, h2: proxy.H2Spillway, park: true}},
		{"empty", &config.Tuning{}, loops{h1: true, h2: proxy.H2Spillway, park: true}},
		{"net/http", &config.Tuning{HTTP1Server: "NET_HTTP", HTTP2Server: "NET_HTTP"}, loops{h1: false, h2: proxy.H2NetHTTP, park: true}},
		{"no parking", &config.Tuning{ParkIdleConnections: &no}, loops{h1: true, h2: proxy.H2Spillway, park: false}},
		{"parking", &config.Tuning{ParkIdleConnections: &yes}, loops{h1: true, h2: proxy.H2Spillway, park: true}},
	} {
		p := seedPlan(t)
		p.Config.Spillway = tc.t
		if got := serverLoops(p); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
