package gslb_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/spillwaylb/spillway/internal/gslb"
)

// TestBINDSecondary runs BIND's named (skipped when it is not installed)
// as a secondary of a zone Spillway serves: named transfers the zone
// with TSIG, answers the static part itself (a wildcard, a referral), and
// after a reload that changes the serial, Spillway's signed NOTIFY makes
// it transfer again and answer the new record.
func TestBINDSecondary(t *testing.T) {
	named, err := exec.LookPath("named")
	if err != nil {
		if _, err = os.Stat("/usr/sbin/named"); err != nil {
			t.Skip("named not installed")
		}
		named = "/usr/sbin/named"
	}
	// named's port: free now, on UDP and TCP.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secondary := pc.LocalAddr().String()
	_ = pc.Close()
	_, port, _ := net.SplitHostPort(secondary)

	yaml := func(serial int, extra string) string {
		y := xfrYAML(`{tsigKeys: [{name: xfr-key., secret: "` + xfrSecret + `"}], notify: ["` + secondary + `"]}`)
		y = strings.Replace(y, "serial: 2026120101", fmt.Sprintf("serial: %d", serial), 1)
		return strings.Replace(y, "  records:\n", "  records:\n"+extra, 1)
	}
	s1 := compile(t, yaml(2026120101, ""), gslb.Options{})
	f, err := gslb.Listen(s1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	h1ctx, h1cancel := context.WithCancel(ctx)
	go func() { _ = s1.RunHealth(h1ctx) }()
	_, primaryPort, _ := net.SplitHostPort(f.Addr("dns"))

	dir := t.TempDir()
	conf := fmt.Sprintf(`options {
  directory %q;
  pid-file %q;
  listen-on port %s { 127.0.0.1; };
  listen-on-v6 { none; };
  recursion no;
  dnssec-validation no;
  notify no;
};
key "xfr-key." { algorithm hmac-sha256; secret %q; };
server 127.0.0.1 { keys { xfr-key.; }; };
zone "gslb.example" {
  type secondary;
  primaries port %s { 127.0.0.1 key xfr-key.; };
  file "gslb.example.db";
  allow-notify { 127.0.0.1; };
};
`, dir, filepath.Join(dir, "named.pid"), port, xfrSecret, primaryPort)
	if err := os.WriteFile(filepath.Join(dir, "named.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	log := new(lockedBuf)
	cmd := exec.Command(named, "-g", "-c", filepath.Join(dir, "named.conf"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("named: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("named:\n%s", log.String())
		}
	})

	// ask polls named until name has an answer of qtype, or fails.
	ask := func(name string, qtype uint16) *dns.Msg {
		t.Helper()
		c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
		deadline := time.Now().Add(45 * time.Second)
		for {
			r, _, err := c.Exchange(query(name, qtype, 1232, ""), secondary)
			if err == nil && r.Rcode == dns.RcodeSuccess && (len(r.Answer) > 0 || len(r.Ns) > 0 && !r.Authoritative) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("named never answered %s %s: %v %v", name, dns.TypeToString[qtype], r, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if r := ask("a.b.wild.gslb.example.", dns.TypeA); r.Answer[0].String() != "a.b.wild.gslb.example.\t300\tIN\tA\t192.0.2.7" {
		t.Errorf("named's wildcard answer: %v", r)
	}
	if r := ask("www.sub.gslb.example.", dns.TypeA); r.Authoritative || len(r.Ns) != 2 {
		t.Errorf("named's referral: %v", r)
	}

	// A reload with a new serial and a new record: the NOTIFY brings it.
	s2 := compile(t, yaml(2026120102, "  - {name: added, type: TXT, rrdatas: [\"\\\"new\\\"\"]}\n"), gslb.Options{})
	s2.CarryState(s1)
	if !f.Swap(s2) {
		t.Fatal("Swap refused")
	}
	h1cancel()
	go func() { _ = s2.RunHealth(ctx) }()
	if r := ask("added.gslb.example.", dns.TypeTXT); r.Answer[0].String() != "added.gslb.example.\t300\tIN\tTXT\t\"new\"" {
		t.Errorf("named after the NOTIFY: %v", r)
	}
	if !strings.Contains(log.String(), "notify from 127.0.0.1") || !strings.Contains(log.String(), "transferred serial 2026120102: TSIG 'xfr-key'") {
		t.Errorf("named's log has no signed NOTIFY or transfer of serial 2026120102:\n%s", log.String())
	}
}

// lockedBuf is a buffer a process writes while the test reads it.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
