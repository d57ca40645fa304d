package rrl

import (
	"math/bits"
	"sync"
)

// ways is how many entries share a set of the table.
const ways = 8

// unit is one response in the balances' fixed point: a balance counts
// billionths of a response, so that a rate (responses per second) times
// an age in nanoseconds is the credit earned, exactly.
const unit = int64(1e9)

// table is the Limiter's counters: a fixed number of entries in sets of
// ways, like a CPU cache. A key's hash picks its set; a key not in its set
// replaces the set's least recently used entry. Memory is fixed when the
// table is made (32 bytes per entry plus a mutex per set) and nothing is
// allocated afterwards. Each set has its own lock, so queries for
// different keys seldom wait for each other.
//
// A flooding key is used constantly, so it is never its set's least
// recently used entry while other keys pass through: to lose its debt by
// eviction, an attacker has to send ways new keys to its set between two
// of its own queries.
type table struct {
	sets []set
	mask uint64
}

// set is one set of the table.
type set struct {
	mu sync.Mutex
	e  [ways]entry
}

// entry counts one key. key 0 is an empty entry.
type entry struct {
	key  uint64
	last int64  // tick of the last response counted
	bal  int64  // balance, in units
	nth  uint32 // limited responses so far (for slip)
}

// tableSets returns how many sets hold size entries: a power of two.
func tableSets(size int) int {
	n := max((size+ways-1)/ways, 1)
	return 1 << bits.Len(uint(n-1))
}

// newTable makes a table of at least size entries.
func newTable(size int) *table {
	n := tableSets(size)
	return &table{sets: make([]set, n), mask: uint64(n - 1)}
}

// debit counts one response for key at tick (nanoseconds) under a rate
// (responses per second) and a debt window (seconds), as BIND's
// rate-limit does: the balance earns rate per second up to one second's
// worth (a burst of rate responses), each response costs one, and it may
// fall to -window seconds' worth. The response is limited when the
// balance is below zero after paying for it; nth then counts the key's
// limited responses (1, 2, …).
func (t *table) debit(key uint64, tick int64, rate, window int, st *Stats) (limited bool, nth uint32) {
	if key == 0 {
		key = 1
	}
	s := &t.sets[(key^key>>32)&t.mask]
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.find(key, tick, window, st)
	r := int64(rate)
	if e.key != key {
		*e = entry{key: key, last: tick, bal: r * unit}
	} else if age := tick - e.last; age > 0 {
		// Past window+1 seconds any debt is paid and the credit full.
		age = min(age, int64(window+1)*unit)
		e.bal = min(e.bal+age*r, r*unit)
		e.last = tick
	}
	e.bal -= unit
	if e.bal >= 0 {
		return false, 0
	}
	e.bal = max(e.bal, -int64(window)*r*unit)
	e.nth++
	return true, e.nth
}

// find returns key's entry in s, or the entry to replace with it: an
// empty one, else the least recently used. Entries are never emptied, so
// the empty ones are the last of a set and a key is never behind one.
// Replacing an entry that is still in debt (used within the window)
// counts an eviction.
func (s *set) find(key uint64, tick int64, window int, st *Stats) *entry {
	victim := &s.e[0]
	for i := range s.e {
		e := &s.e[i]
		if e.key == key {
			return e
		}
		if e.key == 0 {
			return e
		}
		if e.last < victim.last {
			victim = e
		}
	}
	if victim.bal < 0 && tick-victim.last < int64(window)*unit {
		st.evictions.Add(1)
	}
	return victim
}
