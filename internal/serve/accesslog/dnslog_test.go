package accesslog_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/serve/accesslog"
)

func dnsLogConfig(accessPath, dnsPath string, rate float64) *config.Config {
	c := &config.Config{Spillway: &config.Tuning{DNSQueryLog: &config.DNSQueryLog{Enable: true, SampleRate: &rate, Path: dnsPath}}}
	if accessPath != "" {
		c.Spillway.AccessLog = &config.AccessLog{Enable: true, Path: accessPath}
	}
	return c
}

// readLines waits for n lines in path (the writer flushes every 10 ms).
func readLines(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) > 0 && len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q, want %d lines", path, b, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func entry() *accesslog.DNSEntry {
	e := &accesslog.DNSEntry{
		Time: time.Date(2026, 12, 2, 10, 0, 0, 5000, time.UTC), Latency: 42 * time.Microsecond,
		Client: netip.MustParseAddrPort("[2001:db8::7]:5353"), ECS: netip.MustParsePrefix("198.51.100.0/24"),
		Name: "w.\"gslb\".example.", Type: "A", Rcode: "NOERROR", TCP: true, NAnswers: 2,
		Zone: "gslb.example.", Member: "a",
	}
	e.Answers[0], e.Answers[1] = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	return e
}

// A query log line is JSON carrying the query, the answer and the
// decision.
func TestDNSQueryLogLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dns.log")
	l := accesslog.New(io.Discard, slog.New(slog.DiscardHandler))
	if err := l.Configure(dnsLogConfig("", path, 1)); err != nil {
		t.Fatal(err)
	}
	if !l.DNSSampled() {
		t.Fatal("sample rate 1: not sampled")
	}
	l.RecordDNS(entry())
	line := readLines(t, path, 1)[0]
	var got struct {
		Timestamp string
		DNSQuery  map[string]any
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	want := map[string]any{"clientIp": "2001:db8::7", "clientPort": 5353.0, "ecs": "198.51.100.0/24", "transport": "tcp",
		"qname": `w."gslb".example.`, "qtype": "A", "rcode": "NOERROR", "answers": []any{"192.0.2.1", "192.0.2.2"},
		"latency": "0.000042s", "zone": "gslb.example.", "member": "a"}
	for k, v := range want {
		if b1, _ := json.Marshal(got.DNSQuery[k]); string(b1) != string(must(json.Marshal(v))) {
			t.Errorf("%s: %v, want %v", k, got.DNSQuery[k], v)
		}
	}
	if got.Timestamp != "2026-12-02T10:00:00.000005Z" {
		t.Errorf("timestamp %s", got.Timestamp)
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := l.DNSCounts(); c.Written != 1 || c.Dropped != 0 {
		t.Errorf("counts %+v", c)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// Without a path of its own, the query log writes through the access
// log's writer, into the access log's file; off, it records nothing and
// samples nothing.
func TestDNSQueryLogSharesTheAccessLogWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l := accesslog.New(io.Discard, slog.New(slog.DiscardHandler))
	if err := l.Configure(dnsLogConfig(path, "", 1)); err != nil {
		t.Fatal(err)
	}
	l.RecordDNS(entry())
	if line := readLines(t, path, 1)[0]; !strings.Contains(line, `"dnsQuery":{`) {
		t.Fatalf("access log file holds %s", line)
	}
	if err := l.Configure(&config.Config{}); err != nil {
		t.Fatal(err)
	}
	if l.DNSSampled() {
		t.Error("off: sampled")
	}
	l.RecordDNS(entry())
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
	}
	if n != 1 {
		t.Errorf("%d lines after the log was turned off, want 1", n)
	}
}

// Sampling at 0 logs nothing.
func TestDNSQueryLogSampleZero(t *testing.T) {
	l := accesslog.New(io.Discard, slog.New(slog.DiscardHandler))
	if err := l.Configure(dnsLogConfig("", filepath.Join(t.TempDir(), "d.log"), 0)); err != nil {
		t.Fatal(err)
	}
	defer l.Stop(context.Background())
	for range 1000 {
		if l.DNSSampled() {
			t.Fatal("sampled at rate 0")
		}
	}
}
