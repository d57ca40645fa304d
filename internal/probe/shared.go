package probe

// SharedTarget is one probe target of the plan as a fleet sees it: the
// target, a key the same on every instance running the same config (the
// probe address and the health check's name), and the check's
// thresholds, which the instances probing it apply before they publish.
type SharedTarget struct {
	Target Target
	Key    string
	// Healthy and Unhealthy are the check's healthyThreshold and
	// unhealthyThreshold.
	Healthy, Unhealthy int
	// Region is the region of the target's endpoints; Layered is true
	// when that region has a regional layer (regions[].regionalLayer):
	// its endpoints are then reached by the instances of the regional
	// layer, not by edges, and only those probe it (fleet.ProbeOwners).
	Region  string
	Layered bool
}
