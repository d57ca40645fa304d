package armor

import "net/netip"

// ipTrie is a binary trie of IP prefixes (srcIpRanges), one per address
// family: Contains walks at most 32 (IPv4) or 128 (IPv6) nodes, whatever
// the number of ranges. IPv4-mapped IPv6 addresses are looked up as IPv4.
type ipTrie struct {
	v4, v6 *trieNode
	all    bool // '*': every address
}

type trieNode struct {
	child [2]*trieNode
	term  bool // a prefix ends here
	// rules is, in a policy's trie, the set of rules (bit i: the policy's
	// i-th source-range rule) one of whose prefixes ends here.
	rules uint64
}

// add inserts a prefix; the zero Prefix is '*'.
func (t *ipTrie) add(p netip.Prefix) {
	if !p.IsValid() {
		t.all = true
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
		if n.term {
			return // a shorter prefix already covers p
		}
		b := a[i/8] >> (7 - i%8) & 1
		if n.child[b] == nil {
			n.child[b] = &trieNode{}
		}
		n = n.child[b]
	}
	n.term, n.child = true, [2]*trieNode{}
}

// contains reports whether a is in one of the prefixes.
func (t *ipTrie) contains(a netip.Addr) bool {
	if t.all {
		return true
	}
	a = a.Unmap()
	n := t.v4
	if a.Is6() {
		n = t.v6
	}
	if n == nil {
		return false
	}
	var buf [16]byte
	var b []byte
	if a.Is4() {
		v := a.As4()
		b = buf[:copy(buf[:], v[:])]
	} else {
		buf = a.As16()
		b = buf[:]
	}
	for i := 0; n != nil; i++ {
		if n.term {
			return true
		}
		if i == len(b)*8 {
			return false
		}
		n = n.child[b[i/8]>>(7-i%8)&1]
	}
	return false
}

// policyTrie holds the source ranges of up to 64 rules of a policy: one
// walk gives the set of rules whose ranges contain an address.
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
