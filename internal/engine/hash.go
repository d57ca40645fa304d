package engine

import (
	"slices"

	"github.com/spillwaylb/spillway/internal/plan"
)

// HashKey is the 64-bit FNV-1a hash of s: how the proxy turns an affinity
// value (client IP, header value, cookie value) into the key of PickKey.
// It is deterministic, so every Spillway instance maps a key identically.
func HashKey(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// mix64 is the splitmix64 finalizer: a bijection that spreads every input
// bit over the whole word. Keys and random numbers go through it before
// they index a ring or a table.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Salts that derive independent values from one key or random number.
const (
	saltZone   = 0x9e3779b97f4a7c15 // key -> backend (zone) draw
	saltRetry  = 0x632be59bd9b4e019 // u -> retry step
	saltSkip   = 0x8cb92ba72f3d8dd7 // endpoint -> Maglev skip
	saltOffset = 0x52dce729da3ed5a5 // endpoint -> Maglev offset
)

// below maps a uniform 32-bit value to [0, n) (Lemire's multiply-shift).
func below(x uint32, n int) int { return int(uint64(x) * uint64(n) >> 32) }

// ringPoint is one virtual node of a RING_HASH ring.
type ringPoint struct {
	hash uint64
	idx  int32 // index in backendView.healthy
}

// MaxRingSize caps a RING_HASH ring (Envoy's maximum_ring_size default).
const MaxRingSize = 8 << 20

// buildRing builds a ketama-style ring over eps, the healthy endpoints of
// a backend with `members` configured endpoints. Every endpoint gets the
// same number of points, ceil(minSize/members), so the ring has at least
// minSize points when every member is healthy (at most MaxRingSize, and at
// least one point per endpoint). Point j of an endpoint hashes "addr_j",
// and the count per endpoint does not depend on health, so an endpoint's
// points never depend on the other endpoints: removing one of N moves
// only its ~1/N of the keys, and adding it back restores them.
func buildRing(eps []*plan.Endpoint, minSize, members int) []ringPoint {
	n := len(eps)
	if n == 0 {
		return nil
	}
	members = max(members, n)
	minSize = min(max(minSize, 1), MaxRingSize)
	per := max(1, (minSize+members-1)/members)
	if members*per > MaxRingSize {
		per = max(1, MaxRingSize/members)
	}
	ring := make([]ringPoint, 0, n*per)
	var digits [20]byte
	for i, e := range eps {
		base := HashKey(e.Addr)
		for j := 0; j < per; j++ {
			h := base
			h ^= '_'
			h *= fnvPrime
			for _, c := range itoa(digits[:], j) {
				h ^= uint64(c)
				h *= fnvPrime
			}
			ring = append(ring, ringPoint{hash: mix64(h), idx: int32(i)})
		}
	}
	slices.SortFunc(ring, func(a, b ringPoint) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return int(a.idx - b.idx)
	})
	return ring
}

// itoa formats j into buf without allocating.
func itoa(buf []byte, j int) []byte {
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + j%10)
		j /= 10
		if j == 0 {
			return buf[i:]
		}
	}
}

// ringLookup returns the endpoint index owning hash h: the first point at
// or after h, wrapping around.
func ringLookup(ring []ringPoint, h uint64) int {
	lo, hi := 0, len(ring)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ring[m].hash < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(ring) {
		lo = 0
	}
	return int(ring[lo].idx)
}

// MaglevTableSize is the Maglev lookup table size (a prime, as the
// algorithm requires; Envoy's default).
const MaglevTableSize = 65537

// maglevSize returns the table size for n endpoints: 65537, or for more
// than 655 endpoints the smallest prime at least 100·n, keeping the
// paper's M ≫ N.
func maglevSize(n int) int {
	m := MaglevTableSize
	if 100*n <= m {
		return m
	}
	for m = 100*n + 1; !isPrime(m); m += 2 {
	}
	return m
}

func isPrime(m int) bool {
	if m < 2 || m%2 == 0 {
		return m == 2
	}
	for d := 3; d*d <= m; d += 2 {
		if m%d == 0 {
			return false
		}
	}
	return true
}

// buildMaglev fills a Maglev lookup table (Eisenbud et al., NSDI 2016,
// §3.4): each endpoint has a permutation of the table slots given by
// offset and skip from its address hash, and the endpoints take turns
// claiming their next free preferred slot until the table is full. Every
// endpoint ends up with ⌊M/N⌋ or ⌈M/N⌉ slots.
func buildMaglev(eps []*plan.Endpoint) []int32 {
	n := len(eps)
	if n == 0 {
		return nil
	}
	m := uint64(maglevSize(n))
	table := make([]int32, m)
	for i := range table {
		table[i] = -1
	}
	next := make([]uint64, n) // current slot of each permutation
	skip := make([]uint64, n)
	for i, e := range eps {
		h := HashKey(e.Addr)
		next[i] = mix64(h^saltOffset) % m
		skip[i] = mix64(h^saltSkip)%(m-1) + 1
	}
	for filled := uint64(0); ; {
		for i := 0; i < n; i++ {
			c := next[i]
			for table[c] >= 0 {
				c += skip[i]
				if c >= m {
					c -= m
				}
			}
			table[c] = int32(i)
			c += skip[i]
			if c >= m {
				c -= m
			}
			next[i] = c
			if filled++; filled == m {
				return table
			}
		}
	}
}
