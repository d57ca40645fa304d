package rrl

import (
	"sync"
	"sync/atomic"
	"time"
)

// Bucket is a token bucket: Take succeeds at most rate times per second
// on average, with a burst of one second's worth. The DNS server caps
// the fresh DNSSEC signatures its denials cost with one. It is safe for
// concurrent use.
type Bucket struct {
	rate int64 // tokens per second
	base time.Time

	mu     sync.Mutex
	last   int64 // tick of the last refill
	tokens int64 // in units

	refused *atomic.Uint64 // shared with the Buckets Carry makes
}

// NewBucket returns a full Bucket of rate tokens per second (at least 1,
// at most MaxRate) whose clock starts at now.
func NewBucket(rate int, now time.Time) *Bucket {
	r := int64(min(max(rate, 1), MaxRate))
	return &Bucket{rate: r, base: now, tokens: r * unit, refused: new(atomic.Uint64)}
}

// Carry returns b when rate is b's, else a full Bucket of rate that
// keeps counting b's refusals (a config reload).
func (b *Bucket) Carry(rate int, now time.Time) *Bucket {
	if int64(min(max(rate, 1), MaxRate)) == b.rate {
		return b
	}
	n := NewBucket(rate, now)
	n.refused = b.refused
	return n
}

// Rate returns the bucket's tokens per second.
func (b *Bucket) Rate() int { return int(b.rate) }

// Take takes a token at now and reports whether there was one.
func (b *Bucket) Take(now time.Time) bool {
	tick := max(int64(now.Sub(b.base)), 0)
	b.mu.Lock()
	if age := tick - b.last; age > 0 {
		b.tokens = min(b.tokens+min(age, unit)*b.rate, b.rate*unit)
		b.last = tick
	}
	ok := b.tokens >= unit
	if ok {
		b.tokens -= unit
	}
	b.mu.Unlock()
	if !ok {
		b.refused.Add(1)
	}
	return ok
}

// Refused returns how many Takes found no token.
func (b *Bucket) Refused() uint64 { return b.refused.Load() }
