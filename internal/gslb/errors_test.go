package gslb_test

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// Issue 13, defect 5: error replies, the DO bit, duplicate OPT records,
// malformed ECS and truncated questions. Every case goes over real UDP
// and TCP on loopback, as raw bytes so that malformed packets reach the
// server as they are.

// wire sends pkt over network to addr and returns the unpacked reply (nil
// after 500 ms of silence or when the reply does not unpack).
func wire(t *testing.T, network, addr string, pkt []byte) *dns.Msg {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	out := pkt
	if network == "tcp" {
		out = binary.BigEndian.AppendUint16(nil, uint16(len(pkt)))
		out = append(out, pkt...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	var b []byte
	if network == "tcp" {
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return nil
		}
		b = make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, b); err != nil {
			return nil
		}
	} else {
		b = make([]byte, 65535)
		n, err := c.Read(b)
		if err != nil {
			return nil
		}
		b = b[:n]
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Errorf("%s: reply does not unpack: %v", network, err)
		return nil
	}
	return m
}

func mustPack(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edns adds an OPT record (size 1232) to m, with DO when do is set.
func edns(m *dns.Msg, do bool) *dns.Msg {
	m.SetEdns0(1232, do)
	return m
}

// TestErrorRepliesKeepQuestionAndOPT: NOTIMP and FORMERR replies to a
// parsed query carry its question and, when it had one, an OPT record
// (RFC 6891 §7: "Lack of presence of an OPT record in a request MUST be
// taken as an indication that the requester does not implement any part
// of this specification"; conversely a requester that sent one gets one,
// errors included). AD is never set: Spillway does not validate, and RFC
// 6840 §5.8 / RFC 4035 §3.1.6 let only a server that has checked the data
// set it. CD is copied from the query (RFC 4035 §3.1.6, RFC 6840 §5.7).
func TestErrorRepliesKeepQuestionAndOPT(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	q := func(opcode int, adcd, withOPT bool, questions int) *dns.Msg {
		m := query("mail.gslb.example.", dns.TypeA, 0, "")
		m.Opcode = opcode
		m.AuthenticatedData, m.CheckingDisabled = adcd, adcd
		for range questions - 1 {
			m.Question = append(m.Question, m.Question[0])
		}
		m.Question = m.Question[:questions]
		if withOPT {
			edns(m, false)
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		m        *dns.Msg
		rcode    int
		question bool
	}{
		{"UPDATE with OPT, AD+CD", q(dns.OpcodeUpdate, true, true, 1), dns.RcodeNotImplemented, true},
		{"UPDATE without OPT", q(dns.OpcodeUpdate, false, false, 1), dns.RcodeNotImplemented, true},
		{"NOTIFY with OPT, AD+CD", q(dns.OpcodeNotify, true, true, 1), dns.RcodeNotImplemented, true},
		{"STATUS with OPT", q(dns.OpcodeStatus, false, true, 1), dns.RcodeNotImplemented, true},
		{"two questions with OPT, AD+CD", q(dns.OpcodeQuery, true, true, 2), dns.RcodeFormatError, true},
		{"two questions without OPT", q(dns.OpcodeQuery, false, false, 2), dns.RcodeFormatError, true},
		{"no question with OPT", q(dns.OpcodeQuery, true, true, 0), dns.RcodeFormatError, false},
		{"REFUSED with AD+CD", func() *dns.Msg {
			m := query("example.org.", dns.TypeA, 1232, "")
			m.AuthenticatedData, m.CheckingDisabled = true, true
			return m
		}(), dns.RcodeRefused, true},
	} {
		pkt := mustPack(t, tc.m)
		for _, network := range []string{"udp", "tcp"} {
			r := wire(t, network, addr, pkt)
			if r == nil {
				t.Errorf("%s %s: no reply", tc.name, network)
				continue
			}
			if r.Rcode != tc.rcode || r.Id != tc.m.Id || r.Opcode != tc.m.Opcode || !r.Response {
				t.Errorf("%s %s: rcode %s id %d opcode %d, want %s %d %d", tc.name, network,
					dns.RcodeToString[r.Rcode], r.Id, r.Opcode, dns.RcodeToString[tc.rcode], tc.m.Id, tc.m.Opcode)
			}
			if r.AuthenticatedData || r.CheckingDisabled != tc.m.CheckingDisabled || r.Truncated || r.RecursionAvailable {
				t.Errorf("%s %s: AD %v CD %v TC %v RA %v; want AD false, CD %v, TC and RA false", tc.name, network,
					r.AuthenticatedData, r.CheckingDisabled, r.Truncated, r.RecursionAvailable, tc.m.CheckingDisabled)
			}
			if got := len(r.Question) == 1 && len(tc.m.Question) > 0 && r.Question[0] == tc.m.Question[0]; got != tc.question {
				t.Errorf("%s %s: question %v, want the query's first: %v", tc.name, network, r.Question, tc.question)
			}
			if (r.IsEdns0() != nil) != (tc.m.IsEdns0() != nil) {
				t.Errorf("%s %s: OPT in reply %v, want %v (as in the query)", tc.name, network, r.IsEdns0() != nil, tc.m.IsEdns0() != nil)
			}
		}
	}
}

// TestDOBitEchoed: RFC 3225 §3: "The DO bit of the query MUST be copied
// in the response", whatever the rcode.
func TestDOBitEchoed(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	twoQ := func(do bool) *dns.Msg {
		m := query("mail.gslb.example.", dns.TypeA, 0, "")
		m.Question = append(m.Question, m.Question[0])
		return edns(m, do)
	}
	notify := func(do bool) *dns.Msg {
		m := query("mail.gslb.example.", dns.TypeA, 0, "")
		m.Opcode = dns.OpcodeNotify
		return edns(m, do)
	}
	for _, tc := range []struct {
		name string
		m    func(do bool) *dns.Msg
	}{
		{"A", func(do bool) *dns.Msg { return edns(query("mail.gslb.example.", dns.TypeA, 0, ""), do) }},
		{"weighted", func(do bool) *dns.Msg { return edns(query("w.gslb.example.", dns.TypeA, 0, ""), do) }},
		{"NXDOMAIN", func(do bool) *dns.Msg { return edns(query("nope.gslb.example.", dns.TypeA, 0, ""), do) }},
		{"REFUSED", func(do bool) *dns.Msg { return edns(query("example.org.", dns.TypeA, 0, ""), do) }},
		{"FORMERR", twoQ},
		{"NOTIMP", notify},
		{"geo with ECS", func(do bool) *dns.Msg {
			m := query("geo.gslb.example.", dns.TypeA, 1232, "10.1.2.0/24")
			m.IsEdns0().SetDo(do)
			return m
		}},
	} {
		for _, do := range []bool{true, false} {
			pkt := mustPack(t, tc.m(do))
			for _, network := range []string{"udp", "tcp"} {
				r := wire(t, network, addr, pkt)
				if r == nil || r.IsEdns0() == nil {
					t.Errorf("%s DO=%v %s: reply %v has no OPT", tc.name, do, network, r)
					continue
				}
				if got := r.IsEdns0().Do(); got != do {
					t.Errorf("%s DO=%v %s: reply DO %v", tc.name, do, network, got)
				}
			}
		}
	}
}

// TestTwoOPTRecordsFormErr: RFC 6891 §6.1.1: "If a query message with
// more than one OPT RR is received, a FORMERR (RCODE=1) MUST be
// returned." The reply carries one OPT (§7) and the question.
func TestTwoOPTRecordsFormErr(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	two := func(name string, sizes ...uint16) *dns.Msg {
		m := query(name, dns.TypeA, 0, "")
		for _, size := range sizes {
			o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
			o.SetUDPSize(size)
			m.Extra = append(m.Extra, o)
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		m     *dns.Msg
		rcode int
	}{
		{"one OPT", two("mail.gslb.example.", 1232), dns.RcodeSuccess},
		{"two OPTs", two("mail.gslb.example.", 1232, 1232), dns.RcodeFormatError},
		{"two OPTs of different sizes", two("mail.gslb.example.", 512, 4096), dns.RcodeFormatError},
		{"two OPTs outside the zones", two("example.org.", 1232, 1232), dns.RcodeFormatError},
	} {
		pkt := mustPack(t, tc.m)
		for _, network := range []string{"udp", "tcp"} {
			r := wire(t, network, addr, pkt)
			if r == nil {
				t.Errorf("%s %s: no reply", tc.name, network)
				continue
			}
			if r.Rcode != tc.rcode {
				t.Errorf("%s %s: rcode %s, want %s", tc.name, network, dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
			}
			opts := 0
			for _, rr := range r.Extra {
				if rr.Header().Rrtype == dns.TypeOPT {
					opts++
				}
			}
			if opts != 1 || len(r.Question) != 1 {
				t.Errorf("%s %s: %d OPT records and %d questions in the reply, want 1 and 1", tc.name, network, opts, len(r.Question))
			}
			if tc.rcode != dns.RcodeSuccess && len(r.Answer) != 0 {
				t.Errorf("%s %s: answers %v", tc.name, network, r.Answer)
			}
		}
	}
}

// TestMalformedECSFormErr: RFC 7871 §6: the SOURCE PREFIX-LENGTH must fit
// the family, "ADDRESS ... MUST be truncated to the number of bits
// indicated by the SOURCE PREFIX-LENGTH field, padding with 0 bits to pad
// to the end of the last octet needed", and "A server receiving an ECS
// option that uses either too few or too many ADDRESS octets, or that has
// non-zero ADDRESS bits set beyond SOURCE PREFIX-LENGTH, SHOULD return
// FORMERR to reject the packet". §7.1.1: SCOPE PREFIX-LENGTH must be 0 in
// queries. The FORMERR carries an OPT (RFC 6891 §7: "If there is a
// problem with processing the OPT record itself ... the response MUST
// include an OPT record").
func TestMalformedECSFormErr(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	ecsOpt := func(family uint16, source, scope uint8, address ...byte) *dns.EDNS0_LOCAL {
		data := binary.BigEndian.AppendUint16(nil, family)
		data = append(data, source, scope)
		data = append(data, address...)
		return &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: data}
	}
	// The option goes as raw bytes (EDNS0_LOCAL): miekg's EDNS0_SUBNET
	// would pack a well-formed ADDRESS.
	build := func(opts ...dns.EDNS0) []byte {
		m := query("geo.gslb.example.", dns.TypeA, 1232, "")
		m.IsEdns0().Option = opts
		return mustPack(t, m)
	}
	ecs := func(family uint16, source, scope uint8, address ...byte) []byte {
		return build(ecsOpt(family, source, scope, address...))
	}
	cookie := &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}
	withCookie := func(family uint16, source, scope uint8, address ...byte) []byte {
		return build(cookie, ecsOpt(family, source, scope, address...))
	}
	for _, tc := range []struct {
		name  string
		pkt   []byte
		rcode int
	}{
		{"well formed /24", ecs(1, 24, 0, 10, 1, 2), dns.RcodeSuccess},
		{"well formed /25", ecs(1, 25, 0, 10, 2, 0, 128), dns.RcodeSuccess},
		{"well formed /0", ecs(1, 0, 0), dns.RcodeSuccess},
		{"well formed IPv6 /56", ecs(2, 56, 0, 0x20, 1, 0xd, 0xb8, 0, 0, 0), dns.RcodeSuccess},
		{"well formed /24 after a cookie", withCookie(1, 24, 0, 10, 1, 2), dns.RcodeSuccess},
		{"host bits set /24", ecs(1, 24, 0, 10, 1, 2, 3), dns.RcodeFormatError},
		{"host bits set in the last octet /20", ecs(1, 20, 0, 10, 1, 0x1f), dns.RcodeFormatError},
		{"host bits set IPv6 /33", ecs(2, 33, 0, 0x20, 1, 0xd, 0xb8, 0x7f), dns.RcodeFormatError},
		{"address too long /24 (4 octets)", ecs(1, 24, 0, 10, 1, 2, 0), dns.RcodeFormatError},
		{"address too long /0 (1 octet)", ecs(1, 0, 0, 0), dns.RcodeFormatError},
		{"address too long after a cookie", withCookie(1, 24, 0, 10, 1, 2, 0), dns.RcodeFormatError},
		{"address too short after a cookie", withCookie(1, 24, 0, 10, 1), dns.RcodeFormatError},
		{"host bits set after a cookie", withCookie(1, 20, 0, 10, 1, 0x1f), dns.RcodeFormatError},
		{"address too short /24 (2 octets)", ecs(1, 24, 0, 10, 1), dns.RcodeFormatError},
		{"address too short IPv6 /64 (4 octets)", ecs(2, 64, 0, 0x20, 1, 0xd, 0xb8), dns.RcodeFormatError},
		// miekg/dns does not unpack this message ("bad netmask"), so its
		// server's FORMERR answers it, without OPT (see docs/dns.md).
		{"source prefix 33 for IPv4 (does not unpack)", ecs(1, 33, 0, 10, 1, 2, 3, 0), dns.RcodeFormatError},
		{"scope not 0", ecs(1, 24, 16, 10, 1, 2), dns.RcodeFormatError},
	} {
		for _, network := range []string{"udp", "tcp"} {
			r := wire(t, network, addr, tc.pkt)
			if r == nil {
				t.Errorf("%s %s: no reply", tc.name, network)
				continue
			}
			if r.Rcode != tc.rcode {
				t.Errorf("%s %s: rcode %s, want %s", tc.name, network, dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
			}
			unpacks := !strings.Contains(tc.name, "does not unpack")
			if tc.rcode == dns.RcodeFormatError && (unpacks && r.IsEdns0() == nil || len(r.Answer) != 0) {
				t.Errorf("%s %s: FORMERR without OPT or with answers:\n%v", tc.name, network, r)
			}
		}
	}
}

// TestQuestionWithoutTypeOrClassFormErr: a question section that ends
// after the name (or after QTYPE) is not a question (RFC 1035 §4.1.2: a
// question is QNAME, QTYPE and QCLASS): FORMERR, not REFUSED.
func TestQuestionWithoutTypeOrClassFormErr(t *testing.T) {
	_, addr := start(t, zoneYAML, gslb.Options{})
	good := mustPack(t, query("mail.gslb.example.", dns.TypeA, 0, ""))
	for _, tc := range []struct {
		name  string
		pkt   []byte
		rcode int
	}{
		{"whole question", good, dns.RcodeSuccess},
		{"no QCLASS", good[:len(good)-2], dns.RcodeFormatError},
		{"no QTYPE nor QCLASS", good[:len(good)-4], dns.RcodeFormatError},
		{"half a QTYPE", good[:len(good)-3], dns.RcodeFormatError},
	} {
		for _, network := range []string{"udp", "tcp"} {
			r := wire(t, network, addr, tc.pkt)
			if r == nil {
				t.Errorf("%s %s: no reply", tc.name, network)
				continue
			}
			if r.Rcode != tc.rcode || r.AuthenticatedData {
				t.Errorf("%s %s: rcode %s AD %v, want %s", tc.name, network, dns.RcodeToString[r.Rcode], r.AuthenticatedData, dns.RcodeToString[tc.rcode])
			}
		}
	}
}
