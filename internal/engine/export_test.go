package engine

// RingLen returns the number of points of a RING_HASH backend's ring.
func RingLen(v *View, service, backend int) int {
	return len(v.services[service].backends[backend].ring)
}

// TableLen returns the size of a MAGLEV backend's lookup table.
func TableLen(v *View, service, backend int) int {
	return len(v.services[service].backends[backend].table)
}
