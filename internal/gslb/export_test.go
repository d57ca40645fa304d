package gslb

import (
	"net/netip"

	"github.com/miekg/dns"
)

// AnswerUDP exposes the UDP loop's answering step to the benchmarks.
func (s *Server) AnswerUDP(pkt []byte, from netip.AddrPort, out []byte) []byte {
	var m dns.Msg
	return s.answerUDP(pkt, from, out, &m)
}

// UDPAnswerer returns AnswerUDP with one scratch reply reused across
// calls, as a UDP worker reuses its own.
func (s *Server) UDPAnswerer() func(pkt []byte, from netip.AddrPort, out []byte) []byte {
	var m dns.Msg
	return func(pkt []byte, from netip.AddrPort, out []byte) []byte { return s.answerUDP(pkt, from, out, &m) }
}

// RejectShort exposes DecorateReader's check to its fuzz target.
var RejectShort = rejectShort
