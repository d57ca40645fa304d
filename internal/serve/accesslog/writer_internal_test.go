package accesslog

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spillwaylb/spillway/internal/proxy"
)

// A writer that cannot keep up never blocks the request path: past the
// queue, lines are dropped and counted.
func TestAccessLogDropsWhenFull(t *testing.T) {
	pr, pw := io.Pipe() // nobody reads: the writer blocks on its first flush
	var counts accessLogCounts
	a, err := openAccessLog(accessLogSettings{path: "stdout", buffer: 4}, pw, &counts, new(accessLogCounts))
	if err != nil {
		t.Fatal(err)
	}
	e := logEntry{method: "GET", uri: "/", status: 200, details: "response_sent_by_backend"}
	start := time.Now()
	for range 1000 {
		a.send(&e)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("1000 sends took %v", d)
	}
	// At most the queue (4) and the line being written (1) got through.
	if got := counts.dropped.Load(); got < 995 {
		t.Errorf("dropped %d of 1000 with a queue of 4", got)
	}
	pr.Close() // the blocked write fails; close can finish
	a.close()
}

// Log lines are valid JSON whatever the request carried.
func TestAccessLogLineIsJSON(t *testing.T) {
	e := logEntry{
		start: time.Unix(1700000000, 5).UTC(), method: "GET", scheme: "http", host: "h\"x", uri: "/p?q=\x01\xff\"\\",
		proto: "HTTP/1.1", userAgent: "ua\n\t\u2603", referer: "r", status: 503, details: "failed_to_pick_backend",
		reason: "no healthy backend in backend service bs", latency: 1500 * time.Microsecond,
		trace: proxy.TraceContext{ID: [32]byte([]byte("4bf92f3577b34da6a3ce929d0e0e4736")), Span: 0xf067aa0ba902b7},
	}
	b := appendJSONLine(nil, &e, new(timeCache))
	var v struct {
		HTTPRequest struct {
			RequestURL string `json:"requestUrl"`
			UserAgent  string `json:"userAgent"`
			Latency    string `json:"latency"`
			Status     int    `json:"status"`
		} `json:"httpRequest"`
		Trace   string `json:"trace"`
		SpanID  string `json:"spanId"`
		Payload struct {
			Reason string `json:"reason"`
		} `json:"jsonPayload"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	var ts struct {
		Timestamp string `json:"timestamp"`
	}
	json.Unmarshal(b, &ts)
	if ts.Timestamp != "2023-11-14T22:13:20.000000005Z" {
		t.Errorf("timestamp %q", ts.Timestamp)
	}
	for d, want := range map[time.Duration]string{0: "0", time.Second: "1", 1500 * time.Millisecond: "1.5", 1: "0.000000001", 1234567: "0.001234567"} {
		if got := string(appendSeconds(nil, d)); got != want {
			t.Errorf("appendSeconds(%v) = %q, want %q", d, got, want)
		}
	}
	e.project, e.requestID, e.remotePort, e.tlsVersion, e.sni = "my-project", "req-7", "51234", "TLSv1.2", "h.example"
	var w struct {
		Trace   string         `json:"trace"`
		Payload map[string]any `json:"jsonPayload"`
	}
	if err := json.Unmarshal(appendJSONLine(nil, &e, new(timeCache)), &w); err != nil {
		t.Fatal(err)
	}
	if w.Trace != "projects/my-project/traces/4bf92f3577b34da6a3ce929d0e0e4736" || w.Payload["requestId"] != "req-7" ||
		w.Payload["remotePort"] != "51234" || w.Payload["tlsVersion"] != "TLSv1.2" || w.Payload["requestedServerName"] != "h.example" {
		t.Errorf("with a project and the Envoy fields: %+v", w)
	}
	if v.HTTPRequest.RequestURL != "http://h\"x/p?q=\x01\ufffd\"\\" || v.HTTPRequest.UserAgent != "ua\n\t\u2603" ||
		v.HTTPRequest.Latency != "0.0015s" || v.HTTPRequest.Status != 503 || v.Trace != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		v.SpanID != "00f067aa0ba902b7" || v.Payload.Reason != e.reason {
		t.Errorf("decoded %+v from\n%s", v, b)
	}
}

// BenchmarkAccessLogLine is the writer's cost per line.
func BenchmarkAccessLogLine(b *testing.B) {
	e := logEntry{
		start: time.Now(), method: "GET", scheme: "http", host: "127.0.0.1:18480", uri: "/", proto: "HTTP/1.1",
		userAgent: "wrk", remoteIP: "127.0.0.1", serverIP: "127.0.0.1", frontend: "fe-bench", urlMap: "um-bench",
		service: "bs-bench", group: "neg-bench", zone: "us-east1-b", endpoint: "127.0.0.1:18081",
		details: "response_sent_by_backend", status: 200, reqSize: 40, respSize: 35,
		latency: 1234567, backendLatency: 1000000, hasBackendLatency: true,
		trace: proxy.TraceContext{ID: [32]byte([]byte("4bf92f3577b34da6a3ce929d0e0e4736")), Span: 0xf067aa0ba902b7},
	}
	buf := make([]byte, 0, 2048)
	var tc timeCache
	b.ReportAllocs()
	for b.Loop() {
		buf = appendJSONLine(buf[:0], &e, &tc)
	}
}

// format: TEXT writes the same fields as key=value pairs on one line.
func TestAccessLogTextLine(t *testing.T) {
	e := logEntry{
		start: time.Unix(1700000000, 0).UTC(), method: "GET", scheme: "https", host: "shop.example", uri: "/cart?id=7",
		proto: "HTTP/2.0", status: 503, details: "failed_to_pick_backend", reason: "no healthy backend in backend service bs",
		frontend: "fe", urlMap: "um", service: "bs", latency: 2 * time.Millisecond,
		trace: proxy.TraceContext{ID: [32]byte([]byte("4bf92f3577b34da6a3ce929d0e0e4736"))},
	}
	e.requestID, e.remotePort, e.tlsVersion, e.sni = "req-7", "51234", "TLSv1.3", "shop.example"
	got := string(appendTextLine(nil, &e, new(timeCache)))
	for _, want := range []string{
		` requestId="req-7"`, ` remotePort="51234"`, ` tlsVersion="TLSv1.3"`, ` requestedServerName="shop.example"`,
		"2023-11-14T22:13:20Z ", ` url="https://shop.example/cart?id=7"`, " status=503", ` statusDetails="failed_to_pick_backend"`,
		" latency=0.002s", ` protocol="HTTP/2.0"`, ` backendService="bs"`, ` reason="no healthy backend in backend service bs"`,
		" trace=4bf92f3577b34da6a3ce929d0e0e4736\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("text line lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "\n") != 1 {
		t.Errorf("text line is not one line: %q", got)
	}
}

// BenchmarkAccessLogRecord is the request side of the access log:
// taking a slot under the queue's lock and filling the entry from a
// Record (the queue is emptied in place every 4096 entries, as the
// writer's swap would).
func BenchmarkAccessLogRecord(b *testing.B) {
	var counts accessLogCounts
	a := &accessLog{pending: make([]logEntry, 0, 4096), counts: &counts}
	r := httptest.NewRequest("GET", "http://shop.example/cart?id=7", nil)
	r.Header.Set("User-Agent", "wrk")
	rec := &proxy.Record{Request: r, Start: time.Now(), Status: 200, Details: "response_sent_by_backend", Attempts: 1}
	b.ReportAllocs()
	for b.Loop() {
		a.record(rec)
		if len(a.pending) == cap(a.pending) {
			a.pending = a.pending[:0]
		}
	}
	if n := counts.dropped.Load(); n != 0 {
		b.Fatalf("%d dropped", n)
	}
}
