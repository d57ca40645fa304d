package armor

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// The trie answers, for every address, exactly the rules one of whose
// prefixes contains it (random prefixes of both families, '*' included),
// as netip.Prefix.Contains says.
func TestPolicyTrieMatchesRuleTries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randAddr := func(v6 bool) netip.Addr {
		if v6 {
			var b [16]byte
			b[0], b[1] = 0x20, 0x01
			for i := 2; i < 16; i++ {
				b[i] = byte(rng.IntN(4)) // few distinct values: prefixes overlap
			}
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{198, 51, byte(rng.IntN(4)), byte(rng.IntN(256))})
	}
	for round := range 200 {
		pt := &policyTrie{}
		var rules [][]netip.Prefix // nil Prefix: '*'
		for i := range 1 + rng.IntN(64) {
			var rp []netip.Prefix
			for range 1 + rng.IntN(3) {
				var p netip.Prefix
				if rng.IntN(40) > 0 {
					v6 := rng.IntN(2) == 0
					bits := 16 + rng.IntN(17)
					if v6 {
						bits = 16 + rng.IntN(113)
					}
					p = netip.PrefixFrom(randAddr(v6), bits).Masked()
				}
				rp = append(rp, p)
				pt.add(p, 1<<i)
			}
			rules = append(rules, rp)
		}
		for range 200 {
			a := randAddr(rng.IntN(2) == 0)
			if rng.IntN(10) == 0 {
				a = netip.AddrFrom16(a.As16()) // mapped form of a v4 address, or v6 as is
			}
			got := pt.match(a)
			for i, rp := range rules {
				want := false
				for _, p := range rp {
					want = want || !p.IsValid() || p.Contains(a.Unmap())
				}
				if (got>>i&1 == 1) != want {
					t.Fatalf("round %d: rule %d on %s: trie %v, want %v", round, i, a, !want, want)
				}
			}
		}
	}
}
