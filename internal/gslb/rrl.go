package gslb

import (
	"hash/maphash"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/rrl"
)

// Response rate limiting and the cap on denial signatures
// (spillway.dnsResponseRateLimit and
// spillway.dnsMaxDenialSignaturesPerSecond; docs/dns.md "Response rate
// limiting"). The limiter (internal/rrl) decides; this file classifies
// replies for it, turns its decisions into replies, and holds the state a
// reload carries.

// rateLimits is a Server's limits; nil fields are off.
type rateLimits struct {
	// rrl limits UDP replies per client prefix.
	rrl *rrl.Limiter
	// sigUDP and sigTCP cap the fresh signatures of denials, one bucket
	// per transport, so that a UDP flood does not use up the signatures
	// of the resolvers that come back over TCP.
	sigUDP, sigTCP *rrl.Bucket
	// rrlCfg is the block rrl was made from (for a reload to carry).
	rrlCfg *config.DNSResponseRateLimit
}

// rrlConfig turns the config block into the limiter's settings.
func rrlConfig(r *config.DNSResponseRateLimit) rrl.Config {
	c := rrl.Config{
		Window: r.WindowSec, Slip: rrl.DefaultSlip,
		IPv4Bits: r.IPv4PrefixLength, IPv6Bits: r.IPv6PrefixLength,
		Exempt: config.DNSRRLExempt(r), TableSize: r.TableSize, DryRun: r.DryRun,
	}
	if r.Slip != nil {
		c.Slip = *r.Slip
	}
	c.Rates[rrl.Answer] = r.ResponsesPerSecond
	c.Rates[rrl.Referral] = config.RateOr(r.ReferralsPerSecond, r.ResponsesPerSecond)
	c.Rates[rrl.NXDomain] = config.RateOr(r.NxdomainsPerSecond, r.ResponsesPerSecond)
	c.Rates[rrl.NoData] = config.RateOr(r.NodataPerSecond, r.ResponsesPerSecond)
	c.Rates[rrl.Error] = config.RateOr(r.ErrorsPerSecond, r.ResponsesPerSecond)
	return c
}

// initRateLimits sets s's limits from cfg (New).
func (s *Server) initRateLimits(cfg *config.Config) {
	if cfg.Spillway == nil {
		return
	}
	now := s.now()
	if r := cfg.Spillway.DNSResponseRateLimit; r != nil {
		s.rl.rrl = rrl.New(rrlConfig(r), now, maphash.MakeSeed())
		s.rl.rrlCfg = r
	}
	if n := cfg.Spillway.DNSMaxDenialSignaturesPerSecond; n > 0 {
		s.rl.sigUDP, s.rl.sigTCP = rrl.NewBucket(n, now), rrl.NewBucket(n, now)
	}
}

// carryRateLimits keeps old's counts in s's limits (CarryState): the
// limiter's table when its size is unchanged and its counters, and the
// signature buckets when the cap is unchanged (else their counters).
func (s *Server) carryRateLimits(old *Server) {
	if s.rl.rrl != nil && old.rl.rrl != nil {
		s.rl.rrl = old.rl.rrl.Carry(rrlConfig(s.rl.rrlCfg))
	}
	if s.rl.sigUDP != nil && old.rl.sigUDP != nil {
		rate := s.rl.sigUDP.Rate()
		s.rl.sigUDP = old.rl.sigUDP.Carry(rate, s.now())
		s.rl.sigTCP = old.rl.sigTCP.Carry(rate, s.now())
	}
}

// limitUDP passes UDP reply m to a query from client through the
// limiter: it returns m, m made a truncated reply (slip), or nil (drop).
// q is what answering noted (nil for replies to malformed queries).
func (s *Server) limitUDP(m *dns.Msg, q *Query, client netip.Addr) *dns.Msg {
	c, qtype, name := classify(m, q)
	switch s.rl.rrl.Check(client, c, qtype, name, s.now()) {
	case rrl.Drop:
		return nil
	case rrl.Slip:
		emptyReply(m)
		m.Truncated = true
	}
	return m
}

