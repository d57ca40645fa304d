package proxy

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/spillwaylb/spillway/internal/plan"
)

// hdrLoadMetrics is ORCA's per-response load report header
// (endpoint-load-metrics: "TEXT cpu_utilization=0.3, …" or "JSON {…}"),
// as Envoy and gRPC read it.
const hdrLoadMetrics = "Endpoint-Load-Metrics"

// maxUtilization bounds a reported utilisation: CPU utilisation may pass
// 1 (ORCA allows it), but not by orders of magnitude.
const maxUtilization = 100

// parseLoadReport returns the utilisation in an endpoint-load-metrics
// header value: application_utilization when it is set and above zero,
// else cpu_utilization, as gRPC's and Envoy's weighted round robin read
// ORCA reports. TEXT (comma-separated key=value pairs) and JSON (an
// object; proto field names or their lowerCamelCase JSON names) are
// read; ok is false for the binary form, a malformed report, one with
// neither field, or a value that is negative, not finite or above
// maxUtilization.
func parseLoadReport(v string) (u float64, ok bool) {
	var cpu, app float64
	var hasCPU, hasApp bool
	switch {
	case strings.HasPrefix(v, "TEXT "):
		for pair := range strings.SplitSeq(v[len("TEXT "):], ",") {
			k, val, found := strings.Cut(strings.TrimSpace(pair), "=")
			if !found {
				return 0, false
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				return 0, false
			}
			switch strings.TrimSpace(k) {
			case "cpu_utilization":
				cpu, hasCPU = f, true
			case "application_utilization":
				app, hasApp = f, true
			}
		}
	case strings.HasPrefix(v, "JSON "):
		var r struct {
			CPU  *float64 `json:"cpu_utilization"`
			CPUJ *float64 `json:"cpuUtilization"`
			App  *float64 `json:"application_utilization"`
			AppJ *float64 `json:"applicationUtilization"`
		}
		if json.Unmarshal([]byte(v[len("JSON "):]), &r) != nil {
			return 0, false
		}
		for _, p := range []*float64{r.CPU, r.CPUJ} {
			if p != nil {
				cpu, hasCPU = *p, true
			}
		}
		for _, p := range []*float64{r.App, r.AppJ} {
			if p != nil {
				app, hasApp = *p, true
			}
		}
	default:
		return 0, false
	}
	switch {
	case hasApp && app > 0:
		u = app
	case hasCPU:
		u = cpu
	default:
		return 0, false
	}
	if !(u >= 0 && u <= maxUtilization) {
		return 0, false
	}
	return u, true
}

// LoadReports counts the load reports of the endpoints of backends with
// balancingMode UTILIZATION, per (backend service, backend), for one
// plan: how many responses carried one and the sum of the utilisation
// they reported. serve reads them every demand window (Swap) to measure
// each backend's capacity. Lock-free, like Demand.
type LoadReports struct {
	first []int // index in c of each service's first backend
	c     []loadCounter
}

type loadCounter struct {
	n   atomic.Uint64 // responses with a report
	sum atomic.Uint64 // reported utilisation × loadScale, summed
	_   [48]byte      // pad to a 64-byte cache line
}

// loadScale is the fixed-point scale of summed utilisations.
const loadScale = 1e6

// NewLoadReports returns zeroed counters for p's backends.
func NewLoadReports(p *plan.Plan) *LoadReports {
	l := &LoadReports{first: make([]int, len(p.Services))}
	n := 0
	for i, svc := range p.Services {
		l.first[i] = n
		n += len(svc.Backends)
	}
	l.c = make([]loadCounter, n)
	return l
}

// observe counts the load report in h, a response of endpoint ep of svc,
// when ep's backend has balancingMode UTILIZATION. Safe on a nil
// LoadReports.
func (l *LoadReports) observe(svc *plan.Service, ep *plan.Endpoint, h map[string][]string) {
	v := h[hdrLoadMetrics]
	if l == nil || len(v) == 0 || svc == nil || ep == nil || svc.ID >= len(l.first) {
		return
	}
	for _, b := range svc.Backends {
		if b.Group != ep.Group {
			continue
		}
		if u, ok := parseLoadReport(v[0]); ok && b.Mode == "UTILIZATION" {
			if i := l.first[svc.ID] + b.Index; i < len(l.c) {
				l.c[i].n.Add(1)
				l.c[i].sum.Add(uint64(math.Round(u * loadScale)))
			}
		}
		return
	}
}

// Swap returns how many responses of (service, backend) carried a load
// report since the last Swap and the mean utilisation they reported, and
// resets both.
func (l *LoadReports) Swap(service, backend int) (n uint64, mean float64) {
	if l == nil || service < 0 || service >= len(l.first) {
		return 0, 0
	}
	i := l.first[service] + backend
	if backend < 0 || i >= len(l.c) || (service+1 < len(l.first) && i >= l.first[service+1]) {
		return 0, 0
	}
	n, sum := l.c[i].n.Swap(0), l.c[i].sum.Swap(0)
	if n == 0 {
		return 0, 0
	}
	return n, float64(sum) / loadScale / float64(n)
}
