// Package rrl is response rate limiting for an authoritative DNS server,
// in the model of BIND 9's rate-limit and Knot DNS's rrl module: the
// server counts the responses it sends to each client prefix, per kind of
// response (the same answer, the same denial in one zone, the same
// referral, any error), and past a rate drops them, sending every Nth as
// a truncated reply (slip) so that a real resolver behind a spoofed
// prefix can still ask over TCP. It also holds Bucket, the token bucket
// that caps how many fresh DNSSEC denial signatures are made per second.
//
// The package knows nothing of DNS messages: the server classifies each
// response (Class) and names what it is about (a query name, a zone); a
// Limiter decides Send, Slip or Drop. State lives in a fixed-size table
// (table.go), so memory is bounded whatever the traffic.
package rrl

import (
	"hash/maphash"
	"net/netip"
	"sync/atomic"
	"time"
)

// Class is the kind of a response, which decides its rate and what its
// counter is keyed by.
type Class uint8

// The classes. Their order is the order of Config.Rates.
const (
	// Answer is a positive answer (or any other NOERROR reply with
	// records, truncated ones included), keyed by query name and type.
	Answer Class = iota
	// Referral is a delegation to a child zone, keyed by the cut's name.
	Referral
	// NXDomain is a denial that the name exists, keyed by the zone, so
	// that random names under one zone count as one response.
	NXDomain
	// NoData is a denial that the type exists at a name, keyed by the
	// zone as NXDomain is.
	NoData
	// Error is any other RCODE (SERVFAIL, FORMERR, REFUSED, NOTIMP, …),
	// keyed by nothing but the client prefix.
	Error
	// NumClasses is how many classes there are.
	NumClasses
)

// String returns the class's metric label.
func (c Class) String() string {
	switch c {
	case Answer:
		return "answer"
	case Referral:
		return "referral"
	case NXDomain:
		return "nxdomain"
	case NoData:
		return "nodata"
	case Error:
		return "error"
	}
	return "unknown"
}

// Action is what to do with a response.
type Action uint8

// The actions.
const (
	// Send sends the response as it is.
	Send Action = iota
	// Slip sends, in place of the response, a truncated one (TC set,
	// no records) that tells a real client to ask again over TCP.
	Slip
	// Drop sends nothing.
	Drop
)

// String returns the action's metric label.
func (a Action) String() string {
	switch a {
	case Send:
		return "sent"
	case Slip:
		return "slipped"
	case Drop:
		return "dropped"
	}
	return "unknown"
}

// Limits on the configuration, checked by the config package's
// validation (and clamped by New).
const (
	MaxRate      = 1_000_000 // responses per second per class
	MaxWindow    = 3600      // seconds
	MaxSlip      = 10
	MinTableSize = 1 << 10
	MaxTableSize = 1 << 24
)

// Defaults of a Config's zero fields, BIND's where BIND has one.
const (
	DefaultWindow    = 15
	DefaultSlip      = 2
	DefaultIPv4Bits  = 24
	DefaultIPv6Bits  = 56
	DefaultTableSize = 1 << 16
)

// Config is a Limiter's settings.
type Config struct {
	// Rates are the responses per second allowed to one client prefix
	// for one key, indexed by Class; 0 does not limit the class.
	Rates [NumClasses]int
	// Window is how many seconds of debt a prefix over its rate runs up
	// (BIND's window): a prefix whose flood stops is answered again once
	// it has been below the rate long enough to pay the debt back, at
	// most Window seconds.
	Window int
	// Slip sends every Slip-th limited response truncated instead of
	// dropping it; 0 drops all, 1 truncates all.
	Slip int
	// IPv4Bits and IPv6Bits are the lengths of the client prefixes
	// counted together.
	IPv4Bits, IPv6Bits int
	// Exempt lists the client prefixes never limited (nor counted).
	Exempt []netip.Prefix
	// TableSize bounds how many keys are counted at once (entries of 32
	// bytes; rounded up to a power of two).
	TableSize int
	// DryRun counts what would be limited but sends every response.
	DryRun bool
}

// Stats counts a Limiter's decisions. It is shared by the Limiters a
// reload derives from one another (Carry), so its counters only grow.
type Stats struct {
	limited   [NumClasses][2]atomic.Uint64 // [class][0: slipped, 1: dropped]
	evictions atomic.Uint64
}

// Limited returns how many responses of class c were handled with a
// (Slip or Drop); 0 for Send.
func (s *Stats) Limited(c Class, a Action) uint64 {
	if c >= NumClasses || a == Send || a > Drop {
		return 0
	}
	return s.limited[c][a-1].Load()
}

// Evictions returns how many entries still paying back debt were
// evicted to make room (a sign that TableSize is too small).
func (s *Stats) Evictions() uint64 { return s.evictions.Load() }