// classify returns what the limiter counts reply m by: its class, the
// query type (answers) and the name (an answer's name as observed in q,
// which is a wildcard's owner for a name a wildcard answered, so random
// names under a wildcard share a count; a denial's zone; a referral's
// cut).
func classify(m *dns.Msg, q *Query) (rrl.Class, uint16, string) {
	var qname string
	var qtype uint16
	if len(m.Question) > 0 {
		qname, qtype = m.Question[0].Name, m.Question[0].Qtype
	}
	zone := qname
	if q != nil && q.zone != "" {
		zone = q.zone
	}
	switch {
	case m.Rcode == dns.RcodeNameError, m.Rcode == dns.RcodeSuccess && compactNX(m):
		return rrl.NXDomain, 0, zone
	case m.Rcode != dns.RcodeSuccess:
		return rrl.Error, 0, ""
	case len(m.Answer) > 0 || m.Truncated:
		if q != nil && q.Name != "" {
			qname = q.Name
		}
		return rrl.Answer, qtype, qname
	}
	for _, rr := range m.Ns {
		switch rr.Header().Rrtype {
		case dns.TypeSOA:
			return rrl.NoData, 0, zone
		case dns.TypeNS:
			return rrl.Referral, 0, rr.Header().Name
		}
	}
	return rrl.Answer, qtype, qname
}

// compactNX reports whether NOERROR reply m is a compact denial that the
// name exists (RFC 9824): an NSEC whose types include NXNAME.
func compactNX(m *dns.Msg) bool {
	for _, sec := range [2][]dns.RR{m.Ns, m.Answer} {
		for _, rr := range sec {
			if nsec, ok := rr.(*dns.NSEC); ok {
				for _, t := range nsec.TypeBitMap {
					if t == dns.TypeNXNAME {
						return true
					}
				}
			}
		}
	}
	return false
}

// emptyReply empties reply m's sections but the OPT record, as a
// truncated reply has them (request.truncate).
func emptyReply(m *dns.Msg) {
	var opt dns.RR
	for _, rr := range m.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			opt = rr
		}
	}
	m.Answer, m.Ns, m.Extra = nil, nil, m.Extra[:0]
	if opt != nil {
		m.Extra = append(m.Extra, opt)
	}
}

// denialGate returns the bucket a fresh denial signature is taken from
// over tcp or UDP, nil when there is no cap.
func (s *Server) denialGate(tcp bool) *rrl.Bucket {
	if tcp {
		return s.rl.sigTCP
	}
	return s.rl.sigUDP
}

// mayMint reports whether a denial may be signed with nsec as its NSEC:
// when there is no cap (gate nil), when the signature is in the cache,
// or when gate has a token at now.
func (sg *signer) mayMint(nsec *dns.NSEC, gate *rrl.Bucket, now time.Time) bool {
	if gate == nil {
		return true
	}
	bp := sg.bufs.Get().(*[]byte)
	defer sg.bufs.Put(bp)
	if key, ok := sigKey(bp, sg.zsk, []dns.RR{nsec}); ok {
		if _, hit := sg.cached(key, now.Unix()); hit {
			return true
		}
	}
	return gate.Take(now)
}

// overSignatureCap makes m, a denial of a signed zone that would need a
// fresh signature past the cap, the reply that costs none: over UDP a
// truncated one (a resolver asks again over TCP, which a spoofed flood
// cannot), over TCP SERVFAIL (the resolver tries another server or
// later).
func overSignatureCap(m *dns.Msg, rq *request) {
	emptyReply(m)
	if rq.tcp {
		m.Rcode = dns.RcodeServerFailure
		m.Authoritative = false
		return
	}
	m.Truncated = true
}

// RateLimitStats are the counts of a Server's response rate limiting
// and denial signature cap, carried across reloads (CarryState).
type RateLimitStats struct {
	// Limited counts UDP replies limited, by class (rrl.Class) and
	// action (0: slipped, 1: dropped). Nil when RRL is off.
	Limited *rrl.Stats
	// SignaturesRefusedUDP and SignaturesRefusedTCP count the denials
	// answered without a fresh signature (truncated, SERVFAIL), while
	// SignatureCap (there is a cap).
	SignaturesRefusedUDP, SignaturesRefusedTCP uint64
	SignatureCap                               bool
}

// RateLimitStats returns the counts of s's limits.
func (s *Server) RateLimitStats() RateLimitStats {
	var st RateLimitStats
	if s.rl.rrl != nil {
		st.Limited = s.rl.rrl.Stats()
	}
	if s.rl.sigUDP != nil {
		st.SignatureCap = true
		st.SignaturesRefusedUDP, st.SignaturesRefusedTCP = s.rl.sigUDP.Refused(), s.rl.sigTCP.Refused()
	}
	return st
}
