package gslb_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// secondary is a local UDP server that records the NOTIFY messages it
// gets (checking their TSIG with the test key) and acknowledges them.
func secondary(t *testing.T) (string, <-chan *dns.Msg) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dns.Msg, 16)
	srv := &dns.Server{PacketConn: pc, TsigSecret: map[string]string{"xfr-key.": xfrSecret},
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			if r.Opcode != dns.OpcodeNotify {
				return
			}
			if r.IsTsig() == nil || w.TsigStatus() != nil {
				t.Errorf("NOTIFY not signed with the key: %v %v", r.IsTsig(), w.TsigStatus())
			}
			got <- r.Copy()
			m := new(dns.Msg)
			m.SetReply(r)
			if ts := r.IsTsig(); ts != nil {
				m.SetTsig(ts.Hdr.Name, ts.Algorithm, 300, time.Now().Unix())
			}
			_ = w.WriteMsg(m)
		})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String(), got
}

// runHealth runs s's health loop (which sends the NOTIFY messages) until
// the test ends.
func runHealth(t *testing.T, s *gslb.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.RunHealth(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// notified waits for a NOTIFY and returns the serial of its SOA.
func notified(t *testing.T, got <-chan *dns.Msg) uint32 {
	t.Helper()
	select {
	case m := <-got:
		if len(m.Question) != 1 || m.Question[0].Name != "gslb.example." || m.Question[0].Qtype != dns.TypeSOA || !m.Authoritative {
			t.Fatalf("NOTIFY: %v", m)
		}
		if len(m.Answer) == 1 {
			if soa, ok := m.Answer[0].(*dns.SOA); ok {
				return soa.Serial
			}
		}
		t.Fatalf("NOTIFY without the SOA: %v", m)
	case <-time.After(5 * time.Second):
		t.Fatal("no NOTIFY")
	}
	return 0
}

func TestNotifyAtStartAndWhenTheSerialChanges(t *testing.T) {
	addr, got := secondary(t)
	yaml := xfrYAML(`{tsigKeys: [{name: xfr-key., secret: "` + xfrSecret + `"}], notify: ["` + addr + `"]}`)
	s1 := compile(t, yaml, gslb.Options{})
	runHealth(t, s1)
	if serial := notified(t, got); serial != 2026120101 {
		t.Fatalf("NOTIFY at start: serial %d", serial)
	}
	// A reload that changes the serial notifies again.
	s2 := compile(t, strings.Replace(yaml, "serial: 2026120101", "serial: 2026120102", 1), gslb.Options{})
	s2.CarryState(s1)
	runHealth(t, s2)
	if serial := notified(t, got); serial != 2026120102 {
		t.Fatalf("NOTIFY after the reload: serial %d", serial)
	}
	// One that keeps it does not.
	s3 := compile(t, strings.Replace(yaml, "serial: 2026120101", "serial: 2026120102", 1), gslb.Options{})
	s3.CarryState(s2)
	runHealth(t, s3)
	select {
	case m := <-got:
		t.Fatalf("NOTIFY although the serial did not change: %v", m)
	case <-time.After(300 * time.Millisecond):
	}
}

// A NOTIFY that is not acknowledged is sent again (after the 2 s
// timeout and a 1 s pause).
func TestNotifyRetries(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	s := compile(t, xfrYAML(`{allow: [127.0.0.0/8], notify: ["`+pc.LocalAddr().String()+`"]}`), gslb.Options{})
	runHealth(t, s)
	buf := make([]byte, 512)
	var ids []uint16
	var times []time.Time
	for len(ids) < 2 {
		_ = pc.SetReadDeadline(time.Now().Add(6 * time.Second))
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("after %d NOTIFY: %v", len(ids), err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:n]); err != nil || m.Opcode != dns.OpcodeNotify {
			t.Fatalf("not a NOTIFY: %v %v", m, err)
		}
		ids, times = append(ids, m.Id), append(times, time.Now())
		if len(ids) == 2 { // acknowledge the second
			m.SetReply(m)
			out, _ := m.Pack()
			_, _ = pc.WriteTo(out, from)
		}
	}
	if gap := times[1].Sub(times[0]); gap < 2*time.Second {
		t.Errorf("retried after %v", gap)
	}
	_ = pc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, _, err := pc.ReadFrom(buf); err == nil {
		t.Error("NOTIFY sent again after the acknowledgement")
	}
}
