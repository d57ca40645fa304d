package gslb

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// udpWorkers is how many goroutines read each UDP socket. Each owns its
// buffers and answers the queries it reads itself.
const udpWorkers = 4

// serveUDP answers the queries that arrive on pc until stop is closed
// (Serve then closes pc too), each with the Server answering at the time.
// It replaces dns.Server for UDP: miekg/dns starts a goroutine and
// allocates a read buffer and a response writer per packet, which is most
// of a weighted answer's cost; here a few long-lived workers each read,
// answer and write in a loop. What a query gets is dns.Server's behaviour
// with DecorateReader (checked side by side in
// TestUDPLoopAnswersAsDNSServer): packets shorter than a header and
// responses are ignored (MsgAcceptFunc), messages that do not unpack or
// hold less than their header counts get miekg's FORMERR, the rest goes
// to the handler. With pktinfo (see askDestination) every reply leaves from the
// address its query arrived on.
//
// On Linux the socket leaves Go's network poller and is served by
// threads blocked in recvmmsg (udp_linux.go); elsewhere, and if that
// cannot be set up, by serveUDPConn.
func (f *Front) serveUDP(pc *net.UDPConn, pktinfo bool, stop <-chan struct{}) error {
	if served, err := f.serveUDPRaw(pc, pktinfo, stop); served {
		return err
	}
	return f.serveUDPConn(pc, pktinfo)
}

