package gslb_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// xfrSecret is a test TSIG key (base64).
const xfrSecret = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="

// xfrYAML is recordsYAML with transfers allowed to holders of xfr-key.
func xfrYAML(transfer string) string {
	return strings.Replace(recordsYAML, "  gslbNames:\n", "  soa: {serial: 2026120101}\n  transfer: "+transfer+"\n  gslbNames:\n", 1)
}

const xfrKeyOnly = `{tsigKeys: [{name: xfr-key., secret: "` + xfrSecret + `"}]}`

// wantZone is what a transfer of recordsYAML's gslb.example. holds: the
// static part, without the GSLB name *.svc.
var wantZone = []string{
	"gslb.example.\t300\tIN\tSOA\tns1.gslb.example. hostmaster.gslb.example. 2026120101 3600 600 604800 30",
	"gslb.example.\t300\tIN\tCAA\t0 iodef \"mailto:sec@gslb.example\"",
	"gslb.example.\t300\tIN\tCAA\t0 issue \"letsencrypt.org\"",
	"gslb.example.\t300\tIN\tNS\tns1.gslb.example.",
	"*.cn.gslb.example.\t300\tIN\tCNAME\twww.gslb.example.",
	"ns1.gslb.example.\t300\tIN\tA\t127.0.0.1",
	"sub.gslb.example.\t300\tIN\tDS\t12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF",
	"sub.gslb.example.\t3600\tIN\tNS\tns.other.example.",
	"sub.gslb.example.\t3600\tIN\tNS\tns1.sub.gslb.example.",
	"ns1.sub.gslb.example.\t300\tIN\tA\t192.0.2.53",
	"ns1.sub.gslb.example.\t300\tIN\tAAAA\t2001:db8::53",
	"*.wild.gslb.example.\t300\tIN\tA\t192.0.2.7",
	"*.wild.gslb.example.\t300\tIN\tMX\t10 mail.gslb.example.",
	"real.wild.gslb.example.\t300\tIN\tTXT\t\"real\"",
	"x.y.wild.gslb.example.\t300\tIN\tTXT\t\"deep\"",
	"www.gslb.example.\t300\tIN\tA\t192.0.2.80",
}

// transfer runs a zone transfer with miekg's client; key "" sends it
// unsigned. It returns the records and how many messages carried them.
func transfer(t *testing.T, addr, zone string, qtype uint16, serial uint32, key, secret string) ([]string, int, error) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(zone, qtype)
	if qtype == dns.TypeIXFR {
		m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET}, Serial: serial,
			Ns: "ns1." + zone, Mbox: "hostmaster." + zone}}
	}
	tr := &dns.Transfer{ReadTimeout: 5 * time.Second}
	if key != "" {
		m.SetTsig(key, dns.HmacSHA256, 300, time.Now().Unix())
		tr.TsigSecret = map[string]string{key: secret}
	}
	ch, err := tr.In(m, addr)
	if err != nil {
		return nil, 0, err
	}
	var out []string
	msgs := 0
	for env := range ch {
		if env.Error != nil {
			return out, msgs, env.Error
		}
		msgs++
		for _, rr := range env.RR {
			out = append(out, rr.String())
		}
	}
	return out, msgs, nil
}

