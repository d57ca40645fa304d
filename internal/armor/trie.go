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
