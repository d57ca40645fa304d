package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/serve/report"
)

// get-health prints each regional layer's endpoints at an edge: state,
// connections and the last check.
func TestPrintHealthRegionalLayers(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	r := &report.Health{RegionalLayers: []report.RegionalLayer{{Region: "us-east1", Endpoints: []report.RegionalEndpoint{
		{Address: "198.51.100.10:8443", State: "SERVING", Connections: 2, Checked: at, Detail: "ok"},
		{Address: "198.51.100.11:8443", State: "SET_ASIDE", Checked: at, Detail: "context deadline exceeded"},
		{Address: "198.51.100.12:8443", State: "SERVING"},
	}}}}
	var out bytes.Buffer
	PrintHealth(&out, r)
	for _, want := range []string{
		"regional layer of us-east1",
		"198.51.100.10:8443           SERVING              2  2026-12-02T10:00:00Z ok",
		"198.51.100.11:8443           SET_ASIDE            0  2026-12-02T10:00:00Z context deadline exceeded",
		"198.51.100.12:8443           SERVING              0  -",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("get-health output lacks %q:\n%s", want, out.String())
		}
	}
}
