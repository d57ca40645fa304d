package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spillwaylb/spillway/internal/serve/report"
)

// printRegionalLayers prints an edge's regional layers: each endpoint's
// state, connections and last health check.
func printRegionalLayers(w io.Writer, layers []report.RegionalLayer) {
	for _, l := range layers {
		fmt.Fprintf(w, "regional layer of %s\n", l.Region)
		fmt.Fprintf(w, "  %-28s %-10s %11s  %s\n", "ENDPOINT", "STATE", "CONNECTIONS", "LAST CHECK")
		for _, e := range l.Endpoints {
			check := "-"
			if !e.Checked.IsZero() {
				check = e.Checked.Format(time.RFC3339) + " " + e.Detail
			}
			fmt.Fprintf(w, "  %-28s %-10s %11d  %s\n", e.Address, e.State, e.Connections, check)
		}
	}
}