// sameZone compares a transfer with want: SOA first and last, the rest
// in any order.
func sameZone(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) < 2 || got[0] != want[0] || got[len(got)-1] != want[0] {
		t.Fatalf("transfer does not start and end with the SOA:\n%s", strings.Join(got, "\n"))
	}
	g, w := slices.Sorted(slices.Values(got[1:len(got)-1])), slices.Sorted(slices.Values(want[1:]))
	if !slices.Equal(g, w) {
		t.Fatalf("transfer:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
}

func TestAXFRWithTSIG(t *testing.T) {
	_, addr := start(t, xfrYAML(xfrKeyOnly), gslb.Options{})
	got, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "xfr-key.", xfrSecret)
	if err != nil {
		t.Fatalf("AXFR with the key: %v", err)
	}
	sameZone(t, got, wantZone)
	// Unsigned, with an unknown key or a wrong secret: refused.
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "", ""); err == nil || !strings.Contains(err.Error(), "5") {
		t.Errorf("unsigned AXFR: %v, want REFUSED (rcode 5)", err)
	}
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "other-key.", xfrSecret); err == nil {
		t.Errorf("AXFR with an unknown key succeeded")
	}
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "xfr-key.", "d3Jvbmd3cm9uZ3dyb25nd3Jvbmc="); err == nil {
		t.Errorf("AXFR with a wrong secret succeeded")
	}
	// A zone without transfer, and a name that is not a zone.
	if _, _, err := transfer(t, addr, "2.0.192.in-addr.arpa.", dns.TypeAXFR, 0, "xfr-key.", xfrSecret); err == nil {
		t.Errorf("AXFR of a zone without transfer succeeded")
	}
	if _, _, err := transfer(t, addr, "www.gslb.example.", dns.TypeAXFR, 0, "xfr-key.", xfrSecret); err == nil {
		t.Errorf("AXFR of a name that is not a zone succeeded")
	}
	// AXFR over UDP is refused (RFC 5936 §4.2: TCP only).
	if r := exchange(t, "udp", addr, query("gslb.example.", dns.TypeAXFR, 0, "")); r.Rcode != dns.RcodeRefused {
		t.Errorf("AXFR over UDP: %v", r)
	}
}

func TestAXFRBySource(t *testing.T) {
	_, addr := start(t, xfrYAML(`{allow: [127.0.0.0/8]}`), gslb.Options{})
	got, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "", "")
	if err != nil {
		t.Fatalf("AXFR from an allowed source: %v", err)
	}
	sameZone(t, got, wantZone)

	_, addr = start(t, xfrYAML(`{allow: [10.0.0.0/8]}`), gslb.Options{})
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "", ""); err == nil {
		t.Errorf("AXFR from a source outside allow succeeded")
	}
	// Both: the key and the source are needed.
	_, addr = start(t, xfrYAML(`{allow: [127.0.0.0/8], tsigKeys: [{name: xfr-key., secret: "`+xfrSecret+`"}]}`), gslb.Options{})
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "", ""); err == nil {
		t.Errorf("unsigned AXFR succeeded although tsigKeys are set")
	}
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "xfr-key.", xfrSecret); err != nil {
		t.Errorf("signed AXFR from an allowed source: %v", err)
	}
}

func TestIXFR(t *testing.T) {
	_, addr := start(t, xfrYAML(xfrKeyOnly), gslb.Options{})
	// Up to date (or newer, RFC 1982): the current SOA alone.
	for _, serial := range []uint32{2026120101, 2026120102} {
		got, _, err := transfer(t, addr, "gslb.example.", dns.TypeIXFR, serial, "xfr-key.", xfrSecret)
		if err != nil || len(got) != 1 || got[0] != wantZone[0] {
			t.Errorf("IXFR from serial %d: %v\n%s", serial, err, strings.Join(got, "\n"))
		}
	}
	// Older: the whole zone, AXFR-style (RFC 1995 §4).
	got, _, err := transfer(t, addr, "gslb.example.", dns.TypeIXFR, 2026010101, "xfr-key.", xfrSecret)
	if err != nil {
		t.Fatalf("IXFR from an old serial: %v", err)
	}
	sameZone(t, got, wantZone)
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeIXFR, 2026010101, "", ""); err == nil {
		t.Errorf("unsigned IXFR succeeded")
	}
}

