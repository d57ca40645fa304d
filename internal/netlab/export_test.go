//go:build linux

package netlab

// Forget drops n's record of its namespaces and processes and releases
// its lock without removing anything: what a crashed lab leaves behind.
func (n *Net) Forget() {
	n.mu.Lock()
	n.procs, n.ns = nil, nil
	n.mu.Unlock()
	n.lock.Close()
	n.lock = nil
}
