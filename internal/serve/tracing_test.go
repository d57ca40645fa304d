package serve_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/spillwaylb/spillway/internal/serve"
	"github.com/spillwaylb/spillway/internal/serve/servetest"
)

// otlpReceiver is an OTLP/HTTP traces endpoint on loopback: it decodes
// each export request's protobuf and keeps the spans.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	service string
}

func startOTLPReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	rc := &otlpReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					rc.service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Write(b)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return rc, "http://" + ln.Addr().String() + "/v1/traces"
}

func (rc *otlpReceiver) snapshot() ([]*tracepb.Span, string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*tracepb.Span(nil), rc.spans...), rc.service
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return fmt.Sprint(v.IntValue)
			}
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// spillway.tracing exports a span per request over OTLP/HTTP: a child of
// the client's traceparent span, with the request's attributes; and for a
// request without trace context, the root span whose id the backend got
// in its traceparent.
func TestTracingExportsSpansOverOTLP(t *testing.T) {
	rc, endpoint := startOTLPReceiver(t)
	var backendTP sync.Map
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		backendTP.Store(r.URL.Path, r.Header.Get("Traceparent"))
		io.WriteString(w, "ok")
	})
	fe := `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`
	y := oneServiceYAML(be, fe, fmt.Sprintf("spillway:\n  tracing: {otlpEndpoint: %q, serviceName: edge}\n", endpoint))
	s := servetest.Run(t, servetest.Parse(t, y), serve.Options{WatchInterval: -1})
	url := "http://" + s.FrontendAddr("fe")
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest("GET", url+"/child", nil)
	req.Header.Set("Traceparent", "00-"+traceID+"-"+parent+"-01")
	for _, r := range []*http.Request{req, mustRequest(t, url+"/root")} {
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var spans []*tracepb.Span
	var service string
	deadline := time.Now().Add(30 * time.Second)
	for len(spans) < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		spans, service = rc.snapshot()
	}
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	if service != "edge" {
		t.Errorf("service.name %q, want edge", service)
	}
	for _, sp := range spans {
		path := spanAttr(sp, "url.path")
		if sp.Kind != tracepb.Span_SPAN_KIND_SERVER || spanAttr(sp, "http.request.method") != "GET" ||
			spanAttr(sp, "http.response.status_code") != "200" || spanAttr(sp, "spillway.backend_service") != "bs" ||
			sp.EndTimeUnixNano <= sp.StartTimeUnixNano {
			t.Errorf("span %s: %v", path, sp)
		}
		tp, _ := backendTP.Load(path)
		switch path {
		case "/child":
			if hex.EncodeToString(sp.TraceId) != traceID || hex.EncodeToString(sp.ParentSpanId) != parent {
				t.Errorf("child span trace %x parent %x, want %s %s", sp.TraceId, sp.ParentSpanId, traceID, parent)
			}
		case "/root":
			want := fmt.Sprintf("00-%x-%x-01", sp.TraceId, sp.SpanId)
			if len(sp.ParentSpanId) != 0 || tp != want {
				t.Errorf("root span: parent %x; backend's traceparent %q, want %q", sp.ParentSpanId, tp, want)
			}
		default:
			t.Errorf("span of unexpected path %q", path)
		}
	}
}

// /metrics parses as the Prometheus text format and has the build, the
// connections and the requests in flight.
func TestMetricsParseWithExpfmt(t *testing.T) {
	be := startBackend(t, "A")
	fe := `{name: fe, address: "127.0.0.1:0", protocol: HTTP, urlMap: um}`
	s := servetest.Run(t, servetest.Parse(t, oneServiceYAML(be.addr, fe, "")), serve.Options{Admin: "127.0.0.1:0", WatchInterval: -1})
	for range 3 {
		resp, err := http.Get("http://" + s.FrontendAddr("fe") + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	if f := families["spillway_build_info"]; f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("spillway_build_info = %v", f)
	} else if labels := fmt.Sprint(f.Metric[0].Label); !strings.Contains(labels, "goversion") || !strings.Contains(labels, "go1.") {
		t.Errorf("spillway_build_info labels %s", labels)
	}
	// http.Get's connections may be kept alive: at least one accepted.
	if f := families["spillway_connections_accepted_total"]; f == nil || f.Metric[0].GetCounter().GetValue() < 1 {
		t.Errorf("spillway_connections_accepted_total = %v", f)
	}
	if f := families["spillway_connections_active"]; f == nil {
		t.Error("no spillway_connections_active")
	}
	if f := families["spillway_requests_in_flight"]; f == nil || f.Metric[0].GetGauge().GetValue() != 0 {
		t.Errorf("spillway_requests_in_flight = %v, want 0 between requests", f)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startBackendFunc serves h on loopback and returns its address.
func startBackendFunc(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
