package gslb

import (
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/config"
)

// MaxUDPSize is the largest UDP response Spillway sends, whatever buffer
// size a client advertises: 1232 bytes, the DNS Flag Day 2020 value, so
// answers are not fragmented. Larger answers are truncated (TC set) and
// the client retries over TCP.
const MaxUDPSize = 1232

// maxChain bounds how many CNAMEs an answer follows inside a zone.
const maxChain = 8

// serveDNS answers one query. It is the dns.Handler of the TCP listeners
// (UDP has its own loop, serveUDP).
func (s *Server) serveDNS(w dns.ResponseWriter, r *dns.Msg) {
	src, tcp := remoteAddr(w.RemoteAddr())
	if isTransfer(r, tcp) {
		s.serveTransfer(w, r, src)
		return
	}
	var q *Query
	if s.observe != nil {
		q = new(Query)
	}
	m := s.respondQ(r, src, tcp, s.now(), q)
	if m == nil {
		return
	}
	s.observed(q, m)
	if r.IsTsig() != nil {
		s.serveSigned(w, r, m)
		return
	}
	bp := s.bufs.Get().(*[]byte)
	if out := s.pack(m, r, *bp); out != nil {
		_, _ = w.Write(out) // a failed write is the client's loss; nothing to retry
		if cap(out) <= 64<<10 {
			*bp = out[:0]
		}
	}
	s.bufs.Put(bp)
}

// pack packs reply m to r into buf, or a SERVFAIL when m does not pack;
// nil when neither does.
func (s *Server) pack(m, r *dns.Msg, buf []byte) []byte {
	// PackBuffer packs into buf only when its length (not its capacity)
	// has room: the reused buffers arrive emptied (buf[:0]).
	buf = buf[:cap(buf)]
	out, err := m.PackBuffer(buf)
	if err == nil {
		return out
	}
	s.log.Warn("gslb: cannot pack reply", "qname", qname(r), "err", err)
	fail := new(dns.Msg)
	fail.SetRcode(r, dns.RcodeServerFailure)
	fail.RecursionAvailable = false
	if out, err = fail.PackBuffer(buf); err != nil {
		return nil
	}
	return out
}

// qname returns the first question's name, for logs.
func qname(r *dns.Msg) string {
	if len(r.Question) == 0 {
		return ""
	}
	return r.Question[0].Name
}

