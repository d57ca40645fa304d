package gslb_test

import (
	"encoding/binary"
	"io"
	"net"
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