// Limiter decides which responses to send. It is safe for concurrent use.
type Limiter struct {
	cfg   Config
	t     *table
	base  time.Time // the table's time origin
	seed  maphash.Seed
	stats *Stats
}

// New returns a Limiter for cfg whose clock starts at now and whose table
// hashes keys with seed (maphash.MakeSeed: a seed the clients cannot
// guess, so they cannot aim their keys at one set of the table).
func New(cfg Config, now time.Time, seed maphash.Seed) *Limiter {
	cfg = normalize(cfg)
	return &Limiter{cfg: cfg, t: newTable(cfg.TableSize), base: now, seed: seed, stats: new(Stats)}
}

// Carry returns a Limiter for cfg that keeps l's counts (its table, when
// cfg's TableSize is l's, and its Stats), for a config reload. Entries
// keyed by a prefix length cfg no longer uses age out unused.
func (l *Limiter) Carry(cfg Config) *Limiter {
	cfg = normalize(cfg)
	n := &Limiter{cfg: cfg, t: l.t, base: l.base, seed: l.seed, stats: l.stats}
	if tableSets(cfg.TableSize) != len(l.t.sets) {
		n.t = newTable(cfg.TableSize)
	}
	return n
}

// Stats returns the Limiter's counters.
func (l *Limiter) Stats() *Stats { return l.stats }

// normalize fills cfg's zero fields with the defaults and clamps the
// rest to the limits.
func normalize(cfg Config) Config {
	for i, r := range cfg.Rates {
		cfg.Rates[i] = min(max(r, 0), MaxRate)
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	cfg.Window = min(cfg.Window, MaxWindow)
	cfg.Slip = min(max(cfg.Slip, 0), MaxSlip)
	if cfg.IPv4Bits <= 0 {
		cfg.IPv4Bits = DefaultIPv4Bits
	}
	if cfg.IPv6Bits <= 0 {
		cfg.IPv6Bits = DefaultIPv6Bits
	}
	cfg.IPv4Bits, cfg.IPv6Bits = min(cfg.IPv4Bits, 32), min(cfg.IPv6Bits, 128)
	if cfg.TableSize <= 0 {
		cfg.TableSize = DefaultTableSize
	}
	cfg.TableSize = min(max(cfg.TableSize, MinTableSize), MaxTableSize)
	return cfg
}

// Check counts one response of class c to client, about name (the query
// name of an answer, the zone of a denial, the cut of a referral; ignored
// for errors) and qtype (answers only), at now, and returns what to do
// with it. Names are compared case-insensitively.
func (l *Limiter) Check(client netip.Addr, c Class, qtype uint16, name string, now time.Time) Action {
	if c >= NumClasses {
		c = Error
	}
	rate := l.cfg.Rates[c]
	if rate == 0 || l.exempt(client) {
		return Send
	}
	key := l.key(client, c, qtype, name)
	limited, nth := l.t.debit(key, l.tick(now), rate, l.cfg.Window, l.stats)
	if !limited {
		return Send
	}
	a := Drop
	if l.cfg.Slip > 0 && nth%uint32(l.cfg.Slip) == 0 {
		a = Slip
	}
	l.stats.limited[c][a-1].Add(1)
	if l.cfg.DryRun {
		return Send
	}
	return a
}

// exempt reports whether client is in an exempt prefix.
func (l *Limiter) exempt(client netip.Addr) bool {
	for _, p := range l.cfg.Exempt {
		if p.Contains(client) {
			return true
		}
	}
	return false
}

// tick returns now in nanoseconds since the table's origin (0 before it).
func (l *Limiter) tick(now time.Time) int64 { return max(int64(now.Sub(l.base)), 0) }

// maxKey is the room Limiter.key needs: an address, class, type, and a
// domain name (at most 255 octets on the wire, 254 in text, more with
// escapes: longer names are cut, which only merges keys).
const maxKey = 16 + 1 + 2 + 256

// key hashes what a response is counted by: the client's prefix, the
// class, and for the classes that have them the type and the name
// (lower-cased, without a final dot).
func (l *Limiter) key(client netip.Addr, c Class, qtype uint16, name string) uint64 {
	var buf [maxKey]byte
	bits := l.cfg.IPv6Bits
	if client.Is4() || client.Is4In6() {
		client, bits = client.Unmap(), l.cfg.IPv4Bits
	}
	if p, err := client.Prefix(bits); err == nil {
		client = p.Addr()
	}
	a := client.As16()
	n := copy(buf[:], a[:])
	buf[n] = byte(c)
	n++
	switch c {
	case Error:
		name = ""
	case Answer:
		buf[n], buf[n+1] = byte(qtype>>8), byte(qtype)
		n += 2
	}
	if len(name) > 1 && name[len(name)-1] == '.' {
		name = name[:len(name)-1]
	}
	for i := 0; i < len(name) && n < len(buf); i++ {
		b := name[i]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		buf[n] = b
		n++
	}
	return maphash.Bytes(l.seed, buf[:n])
}
