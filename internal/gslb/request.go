package gslb

import (
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
)

// request is one query on its way through the answer path, the state the
// stages share (CoreDNS's request.Request idea): respondTo runs
//
//	parse → check → answer → finish
//
// parse reads the header and EDNS and rejects what is malformed or
// unsupported (NOTIMP, FORMERR, BADVERS: the reply goes out as is);
// check decides whether this server answers the question at all (CHAOS
// identity, REFUSED, the zone); answer fills the reply from the zone;
// finish echoes ECS and truncates for UDP (to an empty TC reply). It
// lives on respondTo's stack; the reply, the query and the Query observed
// are passed beside it, not kept in it, so that escape analysis, which
// does not tell one field of a request from another, does not move them
// to the heap with what the reply's records point to (the UDP loop
// reuses the reply and the query).
type request struct {
	qu   dns.Question
	name string // the name being answered: QNAME lowered and absolute, then each CNAME target followed

	reqOpt *dns.OPT // the query's OPT record, nil if none
	opts   int      // how many OPT records the query had
	opt    *dns.OPT // the reply's OPT record, nil when the query had none
	ecsIn  *dns.EDNS0_SUBNET

	client  netip.Addr // the resolver, or the ECS client address
	useECS  bool       // client came from ECS
	scope   int        // the ECS scope the answer depends on
	udpSize int
	tcp     bool
	now     time.Time
}

// respondTo is respondQ building the reply in m, which it clears first
// (the UDP loop reuses one per worker).
func (s *Server) respondTo(m, r *dns.Msg, src netip.Addr, tcp bool, now time.Time, q *Query) *dns.Msg {
	if r.Response {
		return nil
	}
	rq := request{client: src, udpSize: dns.MinMsgSize, tcp: tcp, now: now}
	if !rq.parse(m, r) {
		return m
	}
	if z := s.check(m, &rq); z != nil {
		s.answer(m, &rq, z, q)
	}
	return rq.finish(m)
}

// parse starts reply m to r with r's header and OPT record and reports
// whether r is a query to answer; when not, m is complete (NOTIMP,
// FORMERR or BADVERS).
func (rq *request) parse(m, r *dns.Msg) bool {
	*m = dns.Msg{}
	// Header bits: RD and CD are copied from the query (RFC 1035 §4.1.1;
	// RFC 4035 §3.1.6 and RFC 6840 §5.7 for CD). AD is never set, errors
	// included: RFC 4035 §3.1.6 lets only a server that has checked the
	// data as authentic set it, and Spillway does not validate (it signs
	// its own zones, which is not validating them).
	m.Id, m.Response, m.Opcode = r.Id, true, r.Opcode
	m.RecursionDesired, m.CheckingDisabled = r.RecursionDesired, r.CheckingDisabled
	if len(r.Question) > 0 {
		m.Question = r.Question[:1:1]
	}
	// RFC 6891 §7: a requester that sent an OPT record gets one back, in
	// error replies too ("If this occurs, the response MUST include an
	// OPT record"); one that did not gets none.
	for _, rr := range r.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			rq.reqOpt = o
			rq.opts++
		}
	}
	if rq.reqOpt != nil {
		rq.opt = &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		rq.opt.SetUDPSize(MaxUDPSize)
		// RFC 3225 §3: "The DO bit of the query MUST be copied in the
		// response."
		if rq.reqOpt.Do() {
			rq.opt.SetDo()
		}
		m.Extra = append(m.Extra, rq.opt)
	}
	if r.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return false
	}
	if rcode := rq.malformed(r); rcode != dns.RcodeSuccess {
		m.Rcode = rcode
		return false
	}
	rq.qu = r.Question[0]
	if rcode := metaRcode(rq.qu.Qtype); rcode != dns.RcodeSuccess {
		m.Rcode = rcode
		return false
	}
	return rq.parseEDNS(m)
}