// remoteAddr returns the client's IP and whether it came over TCP.
func remoteAddr(a net.Addr) (netip.Addr, bool) {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap(), false
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// MsgAcceptFunc decides, from its header alone, whether a message is
// answered: responses are ignored, everything else is unpacked and goes
// to the handler, which answers NOTIMP and FORMERR itself so that those
// replies carry the question and the OPT record (miekg/dns's own reject
// path drops both and copies every header bit). Only messages that do
// not unpack still get miekg's FORMERR. Both listeners use it; a
// dns.Server composed with Handler should too.
func MsgAcceptFunc(dh dns.Header) dns.MsgAcceptAction {
	if dh.Bits&(1<<15) != 0 { // QR: a response
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}

// Exchange answers query r from a resolver at src as of now, exactly as
// the listeners do but without sockets and as if over TCP (the reply is
// never truncated). It returns nil when r must not be answered (it is
// itself a response). The simulator drives it on a virtual clock; now
// should not go backwards between calls.
func (s *Server) Exchange(r *dns.Msg, src netip.Addr, now time.Time) *dns.Msg {
	return s.respond(r, src, true, now)
}

// respond builds the reply to r from a resolver at src at now, or returns
// nil when r must not be answered (it is itself a response).
func (s *Server) respond(r *dns.Msg, src netip.Addr, tcp bool, now time.Time) *dns.Msg {
	return s.respondQ(r, src, tcp, now, nil)
}

// observed reports an answered query to Options.Observe (q nil: off).
func (s *Server) observed(q *Query, m *dns.Msg) {
	if q == nil {
		return
	}
	q.Rcode = m.Rcode
	if len(m.Question) > 0 {
		q.Type = m.Question[0].Qtype
	}
	s.observe(*q)
}

// respondQ is respond, noting the name and the first GSLB member
// answered in q when q is not nil.
func (s *Server) respondQ(r *dns.Msg, src netip.Addr, tcp bool, now time.Time, q *Query) *dns.Msg {
	return s.respondTo(new(dns.Msg), r, src, tcp, now, q)
}

// respondTo is respondQ building the reply in m, which it clears first
// (the UDP loop reuses one per worker).
func (s *Server) respondTo(m, r *dns.Msg, src netip.Addr, tcp bool, now time.Time, q *Query) *dns.Msg {
	if r.Response {
		return nil
	}
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
	var reqOpt, opt *dns.OPT
	opts := 0
	for _, rr := range r.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			reqOpt = o
			opts++
		}
	}
	if reqOpt != nil {
		opt = &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		opt.SetUDPSize(MaxUDPSize)
		// RFC 3225 §3: "The DO bit of the query MUST be copied in the
		// response."
		if reqOpt.Do() {
			opt.SetDo()
		}
		m.Extra = append(m.Extra, opt)
	}
	if r.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m
	}
	// One question, as RFC 9619 §3 requires of QUERY; at most one record
	// in answer and authority and two in additional, as miekg/dns's
	// DefaultMsgAcceptFunc (which MsgAcceptFunc replaces) insisted.
	if len(r.Question) != 1 || len(r.Answer) > 1 || len(r.Ns) > 1 || len(r.Extra) > 2 {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	// A question is QNAME, QTYPE and QCLASS (RFC 1035 §4.1.2). miekg/dns
	// unpacks a question section that ends after the name, or after
	// QTYPE, with the missing fields 0; 0 is a reserved type and class
	// (RFC 6895 §3.1, §3.2) either way, so neither is a question to
	// refuse but a malformed one.
	if q := r.Question[0]; q.Qtype == 0 || q.Qclass == 0 {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	// RFC 6891 §6.1.1: "If a query message with more than one OPT RR is
	// received, a FORMERR (RCODE=1) MUST be returned." The reply has one.
	if opts > 1 {
		m.Rcode = dns.RcodeFormatError
		return m
	}

	udpSize := dns.MinMsgSize
	client, useECS := src, false
	var ecsIn *dns.EDNS0_SUBNET
	if reqOpt != nil {
		if reqOpt.Version() != 0 {
			m.Rcode = dns.RcodeBadVers
			return m
		}
		udpSize = min(max(int(reqOpt.UDPSize()), dns.MinMsgSize), MaxUDPSize)
		for _, o := range reqOpt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				ecsIn = e
			}
		}
		if ecsIn != nil {
			a, ok := ecsAddr(ecsIn, ecsAddrLen(reqOpt, ecsIn))
			if !ok {
				m.Rcode = dns.RcodeFormatError
				return m
			}
			// RFC 7871 §7.1.2: source prefix 0 means "do not use my
			// address"; the answer is then not tailored (scope 0).
			client, useECS = a, true
		}
	}

	qu := r.Question[0]
	if qu.Qclass == dns.ClassCHAOS && s.chaos(m, qu) {
		return s.finish(m, opt, ecsIn, 0, udpSize, tcp)
	}
	if qu.Qclass != dns.ClassINET || qu.Qtype == dns.TypeAXFR || qu.Qtype == dns.TypeIXFR {
		m.Rcode = dns.RcodeRefused
		return s.finish(m, opt, ecsIn, 0, udpSize, tcp)
	}
	name := strings.ToLower(qu.Name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	z := s.zones.find(name)
	if z == nil {
		m.Rcode = dns.RcodeRefused
		return s.finish(m, opt, ecsIn, 0, udpSize, tcp)
	}
	// RFC 9824 §3.5: an explicit query for the NXNAME meta-type gets
	// FORMERR from a server doing compact denial.
	if qu.Qtype == dns.TypeNXNAME && z.signer != nil {
		m.Rcode = dns.RcodeFormatError
		return s.finish(m, opt, ecsIn, 0, udpSize, tcp)
	}
	m.Authoritative = true
	scope := 0
	s.syncView(now)
	var n *node // where the answer ended: name's node, nil if none
	for hop := 0; ; hop++ {
		if cut := z.cutAbove(name, qu.Qtype); cut != "" {
			s.referral(m, z, cut)
			break
		}
		wild, observed := false, name
		n = z.nodes[name]
		if n == nil {
			// Answered from a wildcard: observed (metrics) under the
			// wildcard's owner, so random names cannot grow the series.
			if n, observed = z.wildcard(name); n == nil {
				m.Rcode = dns.RcodeNameError
				m.Ns = append(m.Ns, z.negSOA)
				break
			}
			wild = true
		}
		if q != nil && q.Name == "" {
			q.Name = observed
		}
		start := len(m.Answer)
		if n.cname != nil && qu.Qtype != dns.TypeCNAME {
			m.Answer = append(m.Answer, n.cname)
			synthesize(m.Answer[start:], name, wild)
			if hop >= maxChain || !config.InDNSZone(n.cname.Target, z.origin) {
				break
			}
			name = n.cname.Target
			continue
		}
		before := len(m.Answer)
		if g := n.gslb; g != nil && (qu.Qtype == dns.TypeA || qu.Qtype == dns.TypeAAAA || qu.Qtype == dns.TypeANY) {
			ladder := len(g.ladders) - 1
			if g.placesClients() {
				region, sc := g.table.lookup(client)
				if region < 0 && g.geo != nil && client.IsValid() {
					var dbScope int
					region, dbScope = g.geoLadder(client)
					sc = max(sc, dbScope)
				}
				if region >= 0 {
					ladder = region
				}
				if useECS && client.IsValid() {
					scope = max(scope, sc)
				}
			} else {
				ladder = 0
			}
			if qu.Qtype == dns.TypeANY {
				m.Answer, _ = g.answer(m.Answer, ladder, dns.TypeA, now, s.rnd)
				m.Answer, _ = g.answer(m.Answer, ladder, dns.TypeAAAA, now, s.rnd)
			} else {
				m.Answer, _ = g.answer(m.Answer, ladder, qu.Qtype, now, s.rnd)
			}
			if q != nil && len(m.Answer) > before {
				q.Member = g.memberOf(m.Answer[before])
			}
		} else if qu.Qtype == dns.TypeANY {
			// RFC 8482 allows less; a static name has few record sets.
			for _, rrs := range n.rrsets {
				m.Answer = append(m.Answer, rrs...)
			}
		} else if qu.Qtype == dns.TypeCNAME && n.cname != nil {
			m.Answer = append(m.Answer, n.cname)
		} else {
			rrs := n.rrsets[qu.Qtype]
			m.Answer = append(m.Answer, rrs...)
			if qu.Qtype == dns.TypeNS {
				m.Extra = s.glue(m.Extra, z, rrs)
			}
		}
		synthesize(m.Answer[start:], name, wild)
		if len(m.Answer) == before {
			m.Ns = append(m.Ns, z.negSOA) // NODATA
		}
		break
	}
	if z.signer != nil && reqOpt != nil && reqOpt.Do() {
		z.signer.sign(m, opt, reqOpt.Co(), name, n, now)
	}
	return s.finish(m, opt, ecsIn, scope, udpSize, tcp)
}

