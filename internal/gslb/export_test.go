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

// RejectShort exposes DecorateReader's check to its fuzz target.
var RejectShort = rejectShort