// metaRcode returns the RCODE of a query for a meta-QTYPE that is not
// answered, whatever the name and class, as BIND 9.18 answers it
// (checked against named on loopback): NOTIMP for MAILA and MAILB (RFC
// 1035's mail queries, obsolete), FORMERR for OPT and for every type of
// the meta range 128-255 (RFC 6895 §3.1) but ANY, AXFR and IXFR: TSIG,
// TKEY (Spillway negotiates no keys), NXNAME (RFC 9824 §3.5) and the
// unassigned ones. RcodeSuccess for the rest.
func metaRcode(qtype uint16) int {
	switch {
	case qtype == dns.TypeMAILA || qtype == dns.TypeMAILB:
		return dns.RcodeNotImplemented
	case qtype == dns.TypeANY || qtype == dns.TypeAXFR || qtype == dns.TypeIXFR:
		return dns.RcodeSuccess
	case qtype == dns.TypeOPT || qtype >= 128 && qtype <= 255:
		return dns.RcodeFormatError
	}
	return dns.RcodeSuccess
}

// malformed returns FORMERR for a QUERY whose sections Spillway does not
// accept, RcodeSuccess otherwise.
func (rq *request) malformed(r *dns.Msg) int {
	// One question, as RFC 9619 §3 requires of QUERY; at most one record
	// in answer and authority and two in additional, as miekg/dns's
	// DefaultMsgAcceptFunc (which MsgAcceptFunc replaces) insisted.
	if len(r.Question) != 1 || len(r.Answer) > 1 || len(r.Ns) > 1 || len(r.Extra) > 2 {
		return dns.RcodeFormatError
	}
	// A question is QNAME, QTYPE and QCLASS (RFC 1035 §4.1.2). miekg/dns
	// unpacks a question section that ends after the name, or after
	// QTYPE, with the missing fields 0; 0 is a reserved type and class
	// (RFC 6895 §3.1, §3.2) either way, so neither is a question to
	// refuse but a malformed one.
	if q := r.Question[0]; q.Qtype == 0 || q.Qclass == 0 {
		return dns.RcodeFormatError
	}
	// RFC 6891 §6.1.1: "If a query message with more than one OPT RR is
	// received, a FORMERR (RCODE=1) MUST be returned." The reply has one.
	if rq.opts > 1 {
		return dns.RcodeFormatError
	}
	return dns.RcodeSuccess
}

// parseEDNS reads the query's EDNS version, buffer size and client
// subnet, and reports whether they are acceptable; when not, reply m is
// complete (BADVERS or FORMERR).
func (rq *request) parseEDNS(m *dns.Msg) bool {
	reqOpt := rq.reqOpt
	if reqOpt == nil {
		return true
	}
	if reqOpt.Version() != 0 {
		m.Rcode = dns.RcodeBadVers
		return false
	}
	rq.udpSize = min(max(int(reqOpt.UDPSize()), dns.MinMsgSize), MaxUDPSize)
	for _, o := range reqOpt.Option {
		if e, ok := o.(*dns.EDNS0_SUBNET); ok {
			rq.ecsIn = e
		}
	}
	if rq.ecsIn != nil {
		a, ok := ecsAddr(rq.ecsIn, ecsAddrLen(reqOpt, rq.ecsIn))
		if !ok {
			m.Rcode = dns.RcodeFormatError
			return false
		}
		// RFC 7871 §7.1.2: source prefix 0 means "do not use my
		// address"; the answer is then not tailored (scope 0).
		rq.client, rq.useECS = a, true
	}
	return true
}

// check decides whether this server answers rq's question and returns
// the zone to answer from, or nil when reply m is already decided: a
// CHAOS identity answer, or REFUSED (a class or transfer type not served
// here, a name outside every zone).
func (s *Server) check(m *dns.Msg, rq *request) *zone {
	qu := rq.qu
	if qu.Qclass == dns.ClassCHAOS && s.chaos(m, qu) {
		return nil
	}
	if qu.Qclass != dns.ClassINET || qu.Qtype == dns.TypeAXFR || qu.Qtype == dns.TypeIXFR {
		m.Rcode = dns.RcodeRefused
		return nil
	}
	rq.name = strings.ToLower(qu.Name)
	if !strings.HasSuffix(rq.name, ".") {
		rq.name += "."
	}
	z := s.zones.forQuestion(rq.name, qu.Qtype)
	if z == nil {
		m.Rcode = dns.RcodeRefused
		return nil
	}
	return z
}