func TestAXFRLargeZoneSpansMessages(t *testing.T) {
	var b strings.Builder
	want := slices.Clone(wantZone)
	for i := range 3000 {
		fmt.Fprintf(&b, "  - {name: t%d, type: TXT, rrdatas: [\"\\\"%s\\\"\"]}\n", i, strings.Repeat("x", 40))
		want = append(want, fmt.Sprintf("t%d.gslb.example.\t300\tIN\tTXT\t\"%s\"", i, strings.Repeat("x", 40)))
	}
	yaml := strings.Replace(xfrYAML(xfrKeyOnly), "  records:\n", "  records:\n"+b.String(), 1)
	_, addr := start(t, yaml, gslb.Options{})
	got, msgs, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "xfr-key.", xfrSecret)
	if err != nil {
		t.Fatalf("AXFR: %v", err)
	}
	sameZone(t, got, want)
	if msgs < 2 {
		t.Errorf("3000 records came in %d message(s)", msgs)
	}
	// dig checks the TSIG of every message, the later ones signed with
	// the previous MAC and the timers only (RFC 8945 §5.3.1).
	if dig, err := exec.LookPath("dig"); err == nil {
		host, port, _ := strings.Cut(addr, ":")
		out, err := exec.Command(dig, "@"+host, "-p", port, "gslb.example.", "AXFR", "-y", "hmac-sha256:xfr-key.:"+xfrSecret).CombinedOutput()
		summary := fmt.Sprintf(";; XFR size: %d records (messages %d,", len(want)+1, msgs)
		if err != nil || !strings.Contains(string(out), summary) || strings.Contains(string(out), "failure") {
			t.Errorf("dig: %v, want %q:\n%s", err, summary, out[max(0, len(out)-600):])
		}
	}
}

// TestDigAXFR transfers the zone with the installed dig (skipped without
// it), signed with the key.
func TestDigAXFR(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("dig not installed")
	}
	_, addr := start(t, xfrYAML(xfrKeyOnly), gslb.Options{})
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command(dig, "@"+host, "-p", port, "gslb.example.", "AXFR", "-y", "hmac-sha256:xfr-key.:"+xfrSecret).CombinedOutput()
	if err != nil {
		t.Fatalf("dig: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, ";") || strings.Contains(line, "\tTSIG\t") {
			continue
		}
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatalf("dig printed %q: %v", line, err)
		}
		got = append(got, rr.String())
	}
	sameZone(t, got, wantZone)
	// dig checks the signature of every message; it prints the last
	// message's TSIG record (error NOERROR) and no "tsig verify failure".
	if !strings.Contains(string(out), "ANY\tTSIG\thmac-sha256.") || strings.Contains(string(out), "failure") {
		t.Errorf("dig shows no TSIG record:\n%s", out)
	}
	t.Logf("dig AXFR:\n%s", out)
	// Unsigned: dig reports the refusal.
	out, _ = exec.Command(dig, "@"+host, "-p", port, "gslb.example.", "AXFR").CombinedOutput()
	if !strings.Contains(string(out), "Transfer failed") {
		t.Errorf("unsigned dig AXFR:\n%s", out)
	}
}

// TestTransferKeysFollowReload: the TCP listeners outlive a reload (the
// Front swaps the Server), and verify TSIG with the keys of the Server
// answering now.
func TestTransferKeysFollowReload(t *testing.T) {
	const newSecret = "bmV3c2VjcmV0bmV3c2VjcmV0bmV3c2VjcmV0MTIzNDU="
	s1 := compile(t, xfrYAML(xfrKeyOnly), gslb.Options{})
	f, err := gslb.Listen(s1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := f.Addr("dns")
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "xfr-key.", xfrSecret); err != nil {
		t.Fatalf("AXFR before the reload: %v", err)
	}
	s2 := compile(t, xfrYAML(`{tsigKeys: [{name: xfr-key., secret: "`+newSecret+`"}]}`), gslb.Options{})
	if !f.Swap(s2) {
		t.Fatal("Swap refused the same frontends")
	}
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "xfr-key.", xfrSecret); err == nil {
		t.Error("AXFR with the replaced secret succeeded")
	}
	if _, _, err := transfer(t, addr, "gslb.example.", dns.TypeAXFR, 0, "xfr-key.", newSecret); err != nil {
		t.Errorf("AXFR with the reloaded secret: %v", err)
	}
}
