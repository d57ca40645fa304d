package gslb

import (
	"net/netip"
	"slices"
)

// locationTable maps client subnets to regions by longest-prefix match.
// It is small (a name's locations list), so lookups scan it; entries are
// sorted most specific first so the first match is the longest.
type locationTable struct {
	entries []location
}

// location is one locations[] entry; region is an index into the name's
// client regions.
type location struct {
	prefix netip.Prefix
	region int
}

// newLocationTable sorts entries most specific first.
func newLocationTable(entries []location) *locationTable {
	slices.SortStableFunc(entries, func(a, b location) int { return b.prefix.Bits() - a.prefix.Bits() })
	return &locationTable{entries: entries}
}

// lookup returns the region of addr (-1 when no entry matches) and the
// ECS scope prefix length for which that answer holds: the matched
// entry's length, lengthened where needed so that the scope does not
// overlap a more specific entry that maps elsewhere. For an address no
// entry matches, the scope is the shortest prefix around addr that
// overlaps no entry (gdnsd computes its scopes the same way).
func (t *locationTable) lookup(addr netip.Addr) (region, scope int) {
	region = -1
	if !addr.IsValid() {
		return -1, 0
	}
	addr = addr.Unmap()
	for _, e := range t.entries {
		if e.prefix.Addr().Is4() != addr.Is4() {
			continue
		}
		if e.prefix.Contains(addr) {
			if region < 0 {
				region = e.region
				scope = max(scope, e.prefix.Bits())
			}
			continue
		}
		// An entry not containing addr overlaps addr's /L network iff
		// L <= the common prefix length of addr and the entry.
		if c := commonBits(addr, e.prefix.Addr()); c+1 > scope {
			scope = c + 1
		}
	}
	return region, scope
}

// commonBits returns the number of leading bits a and b share (same
// family).
func commonBits(a, b netip.Addr) int {
	x, y := a.As16(), b.As16()
	start := 0
	if a.Is4() {
		start = 12
	}
	n := 0
	for i := start; i < 16; i++ {
		d := x[i] ^ y[i]
		if d == 0 {
			n += 8
			continue
		}
		for d&0x80 == 0 {
			n++
			d <<= 1
		}
		return n
	}
	return n
}