// answer fills reply m from zone z, authoritatively, and signs it
// when z is signed and the query set DO. It notes the name and the
// first GSLB member answered in q when q is not nil.
func (s *Server) answer(m *dns.Msg, rq *request, z *zone, q *Query) {
	m.Authoritative = true
	s.syncView(rq.now)
	if q != nil {
		q.zone, q.stats = z.origin, z.stats
	}
	n := s.follow(m, rq, z, q)
	if z.signer != nil && rq.qu.Qtype == dns.TypeRRSIG {
		m.Answer = z.signer.signatures(m.Answer, rq.now)
	}
	if z.signer != nil && rq.reqOpt != nil && rq.reqOpt.Do() {
		if !z.signer.sign(m, rq.opt, rq.reqOpt.Co(), rq.name, n, rq.now, s.denialGate(rq.tcp)) {
			overSignatureCap(m, rq) // rrl.go
		}
	}
}

// follow answers rq.name from z into m, following CNAMEs inside the zone up to
// maxChain hops: a referral below a delegation, NXDOMAIN, the records
// asked for or NODATA. It returns the node where the answer ended (nil
// if none) and leaves rq.name at the last name followed.
func (s *Server) follow(m *dns.Msg, rq *request, z *zone, q *Query) *node {
	qt := rq.qu.Qtype
	var n *node
	for hop := 0; ; hop++ {
		if cut := z.cutAbove(rq.name, qt); cut != "" {
			s.referral(m, z, cut)
			return n
		}
		wild, observed := false, rq.name
		if n = z.nodes[rq.name]; n == nil {
			// Answered from a wildcard: observed (metrics) under the
			// wildcard's owner, so random names cannot grow the series.
			if n, observed = z.wildcard(rq.name); n == nil {
				m.Rcode = dns.RcodeNameError
				m.Ns = append(m.Ns, z.negSOA)
				return nil
			}
			wild = true
		}
		if q != nil && q.Name == "" {
			q.Name = observed
		}
		start := len(m.Answer)
		if n.cname != nil && qt != dns.TypeCNAME {
			m.Answer = append(m.Answer, n.cname)
			synthesize(m.Answer[start:], rq.name, wild)
			if hop >= maxChain || !config.InDNSZone(n.cname.Target, z.origin) {
				return n
			}
			rq.name = n.cname.Target
			continue
		}
		s.records(m, rq, z, n, q)
		synthesize(m.Answer[start:], rq.name, wild)
		if len(m.Answer) == start {
			m.Ns = append(m.Ns, z.negSOA) // NODATA
		}
		return n
	}
}

// records appends node n's records of the type asked to m's answer:
// a GSLB name's chosen addresses, for ANY over UDP a synthesized HINFO
// and over TCP every record set, the CNAME, or the static record set
// (with in-zone glue for NS).
func (s *Server) records(m *dns.Msg, rq *request, z *zone, n *node, q *Query) {
	qt := rq.qu.Qtype
	switch g := n.gslb; {
	case qt == dns.TypeANY && !rq.tcp:
		m.Answer = appendHINFO(m.Answer, rq.name, n)
	case qt == dns.TypeRRSIG && z.signer != nil:
		s.signedSets(m, rq, n, q)
	case g != nil && (qt == dns.TypeA || qt == dns.TypeAAAA || qt == dns.TypeANY):
		s.addresses(m, rq, g, qt, q)
	case qt == dns.TypeANY:
		// Over TCP every set: a static name has few.
		for _, rrs := range n.rrsets {
			m.Answer = append(m.Answer, rrs...)
		}
	case qt == dns.TypeCNAME && n.cname != nil:
		m.Answer = append(m.Answer, n.cname)
	default:
		rrs := n.rrsets[qt]
		m.Answer = append(m.Answer, rrs...)
		if qt == dns.TypeNS {
			m.Extra = s.glue(m.Extra, z, rrs)
		}
	}
}

// hinfoTTL is the TTL of the HINFO that answers ANY over UDP: an hour,
// since it says nothing that changes (Cloudflare's is about as long).
const hinfoTTL = 3600

// appendHINFO appends to answer the reply to ANY over UDP at name, whose
// node is n: one HINFO "RFC8482" "" (RFC 8482 §4.2) when n has records,
// nothing (NODATA) when it is an empty non-terminal. Every record set
// would make a ~40-byte query a large reply to a spoofed address; the
// resolvers that need the sets ask over TCP or for each type.
func appendHINFO(answer []dns.RR, name string, n *node) []dns.RR {
	if len(n.rrsets) == 0 && n.gslb == nil {
		return answer
	}
	return append(answer, &dns.HINFO{
		Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: hinfoTTL},
		Cpu: "RFC8482",
	})
}