// glue appends in-zone addresses of name servers to extra, keeping the
// OPT record last.
func (s *Server) glue(extra []dns.RR, z *zone, ns []dns.RR) []dns.RR {
	var opt dns.RR
	if n := len(extra); n > 0 && extra[n-1].Header().Rrtype == dns.TypeOPT {
		opt, extra = extra[n-1], extra[:n-1]
	}
	for _, rr := range ns {
		if n := z.nodes[rr.(*dns.NS).Ns]; n != nil {
			extra = append(extra, n.rrsets[dns.TypeA]...)
			extra = append(extra, n.rrsets[dns.TypeAAAA]...)
		}
	}
	if opt != nil {
		extra = append(extra, opt)
	}
	return extra
}

// finish echoes ECS with the scope the answer depends on and truncates
// UDP answers that do not fit.
func (s *Server) finish(m *dns.Msg, opt *dns.OPT, ecsIn *dns.EDNS0_SUBNET, scope, udpSize int, tcp bool) *dns.Msg {
	if opt != nil && ecsIn != nil {
		if ecsIn.SourceNetmask == 0 {
			scope = 0
		}
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{
			Code: dns.EDNS0SUBNET, Family: ecsIn.Family, SourceNetmask: ecsIn.SourceNetmask,
			SourceScope: uint8(scope), Address: ecsIn.Address,
		})
	}
	if tcp {
		m.Compress = len(m.Answer)+len(m.Ns)+len(m.Extra) > 1
		return m
	}
	m.Truncate(udpSize)
	return m
}

