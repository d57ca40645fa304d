package proxy

import "sync/atomic"

// Demand counts requests per (backend service, client region) so that serve
// can measure the offered rate that RATE capacity is compared against. It is
// lock-free: each counter is an atomic word in a flat slice, padded to its
// own cache line so that two hot services do not false-share (every request
// on a frontend hits the same counter of its service, so cores contend on
// that line anyway; padding keeps unrelated services apart).
//
// Region -1 (a frontend without a region) has its own column, read with
// Swap(service, -1).
type Demand struct {
	cols int // regions + 1: the last column is "no region"
	c    []paddedCounter
}

type paddedCounter struct {
	n atomic.Uint64
	_ [56]byte // pad to a 64-byte cache line
}

// NewDemand returns zeroed counters for services × regions (plus a "no
// region" column).
func NewDemand(services, regions int) *Demand {
	if services < 0 {
		services = 0
	}
	if regions < 0 {
		regions = 0
	}
	return &Demand{cols: regions + 1, c: make([]paddedCounter, services*(regions+1))}
}

// index returns the counter of (service, region); ok is false when service
// is out of range. Regions out of range count as "no region".
func (d *Demand) index(service, region int) (int, bool) {
	if region < 0 || region >= d.cols-1 {
		region = d.cols - 1
	}
	i := service*d.cols + region
	return i, service >= 0 && i < len(d.c)
}

// Add counts one request. It is safe on a nil Demand (no counting).
func (d *Demand) Add(service, region int) {
	if d == nil {
		return
	}
	if i, ok := d.index(service, region); ok {
		d.c[i].n.Add(1)
	}
}

// Swap returns the count of (service, region) since the last Swap and
// resets it to zero.
func (d *Demand) Swap(service, region int) uint64 {
	if d == nil {
		return 0
	}
	if i, ok := d.index(service, region); ok {
		return d.c[i].n.Swap(0)
	}
	return 0
}