// serveUDPConn serves pc with udpWorkers goroutines through Go's network
// poller until pc is closed (it then returns nil).
func (f *Front) serveUDPConn(pc *net.UDPConn, pktinfo bool) error {
	var wg sync.WaitGroup
	errs := make([]error, udpWorkers)
	for i := range udpWorkers {
		wg.Go(func() { errs[i] = f.udpWorker(pc, pktinfo) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// askDestination makes a socket bound to a wildcard address (0.0.0.0,
// [::]) report each packet's destination address (IP_PKTINFO,
// IPV6_RECVPKTINFO), so that replies can leave from it, as resolvers
// require and miekg/dns's SessionUDP does. It reports whether it did;
// a socket bound to one address needs nothing.
func askDestination(pc *net.UDPConn) (bool, error) {
	a, ok := pc.LocalAddr().(*net.UDPAddr)
	if !ok || !a.IP.IsUnspecified() {
		return false, nil
	}
	// One of the two fails on a single-family socket.
	err6 := ipv6.NewPacketConn(pc).SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true)
	err4 := ipv4.NewPacketConn(pc).SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true)
	if err4 != nil && err6 != nil {
		return false, fmt.Errorf("udp %s: ask for each query's destination address: %w", a, errors.Join(err4, err6))
	}
	return true, nil
}

// udpWorker is one read-answer-write loop. With pktinfo it reads each
// packet's destination address and replies from it.
func (f *Front) udpWorker(pc *net.UDPConn, pktinfo bool) error {
	in := make([]byte, dns.MaxMsgSize)
	out := make([]byte, 0, 1024)
	var oob []byte
	var src replySource
	var scratch dns.Msg
	if pktinfo {
		oob = make([]byte, max(len(ipv4.NewControlMessage(ipv4.FlagDst|ipv4.FlagInterface)), len(ipv6.NewControlMessage(ipv6.FlagDst|ipv6.FlagInterface))))
	}
	for {
		var (
			n, oobn int
			from    netip.AddrPort
			err     error
		)
		if pktinfo {
			n, oobn, _, from, err = pc.ReadMsgUDPAddrPort(in, oob)
		} else {
			n, from, err = pc.ReadFromUDPAddrPort(in)
		}
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
			f.log.Warn("gslb: udp read failed; retrying", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var control []byte
		if pktinfo {
			control = src.control(oob[:oobn])
		}
		var b []byte
		b, out = f.answer(in[:n], from, out, &scratch)
		if b == nil {
			continue
		}
		// A failed write is the client's loss.
		if control != nil {
			_, _, _ = pc.WriteMsgUDPAddrPort(b, control, from)
		} else {
			_, _ = pc.WriteToUDPAddrPort(b, from)
		}
	}
}

// answer answers one packet with the current Server: it returns the
// reply (nil: none) and the buffer for the next reply (out, or the
// reply's, which is out grown). A panic while answering (a bug) is
// logged and costs that query its reply, not the process: the HTTP proxy
// shares it.
func (f *Front) answer(pkt []byte, from netip.AddrPort, out []byte, scratch *dns.Msg) (reply, next []byte) {
	defer func() {
		if v := recover(); v != nil {
			f.log.Error("gslb: panic answering a UDP query; no reply sent", "from", from, "panic", v)
			reply, next = nil, make([]byte, 0, 1024)
		}
	}()
	reply = f.cur.Load().answerUDP(pkt, from, out, scratch)
	if reply == nil || cap(reply) > 64<<10 {
		return reply, out
	}
	return reply, reply[:0]
}

// replySource turns the control message of a received packet into the
// one that sends the reply from the packet's destination address. It
// keeps the last one made: a socket's queries mostly arrive on one
// address, so a reply costs no allocation.
type replySource struct {
	dst net.IP
	oob []byte
}

// control returns the reply's control message (nil when the packet's
// destination is unknown: the kernel then picks the source).
func (r *replySource) control(in []byte) []byte {
	var dst net.IP
	var cm6 ipv6.ControlMessage
	if cm6.Parse(in) == nil && cm6.Dst != nil {
		dst = cm6.Dst
	} else {
		var cm4 ipv4.ControlMessage
		if cm4.Parse(in) == nil && cm4.Dst != nil {
			dst = cm4.Dst
		}
	}
	if dst == nil {
		return nil
	}
	if dst.Equal(r.dst) {
		return r.oob
	}
	// IPv6 control messages ignore IPv4 addresses: an IPv4 destination
	// (also on a dual-stack socket) gets an IP_PKTINFO.
	if dst.To4() == nil {
		r.oob = (&ipv6.ControlMessage{Src: dst}).Marshal()
	} else {
		r.oob = (&ipv4.ControlMessage{Src: dst}).Marshal()
	}
	r.dst = slices.Clone(dst)
	return r.oob
}

// answerUDP answers one packet from from and returns the reply, packed
// into out when it fits (nil: no reply). reply is scratch space for the
// reply message, reused by the caller's next query.
func (s *Server) answerUDP(pkt []byte, from netip.AddrPort, out []byte, reply *dns.Msg) []byte {
	if len(pkt) < 12 {
		return nil // not even a header: no answer (as dns.Server)
	}
	dh := wireHeader(pkt)
	req := new(dns.Msg)
	action := MsgAcceptFunc(dh)
	if action == dns.MsgAccept {
		// req keeps what did unpack, as with dns.Server; a message
		// holding less than its counts is rejected as DecorateReader
		// has dns.Server reject it.
		if err := req.Unpack(pkt); err != nil || !countsAgree(dh, req) {
			action = dns.MsgReject
		}
	} else {
		setHeader(req, dh)
	}
	var m *dns.Msg
	var q *Query
	tap := s.want()
	start := s.now()
	switch action {
	case dns.MsgIgnore:
		return nil
	case dns.MsgReject, dns.MsgRejectNotImplemented:
		m = rejected(req, action)
		if s.stats != nil {
			s.stats.count(nil, 0, m.Rcode, false)
		}
	default:
		if s.observe != nil || s.rl.rrl != nil || s.stats != nil || tap {
			q = new(Query)
		}
		if m = s.respondTo(reply, req, from.Addr().Unmap(), false, start, q); m == nil {
			return nil
		}
		s.observed(q, m, false)
	}
	b := s.sendUDP(m, req, q, pkt, from, out, action == dns.MsgAccept)
	if tap {
		zone, name, member := q.tapInfo()
		s.tapped(start, from, false, pkt, b, zone, name, member)
	}
	return b
}

// rejected turns req, a query that did not unpack (MsgReject) or is not
// implemented, into its reply: FORMERR or NOTIMP, header only.
func rejected(req *dns.Msg, action dns.MsgAcceptAction) *dns.Msg {
	opcode := req.Opcode
	req.SetRcodeFormatError(req)
	req.Zero = false
	if action == dns.MsgRejectNotImplemented {
		req.Opcode = opcode
		req.Rcode = dns.RcodeNotImplemented
	}
	req.Ns, req.Answer, req.Extra = nil, nil, nil
	return req
}

// sendUDP returns reply m to req packed into out, rate limited, and
// signed when req was a TSIG query that unpacked (accepted): nil when
// nothing is sent.
func (s *Server) sendUDP(m, req *dns.Msg, q *Query, pkt []byte, from netip.AddrPort, out []byte, accepted bool) []byte {
	if s.rl.rrl != nil {
		if m = s.limitUDP(m, q, from.Addr().Unmap()); m == nil {
			return nil // dropped (rrl.go)
		}
	}
	if accepted && req.IsTsig() != nil {
		return s.signUDP(m, req, pkt) // TSIG (tsig.go)
	}
	return s.pack(m, req, out)
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
