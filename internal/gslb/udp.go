package gslb

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// udpWorkers is how many goroutines read each UDP socket. Each owns its
// buffers and answers the queries it reads itself.
const udpWorkers = 4

// serveUDP answers the queries that arrive on pc until pc is closed (it
// then returns nil). It replaces dns.Server for UDP: miekg/dns starts a
// goroutine and allocates a read buffer and a response writer per packet,
// which is most of a weighted answer's cost; here a few long-lived
// workers each read, answer and write in a loop. What a query gets is
// dns.Server's behaviour (checked side by side in TestUDPLoopAnswersAsDNSServer):
// packets shorter than a header and responses are ignored (MsgAcceptFunc),
// messages that do not unpack get miekg's FORMERR, the rest goes to the
// handler.
func (s *Server) serveUDP(pc *net.UDPConn) error {
	var wg sync.WaitGroup
	errs := make([]error, udpWorkers)
	for i := range udpWorkers {
		wg.Go(func() { errs[i] = s.udpWorker(pc) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// udpWorker is one read-answer-write loop.
func (s *Server) udpWorker(pc *net.UDPConn) error {
	in := make([]byte, dns.MaxMsgSize)
	out := make([]byte, 0, 1024)
	for {
		n, from, err := pc.ReadFromUDPAddrPort(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Anything else: keep serving (a DNS server should not stop
			// over one bad read), but do not spin on a lasting error.
			s.log.Warn("gslb: udp read failed; retrying", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		out = s.answerUDP(pc, in[:n], from, out)
	}
}

// answerUDP answers one packet and returns the output buffer for reuse.
func (s *Server) answerUDP(pc *net.UDPConn, pkt []byte, from netip.AddrPort, out []byte) []byte {
	if len(pkt) < 12 {
		return out // not even a header: no answer (as dns.Server)
	}
	dh := dns.Header{
		Id:      binary.BigEndian.Uint16(pkt[0:]),
		Bits:    binary.BigEndian.Uint16(pkt[2:]),
		Qdcount: binary.BigEndian.Uint16(pkt[4:]),
		Ancount: binary.BigEndian.Uint16(pkt[6:]),
		Nscount: binary.BigEndian.Uint16(pkt[8:]),
		Arcount: binary.BigEndian.Uint16(pkt[10:]),
	}
	req := new(dns.Msg)
	action := MsgAcceptFunc(dh)
	if action == dns.MsgAccept {
		if err := req.Unpack(pkt); err != nil {
			action = dns.MsgReject // req keeps what did unpack, as with dns.Server
		}
	} else {
		setHeader(req, dh)
	}
	var m *dns.Msg
	var q *Query
	switch action {
	case dns.MsgIgnore:
		return out
	case dns.MsgReject, dns.MsgRejectNotImplemented:
		opcode := req.Opcode
		req.SetRcodeFormatError(req)
		req.Zero = false
		if action == dns.MsgRejectNotImplemented {
			req.Opcode = opcode
			req.Rcode = dns.RcodeNotImplemented
		}
		req.Ns, req.Answer, req.Extra = nil, nil, nil
		m = req
	default:
		if s.observe != nil {
			q = new(Query)
		}
		if m = s.respondQ(req, from.Addr().Unmap(), false, s.now(), q); m == nil {
			return out
		}
		s.observed(q, m)
	}
	b := s.pack(m, req, out)
	if b == nil {
		return out
	}
	_, _ = pc.WriteToUDPAddrPort(b, from) // a failed write is the client's loss
	if cap(b) > 64<<10 {
		return out
	}
	return b[:0]
}

// setHeader fills m's header from a wire header, as dns.Msg.Unpack does.
func setHeader(m *dns.Msg, dh dns.Header) {
	const (
		qr = 1 << 15
		aa = 1 << 10
		tc = 1 << 9
		rd = 1 << 8
		ra = 1 << 7
		z  = 1 << 6
		ad = 1 << 5
		cd = 1 << 4
	)
	m.Id = dh.Id
	m.Response = dh.Bits&qr != 0
	m.Opcode = int(dh.Bits>>11) & 0xF
	m.Authoritative = dh.Bits&aa != 0
	m.Truncated = dh.Bits&tc != 0
	m.RecursionDesired = dh.Bits&rd != 0
	m.RecursionAvailable = dh.Bits&ra != 0
	m.Zero = dh.Bits&z != 0
	m.AuthenticatedData = dh.Bits&ad != 0
	m.CheckingDisabled = dh.Bits&cd != 0
	m.Rcode = int(dh.Bits & 0xF)
}
