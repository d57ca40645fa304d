package armor

import "net/netip"

type trieNode struct {
	child [2]*trieNode
	// rules is the set of rules (bit i: the i-th rule of the trie) one
	// of whose prefixes ends here.
	rules uint64
}

// policyTrie is a binary trie of IP prefixes (srcIpRanges), one per
// address family, for up to 64 rules: one walk, at most 32 (IPv4) or 128
// (IPv6) nodes whatever the number of ranges, gives the set of rules
// whose ranges contain an address. IPv4-mapped IPv6 addresses are looked
// up as IPv4. A policy keeps all its source-range rules in one (up to
// 64 of them); past that each rule has its own, with one bit.
type policyTrie struct {
	v4, v6 *trieNode
	all    uint64 // rules with '*'
}

// add inserts rule bit's prefix (the zero Prefix is '*').
func (t *policyTrie) add(p netip.Prefix, bit uint64) {
	if !p.IsValid() {
		t.all |= bit
		return
	}
	root := &t.v4
	if p.Addr().Is6() {
		root = &t.v6
	}
	if *root == nil {
		*root = &trieNode{}
	}
	n := *root
	a := p.Addr().AsSlice()
	for i := range p.Bits() {
		b := a[i/8] >> (7 - i%8) & 1
		if n.child[b] == nil {
			n.child[b] = &trieNode{}
		}
		n = n.child[b]
	}
	n.rules |= bit
}

// match returns the set of rules whose ranges contain a.
func (t *policyTrie) match(a netip.Addr) uint64 {
	set := t.all
	a = a.Unmap()
	n := t.v4
	var buf [16]byte
	b := buf[:4]
	switch {
	case a.Is4():
		v := a.As4()
		copy(buf[:], v[:])
	case a.Is6():
		n, buf, b = t.v6, a.As16(), buf[:]
	default:
		return set
	}
	for i := 0; n != nil; i++ {
		set |= n.rules
		if i == len(b)*8 {
			break
		}
		n = n.child[b[i/8]>>(7-i%8)&1]
	}
	return set
}
