package gslb_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// The UDP loop answers exactly as miekg/dns's dns.Server with the same
// handler: the same bytes for well-formed queries (deterministic names),
// the same FORMERR / NOTIMP for refused headers and undecodable messages,
// and silence for responses and runts.
func TestUDPLoopAnswersAsDNSServer(t *testing.T) {
	_, loopAddr := start(t, zoneYAML, gslb.Options{})

	ref := compile(t, zoneYAML, gslb.Options{})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: ref.Handler(), MsgAcceptFunc: gslb.MsgAcceptFunc, DecorateReader: gslb.DecorateReader, UDPSize: dns.MaxMsgSize, NotifyStartedFunc: func() { close(started) }}
	go srv.ActivateAndServe()
	defer srv.Shutdown()
	<-started
	refAddr := pc.LocalAddr().String()

	pack := func(m *dns.Msg) []byte {
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	q := func(name string, qtype uint16) *dns.Msg { return query(name, qtype, 0, "") }
	twoQuestions := q("mail.gslb.example.", dns.TypeA)
	twoQuestions.Question = append(twoQuestions.Question, twoQuestions.Question[0])
	update := q("mail.gslb.example.", dns.TypeA)
	update.Opcode = dns.OpcodeUpdate
	response := q("mail.gslb.example.", dns.TypeA)
	response.Response = true
	withCD := q("mail.gslb.example.", dns.TypeA)
	withCD.CheckingDisabled, withCD.AuthenticatedData = true, true
	good := pack(q("mail.gslb.example.", dns.TypeA))
	withOPT2 := func(m *dns.Msg, do bool) *dns.Msg { m.SetEdns0(1232, do); return m }
	withOPT := func(m *dns.Msg) *dns.Msg { return withOPT2(m, false) }
	twoOPTs := withOPT2(q("mail.gslb.example.", dns.TypeA), true)
	twoOPTs.Extra = append(twoOPTs.Extra, twoOPTs.Extra[0])
	badECS := func(source uint8, address ...byte) *dns.Msg {
		m := withOPT(q("geo.gslb.example.", dns.TypeA))
		data := append([]byte{0, 1, source, 0}, address...)
		m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: data}}
		return m
	}
	count := func(b []byte, off int, v uint16) []byte {
		b = bytes.Clone(b)
		binary.BigEndian.PutUint16(b[off:], v)
		return b
	}
	notify := withOPT(q("mail.gslb.example.", dns.TypeA))
	notify.Opcode, notify.AuthenticatedData = dns.OpcodeNotify, true

	for _, tc := range []struct {
		name  string
		pkt   []byte
		rcode int // of the reply; -1: no reply
	}{
		{"A record", good, dns.RcodeSuccess},
		{"SRV", pack(q("_sip._udp.gslb.example.", dns.TypeSRV)), dns.RcodeSuccess},
		{"CNAME chain out of zone", pack(q("out.gslb.example.", dns.TypeA)), dns.RcodeSuccess},
		{"NXDOMAIN", pack(q("nope.gslb.example.", dns.TypeA)), dns.RcodeNameError},
		{"REFUSED (not our zone)", pack(q("example.org.", dns.TypeA)), dns.RcodeRefused},
		{"EDNS, big TXT truncated", pack(query("big.gslb.example.", dns.TypeTXT, 4096, "")), dns.RcodeSuccess},
		{"plain UDP, big TXT truncated", pack(q("big.gslb.example.", dns.TypeTXT)), dns.RcodeSuccess},
		{"DO bit", pack(withOPT2(q("mail.gslb.example.", dns.TypeA), true)), dns.RcodeSuccess},
		{"two OPT records: FORMERR", pack(twoOPTs), dns.RcodeFormatError},
		{"ECS with host bits set: FORMERR", pack(badECS(24, 10, 2, 0, 1)), dns.RcodeFormatError},
		{"ECS address too short: FORMERR", pack(badECS(24, 10, 2)), dns.RcodeFormatError},
		{"ECS on a GEO name", pack(query("geo.gslb.example.", dns.TypeA, 1232, "10.2.0.0/24")), dns.RcodeSuccess},
		{"flags", pack(withCD), dns.RcodeSuccess},
		{"two questions: FORMERR", pack(twoQuestions), dns.RcodeFormatError},
		{"UPDATE: NOTIMP", pack(update), dns.RcodeNotImplemented},
		{"UPDATE with OPT: NOTIMP", pack(withOPT(update.Copy())), dns.RcodeNotImplemented},
		{"NOTIFY with OPT and AD: NOTIMP", pack(notify), dns.RcodeNotImplemented},
		{"two questions with OPT: FORMERR", pack(withOPT(twoQuestions.Copy())), dns.RcodeFormatError},
		{"truncated message: FORMERR", good[:len(good)-3], dns.RcodeFormatError},
		{"no QCLASS: FORMERR", good[:len(good)-2], dns.RcodeFormatError},
		{"no QTYPE nor QCLASS: FORMERR", good[:len(good)-4], dns.RcodeFormatError},
		{"trailing garbage", append(append([]byte{}, good...), 1, 2, 3), dns.RcodeSuccess},
		{"ARCOUNT=1 without a record: FORMERR", count(good, 10, 1), dns.RcodeFormatError},
		{"ANCOUNT=1 without a record: FORMERR", count(good, 6, 1), dns.RcodeFormatError},
		{"QDCOUNT=2 with one question: FORMERR", count(good, 4, 2), dns.RcodeFormatError},
		{"header only, QDCOUNT=1: FORMERR", count(good[:12], 4, 1), dns.RcodeFormatError},
		{"ARCOUNT=2 with one OPT: FORMERR", count(pack(withOPT(q("mail.gslb.example.", dns.TypeA))), 10, 2), dns.RcodeFormatError},
		{"ARCOUNT=0 before an OPT (ignored)", count(pack(withOPT(q("mail.gslb.example.", dns.TypeA))), 10, 0), dns.RcodeSuccess},
		{"a response: ignored", pack(response), -1},
		{"runt: ignored", good[:7], -1},
	} {
		// A reply that is due is waited for generously (a loaded
		// machine answers late, not never); silence can only be
		// observed for a while.
		wait := 10 * time.Second
		if tc.rcode < 0 {
			wait = 500 * time.Millisecond
		}
		want := exchangeRaw(t, refAddr, tc.pkt, wait)
		got := exchangeRaw(t, loopAddr, tc.pkt, wait)
		rcode := -1
		if got != nil {
			var m dns.Msg
			if err := m.Unpack(got); err != nil {
				t.Errorf("%s: reply does not unpack: %v", tc.name, err)
				continue
			}
			rcode = m.Rcode
		}
		if rcode != tc.rcode {
			t.Errorf("%s: rcode %d, want %d", tc.name, rcode, tc.rcode)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: loop answered\n%s\ndns.Server answered\n%s", tc.name, hex.Dump(got), hex.Dump(want))
		}
	}
}

// exchangeRaw sends pkt over UDP and returns the reply, nil after wait
// of silence.
func exchangeRaw(t *testing.T, addr string, pkt []byte, wait time.Duration) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}