// signedSets appends to m's answer the record sets of node n whose
// signatures an explicit RRSIG query to a signed zone gets (answer
// replaces the sets by them): over TCP every set, over UDP the first in
// type order only, as BIND's minimal-any answers RRSIG queries, so that
// they are no way around the limit on ANY. A GSLB name's sets are the
// addresses this query would get.
func (s *Server) signedSets(m *dns.Msg, rq *request, n *node, q *Query) {
	start := len(m.Answer)
	for _, t := range setTypes(n, 0) {
		if g := n.gslb; g != nil && (t == dns.TypeA || t == dns.TypeAAAA) {
			s.addresses(m, rq, g, t, q)
		} else {
			m.Answer = append(m.Answer, n.rrsets[t]...)
		}
		if !rq.tcp && len(m.Answer) > start {
			return
		}
	}
}

// addresses appends to m the addresses of type qt (A, AAAA or ANY for
// both) GSLB name g answers rq's client with, noting the first member
// answered in q (nil: not observed).
func (s *Server) addresses(m *dns.Msg, rq *request, g *gname, qt uint16, q *Query) {
	if qt == dns.TypeA && !g.has4 || qt == dns.TypeAAAA && !g.has6 {
		// NODATA whoever asks: placing the client would widen the ECS
		// scope of an answer that does not depend on it (RFC 7871
		// §7.2.1 wants scope 0 then).
		return
	}
	ladder := rq.ladder(g)
	before := len(m.Answer)
	if qt == dns.TypeANY {
		m.Answer, _ = g.answer(m.Answer, ladder, dns.TypeA, rq.now, s.rnd)
		m.Answer, _ = g.answer(m.Answer, ladder, dns.TypeAAAA, rq.now, s.rnd)
	} else {
		m.Answer, _ = g.answer(m.Answer, ladder, qt, rq.now, s.rnd)
	}
	if q != nil && len(m.Answer) > before {
		q.Member = g.memberOf(m.Answer[before])
	}
}

// ladder returns the ladder of g that answers rq's client: its region's
// (by the client table, then the geo database), the default (last) when
// the client is in none, the only one when g does not place clients. It
// widens rq.scope to the prefix the choice depended on when the client
// came from ECS.
func (rq *request) ladder(g *gname) int {
	if !g.placesClients() {
		return 0
	}
	ladder := len(g.ladders) - 1
	region, sc := g.table.lookup(rq.client)
	if region < 0 && g.geo != nil && rq.client.IsValid() {
		var dbScope int
		region, dbScope = g.geoLadder(rq.client)
		sc = max(sc, dbScope)
	}
	if region >= 0 {
		ladder = region
	}
	if rq.useECS && rq.client.IsValid() {
		rq.scope = max(rq.scope, sc)
	}
	return ladder
}

// finish echoes ECS in reply m with the scope the answer depends on and
// truncates UDP answers that do not fit.
func (rq *request) finish(m *dns.Msg) *dns.Msg {
	scope := rq.scope
	if rq.opt != nil && rq.ecsIn != nil {
		if rq.ecsIn.SourceNetmask == 0 {
			scope = 0
		}
		rq.opt.Option = append(rq.opt.Option, &dns.EDNS0_SUBNET{
			Code: dns.EDNS0SUBNET, Family: rq.ecsIn.Family, SourceNetmask: rq.ecsIn.SourceNetmask,
			SourceScope: uint8(scope), Address: rq.ecsIn.Address,
		})
	}
	if rq.tcp {
		m.Compress = len(m.Answer)+len(m.Ns)+len(m.Extra) > 1
		return m
	}
	rq.truncate(m)
	return m
}

// truncate makes UDP reply m fit rq's payload size: uncompressed when it
// fits so, compressed when that is needed, and when even that does not
// fit, TC set with the answer and authority sections empty and the OPT
// record alone in additional, as Knot and NSD send it. A partial answer
// (what dns.Msg.Truncate leaves) is of no use to a resolver, which asks
// again over TCP, and only adds to the reply a spoofed query reflects.
func (rq *request) truncate(m *dns.Msg) {
	m.Compress = false
	if m.Len() <= rq.udpSize {
		return
	}
	m.Compress = true
	if m.Len() <= rq.udpSize {
		return
	}
	m.Truncated = true
	m.Answer, m.Ns, m.Extra = nil, nil, nil
	if rq.opt != nil {
		m.Extra = []dns.RR{rq.opt}
	}
}
