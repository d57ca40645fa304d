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
}