// ecsAddrLen returns how many ADDRESS octets ecs, an option of opt, had
// on the wire, or -1 when opt was not unpacked from the wire (Exchange's
// callers build queries; their Rdlength is 0, which an OPT carrying ECS
// never has on the wire). miekg/dns unpacks ADDRESS into a full-length
// address, so the length is recovered from the OPT's RDLENGTH: without
// other options, directly; with others, by what repacking them takes
// (dns.Len packs each option: allocations, but only then).
func ecsAddrLen(opt *dns.OPT, ecs *dns.EDNS0_SUBNET) int {
	rdlen := int(opt.Hdr.Rdlength)
	if rdlen == 0 {
		return -1
	}
	if len(opt.Option) == 1 {
		return rdlen - 8 // option code, option length, family, two prefix lengths
	}
	// dns.Len is the header (11 octets) plus every option as miekg packs
	// it, ECS with exactly the octets its source prefix needs.
	return (int(ecs.SourceNetmask)+7)/8 + rdlen - (dns.Len(opt) - 11)
}

// ecsAddr returns the client address of an ECS option whose ADDRESS had
// addrLen octets on the wire (-1: unknown), invalid when the source
// prefix is 0, and whether the option is well formed: a known family, a
// source prefix within the family and a scope of 0 in queries (RFC 7871
// §6, §7.1.1), and an ADDRESS of exactly the octets the source prefix
// needs with no bit set beyond it (RFC 7871 §6: "A server receiving an
// ECS option that uses either too few or too many ADDRESS octets, or that
// has non-zero ADDRESS bits set beyond SOURCE PREFIX-LENGTH, SHOULD
// return FORMERR to reject the packet").
func ecsAddr(e *dns.EDNS0_SUBNET, addrLen int) (netip.Addr, bool) {
	var bits int
	switch e.Family {
	case 1:
		bits = 32
	case 2:
		bits = 128
	default:
		return netip.Addr{}, false
	}
	if int(e.SourceNetmask) > bits || e.SourceScope != 0 {
		return netip.Addr{}, false
	}
	if addrLen >= 0 && addrLen != (int(e.SourceNetmask)+7)/8 {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(e.Address)
	if !ok {
		return netip.Addr{}, e.SourceNetmask == 0
	}
	if bits == 32 {
		a = a.Unmap()
		if !a.Is4() {
			return netip.Addr{}, false
		}
	}
	p, err := a.Prefix(int(e.SourceNetmask))
	if err != nil || p.Addr() != a {
		return netip.Addr{}, false
	}
	if e.SourceNetmask == 0 {
		return netip.Addr{}, true
	}
	return a, true
}
