package serve_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// A standalone instance shows no fleet status; once package fleet sets
// one, /health and /metrics show it.
func TestFleetStatusInHealthAndMetrics(t *testing.T) {
	c := servetest.Parse(t, oneServiceYAML("127.0.0.1:9", `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`, ""))
	s := servetest.Run(t, c, serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	cl := &http.Client{}
	health, err := getBody(cl, "http://"+s.AdminAddr()+"/health")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := getBody(cl, "http://"+s.AdminAddr()+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(health, `"fleet"`) || strings.Contains(metrics, "spillway_fleet_stale ") {
		t.Fatalf("standalone instance shows a fleet status:\n%s", health)
	}
	s.SetFleetStatus(control.FleetStatus{Instance: "lb-a", Revision: 3, Stale: true, StaleWhy: "etcd check: deadline exceeded"})
	health, _ = getBody(cl, "http://"+s.AdminAddr()+"/health")
	metrics, _ = getBody(cl, "http://"+s.AdminAddr()+"/metrics")
	for _, want := range []string{`"instance": "lb-a"`, `"configRevision": 3`, `"stale": true`, `"staleWhy": "etcd check: deadline exceeded"`} {
		if !strings.Contains(health, want) {
			t.Errorf("/health lacks %s", want)
		}
	}
	for _, want := range []string{"spillway_fleet_stale 1", "spillway_fleet_config_revision 3"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
