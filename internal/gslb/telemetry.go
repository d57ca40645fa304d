package gslb

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// DNS telemetry: counters per zone, QTYPE, RCODE and transport in fixed
// arrays of atomics (Stats), and the Tap hook that hands answered
// queries, in full, to the query log and dnstap.

// NumQtypes, NumRcodes and NumTransports size the counter arrays: the
// label sets are fixed (QtypeLabel, RcodeLabel, TransportLabel), so a
// query costs one atomic add and no lookup.
const (
	NumQtypes     = 13
	NumRcodes     = 10
	NumTransports = 2
)

// qtypeIndex is the counter index of QTYPE t; every type not listed is
// "other".
func qtypeIndex(t uint16) int {
	switch t {
	case dns.TypeA:
		return 0
	case dns.TypeAAAA:
		return 1
	case dns.TypeCNAME:
		return 2
	case dns.TypeMX:
		return 3
	case dns.TypeTXT:
		return 4
	case dns.TypeNS:
		return 5
	case dns.TypeSOA:
		return 6
	case dns.TypeSRV:
		return 7
	case dns.TypeCAA:
		return 8
	case dns.TypeDNSKEY:
		return 9
	case dns.TypeDS:
		return 10
	case dns.TypeANY:
		return 11
	}
	return 12
}

// QtypeLabel is the label of QTYPE counter index i (0 ≤ i < NumQtypes).
func QtypeLabel(i int) string {
	const names = "A AAAA CNAME MX TXT NS SOA SRV CAA DNSKEY DS ANY other "
	return field(names, i)
}

// rcodeIndex is the counter index of (extended) RCODE rc; every RCODE
// not listed is "other".
func rcodeIndex(rc int) int {
	switch rc {
	case dns.RcodeSuccess, dns.RcodeFormatError, dns.RcodeServerFailure, dns.RcodeNameError,
		dns.RcodeNotImplemented, dns.RcodeRefused:
		return rc
	case dns.RcodeNotAuth:
		return 6
	case dns.RcodeBadVers:
		return 7
	case dns.RcodeBadCookie:
		return 8
	}
	return 9
}

// RcodeLabel is the label of RCODE counter index i (0 ≤ i < NumRcodes).
func RcodeLabel(i int) string {
	const names = "NOERROR FORMERR SERVFAIL NXDOMAIN NOTIMP REFUSED NOTAUTH BADVERS BADCOOKIE other "
	return field(names, i)
}

// TransportLabel is the label of transport index i: udp (0) or tcp (1).
func TransportLabel(i int) string {
	if i == 1 {
		return "tcp"
	}
	return "udp"
}

// field returns the i-th space-terminated word of s.
func field(s string, i int) string {
	start := 0
	for j := 0; j < len(s); j++ {
		if s[j] != ' ' {
			continue
		}
		if i == 0 {
			return s[start:j]
		}
		i--
		start = j + 1
	}
	return ""
}

// Stats are DNS counters that outlive Server generations: pass the same
// Stats to every New. Zones get their counters when a Server is built
// with them; queries outside every configured zone (REFUSED, CHAOS,
// malformed) count under "other". Zones removed by a reload keep their
// (frozen) counters, so the set is bounded by the zones ever configured.
type Stats struct {
	mu    sync.Mutex
	zones []*ZoneStats
	other ZoneStats

	sigHits, sigMisses atomic.Uint64
}

// ZoneStats are one zone's query counters, by QTYPE, RCODE and transport
// index.
type ZoneStats struct {
	// Zone is the zone's origin ("example.com."), or "other".
	Zone string
	n    [NumQtypes][NumRcodes][NumTransports]atomic.Uint64
}

// NewStats returns empty counters.
func NewStats() *Stats { return &Stats{other: ZoneStats{Zone: "other"}} }

// zone returns the counters of zone origin, adding them the first time.
func (st *Stats) zone(origin string) *ZoneStats {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, z := range st.zones {
		if z.Zone == origin {
			return z
		}
	}
	z := &ZoneStats{Zone: origin}
	st.zones = append(st.zones, z)
	return z
}

// count adds one query answered from zone counters z (nil: other).
func (st *Stats) count(z *ZoneStats, qtype uint16, rcode int, tcp bool) {
	if z == nil {
		z = &st.other
	}
	tr := 0
	if tcp {
		tr = 1
	}
	z.n[qtypeIndex(qtype)][rcodeIndex(rcode)][tr].Add(1)
}

// Each calls f for every counter that is not zero, zone by zone
// ("other" last), with index labels
// (QtypeLabel, RcodeLabel, TransportLabel).
func (st *Stats) Each(f func(zone string, qtype, rcode, transport int, n uint64)) {
	st.mu.Lock()
	zones := append([]*ZoneStats(nil), st.zones...)
	st.mu.Unlock()
	for _, z := range append(zones, &st.other) {
		for q := range NumQtypes {
			for r := range NumRcodes {
				for t := range NumTransports {
					if n := z.n[q][r][t].Load(); n > 0 {
						f(z.Zone, q, r, t, n)
					}
				}
			}
		}
	}
}

// SignatureCache returns how many RRSIGs online signing took from the
// signature cache (hits) and how many it had to make (misses).
func (st *Stats) SignatureCache() (hits, misses uint64) {
	return st.sigHits.Load(), st.sigMisses.Load()
}

// Tap receives answered queries in full, for the query log and dnstap.
// Want is asked once per query, on the answer path: it must be cheap
// (a sampling draw, a flag). Tapped is called, on the same goroutine,
// with every query Want wanted, after its reply is packed; it must not
// block, and must copy what it keeps of e.
type Tap interface {
	Want() bool
	Tapped(e *Exchange)
}

// Exchange is one answered query, for a Tap: wire messages and strings
// only, so that handing it over does not move the reused reply or the
// query's bookkeeping to the heap.
type Exchange struct {
	// Start is when the query was read (the Server's clock); Latency how
	// long answering and packing took.
	Start   time.Time
	Latency time.Duration
	Client  netip.AddrPort
	TCP     bool
	// Query is the query (over TCP, repacked from what was unpacked);
	// Response the reply as sent, nil when none was (dropped by rate
	// limiting, or not packed).
	Query, Response []byte
	// Zone is the origin of the zone that answered ("" if none); Name
	// the zone name observed (as Query.Name); Member the GSLB member
	// answered first ("" for static answers).
	Zone, Name, Member string
}

// want reports whether this query is tapped.
func (s *Server) want() bool { return s.tap != nil && s.tap.Want() }

// tapped hands an answered query (wire query pkt, wire reply out, nil
// when none is sent; zone, name and member from its Query) to the Tap.
func (s *Server) tapped(start time.Time, from netip.AddrPort, tcp bool, pkt, out []byte, zone, name, member string) {
	s.tap.Tapped(&Exchange{
		Start: start, Latency: s.now().Sub(start), Client: from, TCP: tcp,
		Query: pkt, Response: out, Zone: zone, Name: name, Member: member,
	})
}

// tapInfo returns what a Tap is told of q (nil: nothing).
func (q *Query) tapInfo() (zone, name, member string) {
	if q == nil {
		return "", "", ""
	}
	return q.zone, q.Name, q.Member
}

// initStats gives the zones their counters and signers the signature
// cache counters.
func (s *Server) initStats(st *Stats) {
	s.stats = st
	if st == nil {
		return
	}
	for origin, z := range s.zones {
		z.stats = st.zone(origin)
		if z.signer != nil {
			z.signer.hits, z.signer.misses = &st.sigHits, &st.sigMisses
		}
	}
}
