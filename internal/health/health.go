// Package health is the per-endpoint health state machine: consecutive
// probe results against healthy/unhealthy thresholds. It is pure: results
// and their times are inputs.
package health

import "time"

// Thresholds are a health check's healthyThreshold and unhealthyThreshold.
type Thresholds struct {
	Healthy, Unhealthy int
}

// State is one endpoint's health. The zero value is "unknown", which
// Spillway treats as healthy (an endpoint serves until a probe says
// otherwise); the first probe result then sets the state directly, and
// later transitions need the thresholds' consecutive results. This avoids
// a cold-start 503 and still drops a dead endpoint on its first probe.
type State struct {
	known   bool
	healthy bool
	run     int // consecutive results against the current state
	// Since is when the state last changed (zero while unknown).
	Since time.Time
	// Detail is the last probe's detail ("HTTP 500", "connection refused").
	Detail string
}

// Healthy reports whether the endpoint may receive traffic.
func (s *State) Healthy() bool { return !s.known || s.healthy }

// Known reports whether any probe result has been observed.
func (s *State) Known() bool { return s.known }

// Observe steps the machine with one probe result and reports whether the
// state changed (healthy/unhealthy, or unknown to known).
func (s *State) Observe(ok bool, detail string, now time.Time, th Thresholds) bool {
	s.Detail = detail
	if !s.known {
		s.known, s.healthy, s.run, s.Since = true, ok, 0, now
		return true
	}
	if ok == s.healthy {
		s.run = 0
		return false
	}
	s.run++
	need := th.Unhealthy
	if ok {
		need = th.Healthy
	}
	if s.run < need {
		return false
	}
	s.healthy, s.run, s.Since = ok, 0, now
	return true
}
