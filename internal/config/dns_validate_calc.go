package config

import (
	"fmt"
	"net/netip"
)

// gslbCalculated validates a calculated member check: no name of its
// own, 1 to DNSMaxCalculatedChecks children, each a health check with a
// fixed port at an optional address, each (check, address) once, and
// minHealthy between 1 and the number of children.
func (v *validator) gslbCalculated(cp string, c GSLBMemberCheck) {
	calc := c.Calculated
	if c.Name != "" {
		v.add(cp+".name", "remove the name; list the checks under calculated.checks",
			"name and calculated are exclusive")
	}
	p := cp + ".calculated"
	n := len(calc.Checks)
	switch {
	case n == 0:
		v.add(p+".checks", "list the child checks, e.g. checks: [{name: hc, address: 10.0.0.1}, {name: hc, address: 10.0.0.2}]",
			"at least one child check is required")
	case n > DNSMaxCalculatedChecks:
		v.add(p+".checks", fmt.Sprintf("keep at most %d child checks", DNSMaxCalculatedChecks), "%d child checks are too many", n)
	}
	if n > 0 && (calc.MinHealthy < 1 || calc.MinHealthy > n) {
		v.add(p+".minHealthy", fmt.Sprintf("use 1 to %d (the number of child checks)", n),
			"minHealthy %d is out of range", calc.MinHealthy)
	}
	seen := map[string]int{}
	for k, ch := range calc.Checks {
		kp := at("%s.checks[%d]", p, k)
		addr := "the member's address"
		if ch.Address != "" {
			a, err := netip.ParseAddr(ch.Address)
			if err != nil || a.Zone() != "" {
				v.add(kp+".address", "write an IPv4 or IPv6 address without a port, e.g. 10.0.0.1, or leave it out to probe the member's address",
					"%q is not an IP address", ch.Address)
				continue
			}
			addr = a.Unmap().String()
		}
		if ch.Name == "" {
			v.add(kp+".name", "name a healthChecks[] entry, e.g. {name: hc-web, address: 10.0.0.1}", "a health check name is required")
			continue
		}
		key := RefName(ch.Name) + " at " + addr
		if first, dup := seen[key]; dup {
			v.add(kp, "list each check and address once", "%s is already checks[%d]", key, first)
			continue
		}
		seen[key] = k
		v.gslbHealthCheck(kp+".name", ch.Name)
	}
}
