package gslb

import (
	"fmt"
	"net/netip"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/plan"
)

// calculatedTargets adds the probe targets of calculated check c of m:
// one per child, each with the hysteresis of its own health check, all
// of c's layer and tagged with a group of their own (LayerCheck.Group),
// so that Layered counts them as one check that passes while at least
// minHealthy children pass.
func (n *gname) calculatedTargets(m *member, c config.GSLBMemberCheck, cfg *config.Config, p *plan.Plan) error {
	group := 1
	for _, lc := range m.checks {
		group = max(group, lc.Group+1)
	}
	for _, child := range c.Calculated.Checks {
		addr := m.addr
		if child.Address != "" {
			a, err := netip.ParseAddr(child.Address)
			if err != nil {
				return fmt.Errorf("gslb: %s: member %q: calculated check address: %w", n.owner, m.name, err)
			}
			addr = a.Unmap()
		}
		if err := n.probeTarget(m, config.GSLBMemberCheck{Name: child.Name, Layer: c.Layer}, addr, cfg, p); err != nil {
			return err
		}
		lc := &m.checks[len(m.checks)-1]
		lc.Group, lc.MinHealthy = group, c.Calculated.MinHealthy
	}
	return nil
}
