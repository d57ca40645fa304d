package gslb

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
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
	tap := s.want()
	var q *Query
	if s.observe != nil || s.stats != nil || tap {
		q = new(Query)
	}
	start := s.now()
	m := s.respondQ(r, src, tcp, start, q)
	if m == nil {
		return
	}
	s.observed(q, m, tcp)
	if r.IsTsig() != nil {
		s.serveSigned(w, r, m)
		if tap {
			s.tapTCP(start, w, r, nil, q)
		}
		return
	}
	bp := s.bufs.Get().(*[]byte)
	out := s.pack(m, r, *bp)
	if out != nil {
		_, _ = w.Write(out) // a failed write is the client's loss; nothing to retry
	}
	if tap {
		s.tapTCP(start, w, r, out, q)
	}
	if out != nil && cap(out) <= 64<<10 {
		*bp = out[:0]
	}
	s.bufs.Put(bp)
}

// tapTCP hands a query r answered by serveDNS (reply out as sent, nil
// when it was not packed here) to the Tap, with r repacked.
func (s *Server) tapTCP(start time.Time, w dns.ResponseWriter, r *dns.Msg, out []byte, q *Query) {
	pkt, err := r.Pack()
	if err != nil {
		pkt = nil
	}
	_, tcp := remoteAddr(w.RemoteAddr())
	zone, name, member := q.tapInfo()
	s.tapped(start, addrPort(w.RemoteAddr()), tcp, pkt, out, zone, name, member)
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

// addrPort returns a's address and port (invalid when a is neither UDP
// nor TCP).
func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort()
	case *net.TCPAddr:
		return a.AddrPort()
	}
	return netip.AddrPort{}
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

// countsAgree reports whether m, unpacked from a message whose header is
// dh, holds every question and record the header counts. miekg/dns stops
// unpacking where the message ends, without an error, whatever the
// counts promise; a query whose counts promise more than it holds (as
// ARCOUNT=1 and no record) is malformed, and BIND answers it FORMERR.
// Bytes after the last record counted are ignored, as BIND ignores them.
func countsAgree(dh dns.Header, m *dns.Msg) bool {
	return int(dh.Qdcount) == len(m.Question) && int(dh.Ancount) == len(m.Answer) &&
		int(dh.Nscount) == len(m.Ns) && int(dh.Arcount) == len(m.Extra)
}

// DecorateReader makes a dns.Server reject a message whose header counts
// more than it holds (countsAgree) with the FORMERR it gives a message
// that does not unpack, the reply the UDP loop gives it (answerUDP
// checks the counts itself). It costs a TCP query one more unpack. The
// TCP listeners use it; a dns.Server composed with Handler should too.
func DecorateReader(r dns.Reader) dns.Reader { return countingReader{r} }

// countingReader is DecorateReader's dns.Reader.
type countingReader struct{ dns.Reader }

// ReadTCP implements dns.Reader.
func (cr countingReader) ReadTCP(conn net.Conn, timeout time.Duration) ([]byte, error) {
	msg, err := cr.Reader.ReadTCP(conn, timeout)
	if fc, ok := conn.(*firstQueryConn); ok {
		fc.firstQueryRead()
	}
	return rejectShort(msg), err
}

// ReadUDP implements dns.Reader.
func (cr countingReader) ReadUDP(conn *net.UDPConn, timeout time.Duration) ([]byte, *dns.SessionUDP, error) {
	msg, sess, err := cr.Reader.ReadUDP(conn, timeout)
	return rejectShort(msg), sess, err
}

// ReadPacketConn implements dns.PacketConnReader when the decorated
// Reader does.
func (cr countingReader) ReadPacketConn(conn net.PacketConn, timeout time.Duration) ([]byte, net.Addr, error) {
	pr, ok := cr.Reader.(dns.PacketConnReader)
	if !ok {
		return nil, nil, errors.New("gslb: the decorated dns.Reader reads no net.PacketConn")
	}
	msg, addr, err := pr.ReadPacketConn(conn, timeout)
	return rejectShort(msg), addr, err
}

// rejectShort returns msg, or when its header counts more than it holds,
// msg and one octet more: the start of a compression pointer cut short,
// on which miekg/dns's unpack fails where the first missing question or
// record would begin, after the ones that are there (so its FORMERR
// echoes the question, as answerUDP's and BIND's do).
func rejectShort(msg []byte) []byte {
	if len(msg) < msgHeaderSize {
		return msg
	}
	var m dns.Msg
	if m.Unpack(msg) != nil || countsAgree(wireHeader(msg), &m) {
		return msg
	}
	return append(msg, 0xC0)
}

// wireHeader reads the header of a message of at least msgHeaderSize
// octets.
func wireHeader(pkt []byte) dns.Header {
	return dns.Header{
		Id:      binary.BigEndian.Uint16(pkt[0:]),
		Bits:    binary.BigEndian.Uint16(pkt[2:]),
		Qdcount: binary.BigEndian.Uint16(pkt[4:]),
		Ancount: binary.BigEndian.Uint16(pkt[6:]),
		Nscount: binary.BigEndian.Uint16(pkt[8:]),
		Arcount: binary.BigEndian.Uint16(pkt[10:]),
	}
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

// observed counts an answered query (Options.Stats) and reports it to
// Options.Observe (q nil: both off).
func (s *Server) observed(q *Query, m *dns.Msg, tcp bool) {
	if q == nil {
		return
	}
	q.Rcode = m.Rcode
	if len(m.Question) > 0 {
		q.Type = m.Question[0].Qtype
	}
	if s.stats != nil {
		s.stats.count(q.stats, q.Type, q.Rcode, tcp)
	}
	if s.observe != nil {
		s.observe(*q)
	}
}

// respondQ is respond, noting the name and the first GSLB member
// answered in q when q is not nil.
func (s *Server) respondQ(r *dns.Msg, src netip.Addr, tcp bool, now time.Time, q *Query) *dns.Msg {
	return s.respondTo(new(dns.Msg), r, src, tcp, now, q)
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
