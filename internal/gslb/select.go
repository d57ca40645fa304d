package gslb

import (
	"time"

	"github.com/miekg/dns"
)

// unit maps a uniform uint64 to [0, 1).
func unit(u uint64) float64 { return float64(u>>11) * (1.0 / (1 << 53)) }

// memberSet is a set of member indexes (pools have at most
// config.DNSMaxMembers = 256 members), kept on the stack.
type memberSet [4]uint64

func (s *memberSet) has(i int) bool { return s[i>>6]&(1<<(i&63)) != 0 }
func (s *memberSet) add(i int)      { s[i>>6] |= 1 << (i & 63) }

// answer appends the addresses of the family of qtype (A or AAAA) that
// name answers from ladder l at now, and reports whether the name is in
// transition (answers then carry the transition TTL). rnd draws uniform
// numbers.
//
// The walk: each tier of the ladder takes the query with probability p,
// the largest fraction (ramp fraction × weight factor) among its healthy
// members (1 once any member is fully back at full weight), and passes
// the rest to the next tier; if no tier takes it, the first tier with a
// healthy member of non-zero fraction does. Within the tier, members are
// drawn by weight × fraction. Members whose factor is 0 (a failing
// synthetic check) are answered only when no healthy member has a
// non-zero fraction: then the first tier holding one is drawn from by
// weight × ramp fraction. When answerCount > 1, further
// members come from the same tier, then the later tiers, then the earlier
// ones. When no member of the family is healthy the answer is the
// fallback members, or all members when there are none ("least bad").
func (n *gname) answer(out []dns.RR, l int, qtype uint16, now time.Time, rnd func() uint64) ([]dns.RR, bool) {
	st := n.state.Load()
	v6 := qtype == dns.TypeAAAA
	trans := now.Before(st.stableAfter)
	tiers := n.ladders[l]
	start, useFactor := n.startTier(st, tiers, v6, now, unit(rnd()))
	if start < 0 {
		return n.fallback(out, v6, trans, rnd), trans
	}
	var chosen memberSet
	want := n.answerCount
	eligible := func(i int) (float64, bool) {
		m := &n.members[i]
		if m.addr.Is6() != v6 || !st.members[i].healthy {
			return 0, false
		}
		w := st.members[i].ramp.Weight(now)
		if useFactor {
			w *= st.members[i].factor
		}
		return m.weight * w, w > 0
	}
	got := 0
	for k := range tiers {
		t := (start + k) % len(tiers)
		for got < want {
			i := draw(tiers[t], eligible, &chosen, rnd)
			if i < 0 {
				break
			}
			chosen.add(i)
			out = append(out, n.memberRR(i, trans))
			got++
		}
		if got == want {
			break
		}
	}
	return out, trans
}

// memberRR is member i's address record, with the transition TTL when
// trans.
func (n *gname) memberRR(i int, trans bool) dns.RR {
	if trans {
		return n.members[i].rrTrans
	}
	return n.members[i].rr
}

// startTier returns the tier of ladder tiers the answer starts from,
// chosen with the uniform draw x among the tiers with healthy members
// of the family (v6) by their ramped, factored weight, and whether
// factors count: not when only zero-factor members are left. It returns
// -1 when no member of the family is up.
func (n *gname) startTier(st *nameState, tiers [][]int, v6 bool, now time.Time, x float64) (int, bool) {
	start, first, zeroed := -1, -1, -1
	for t, tier := range tiers {
		p := 0.0
		for _, i := range tier {
			if ms := &st.members[i]; n.members[i].addr.Is6() == v6 && ms.healthy {
				r := ms.ramp.Weight(now)
				p = max(p, r*ms.factor)
				if zeroed < 0 && r > 0 {
					zeroed = t
				}
			}
		}
		if p == 0 {
			continue
		}
		if first < 0 {
			first = t
		}
		if x < p {
			start = t
			break
		}
		x = (x - p) / (1 - p)
	}
	if start < 0 {
		start = first
	}
	if start < 0 && zeroed >= 0 {
		return zeroed, false
	}
	return start, true
}

// fallback answers when every member of the family (v6) is down: with
// the fallback members, else with all of them.
func (n *gname) fallback(out []dns.RR, v6, trans bool, rnd func() uint64) []dns.RR {
	fb := false
	for i := range n.members {
		if n.members[i].addr.Is6() == v6 && n.members[i].fallback {
			fb = true
			break
		}
	}
	eligible := func(i int) (float64, bool) {
		m := &n.members[i]
		return m.weight, m.addr.Is6() == v6 && (m.fallback || !fb)
	}
	var chosen memberSet
	for got := 0; got < n.answerCount; got++ {
		i := draw(n.all, eligible, &chosen, rnd)
		if i < 0 {
			break
		}
		chosen.add(i)
		out = append(out, n.memberRR(i, trans))
	}
	return out
}

// draw picks one eligible member of tier not yet chosen, with probability
// proportional to its weight; members of weight 0 are taken, in order,
// only when every eligible member weighs 0. It returns -1 when none is
// left.
func draw(tier []int, eligible func(int) (float64, bool), chosen *memberSet, rnd func() uint64) int {
	total := 0.0
	zero := -1
	for _, i := range tier {
		if chosen.has(i) {
			continue
		}
		w, ok := eligible(i)
		if !ok {
			continue
		}
		if w == 0 && zero < 0 {
			zero = i
		}
		total += w
	}
	if total == 0 {
		return zero
	}
	x := unit(rnd()) * total
	last := -1
	for _, i := range tier {
		if chosen.has(i) {
			continue
		}
		w, ok := eligible(i)
		if !ok || w == 0 {
			continue
		}
		last = i
		if x < w {
			return i
		}
		x -= w
	}
	return last
}
