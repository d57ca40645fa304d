package anycast

import (
	"fmt"

	"github.com/spillwaylb/spillway/internal/control"
	"github.com/spillwaylb/spillway/internal/plan"
)

// Capacity is the healthy share of what a frontend reaches: the backend
// services its URL map can pick.
type Capacity struct {
	// Static marks a frontend with no backends to measure (a DNS
	// frontend): it serves while it listens.
	Static bool `json:"static,omitempty"`
	// Services counts the reachable services with capacity (a backend
	// not drained by an operator, capacityScaler above 0, members).
	Services int `json:"services"`
	// Share is the sum over those services of each one's healthy share
	// of its capacity (0-1 each); Percent averages it.
	Share float64 `json:"-"`
	// Healthy, Unknown and Members count the endpoints of those
	// services: healthy (and probed, when checked), not probed yet, all.
	Healthy int `json:"healthy"`
	Unknown int `json:"unknown"`
	Members int `json:"members"`
}

// Percent is the healthy share of the reachable capacity, 0-100: each
// service's healthy share of its capacity, averaged over the services
// (each counts the same, whatever the unit of its capacity).
func (c Capacity) Percent() float64 {
	if c.Static {
		return 100
	}
	if c.Services == 0 {
		return 0
	}
	return 100 * c.Share / float64(c.Services)
}

// counts says how many endpoints are healthy, for the details.
func (c Capacity) counts() string {
	return fmt.Sprintf("%d of %d endpoints healthy", c.Healthy, c.Members)
}

// Measure returns the capacity of services in st. A backend's capacity
// is its weight (its target capacity after the capacity scaler); its
// healthy part is the share of its members that are healthy, not
// ejected and, when they have a health check, probed at least once (an
// endpoint never probed serves in the proxy, but is no reason to attract
// traffic yet). A backend that auto-capacity drain has drained counts
// with nothing healthy; one at capacity 0 (capacityScaler 0, an
// operator's drain) does not count at all.
func Measure(st *control.State, services []*plan.Service) Capacity {
	var c Capacity
	for _, svc := range services {
		var healthy, total float64
		for _, b := range svc.Backends {
			if b.ZeroCapacity() || len(b.Endpoints) == 0 {
				continue
			}
			h := 0
			for _, e := range b.Endpoints {
				hs := st.Health(e.ID)
				switch {
				case e.HealthCheck != nil && !hs.Known():
					c.Unknown++
				case st.Healthy(e.ID):
					h++
				}
			}
			c.Members += len(b.Endpoints)
			total += b.Weight
			if !st.Drain(svc.ID, b.Index).Drained {
				c.Healthy += h
				healthy += b.Weight * float64(h) / float64(len(b.Endpoints))
			}
		}
		if total > 0 {
			c.Services++
			c.Share += healthy / total
		}
	}
	return c
}

// Services returns the plan's services of the given names (unknown names
// are left out): what a frontend's URL map reaches (route.Table.Services).
func Services(p *plan.Plan, names []string) []*plan.Service {
	var out []*plan.Service
	for _, n := range names {
		if s := p.ServiceByName[n]; s != nil {
			out = append(out, s)
		}
	}
	return out
}
