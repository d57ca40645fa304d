// Package tracing exports a span per proxied request over OTLP/HTTP
// (OpenTelemetry), when spillway.tracing is set: the trace and parent
// span the request carried (or the ones the proxy started), the
// request's times, and its HTTP and Spillway attributes. Off, it costs
// the request path nothing: the proxy's record hook holds a nil *Tracer.
package tracing

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/spillwaylb/spillway/internal/config"
	"github.com/spillwaylb/spillway/internal/proxy"
)

// settings are spillway.tracing's resolved values.
type settings struct {
	endpoint, service string
}

func settingsOf(c *config.Config) (settings, bool) {
	if c.Spillway == nil || c.Spillway.Tracing == nil || c.Spillway.Tracing.OTLPEndpoint == "" {
		return settings{}, false
	}
	t := c.Spillway.Tracing
	s := settings{endpoint: t.OTLPEndpoint, service: t.ServiceName}
	if s.service == "" {
		s.service = "spillway"
	}
	return s, true
}

// Exporter is the tracing component: the Tracer of the config in force
// (nil when off), replaced on reload when its settings change.
type Exporter struct {
	log *slog.Logger
	mu  sync.Mutex
	cur *Tracer
}

// New returns an Exporter with no Tracer; Configure starts one.
func New(log *slog.Logger) *Exporter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Exporter{log: log}
}

// Configure starts, replaces or stops the Tracer for config c; a Tracer
// whose settings are unchanged keeps running. The old one flushes in the
// background.
func (x *Exporter) Configure(c *config.Config) error {
	s, on := settingsOf(c)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cur != nil && on && x.cur.settings == s {
		return nil
	}
	var next *Tracer
	if on {
		var err error
		if next, err = newTracer(s); err != nil {
			return err
		}
	}
	if old := x.cur; old != nil {
		go old.shutdown(context.Background(), x.log)
	}
	x.cur = next
	return nil
}

// Current returns the running Tracer, nil when tracing is off.
func (x *Exporter) Current() *Tracer {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cur
}

// Start implements the server's component interface (nothing to do).
func (x *Exporter) Start(context.Context) error { return nil }

// Stop flushes the spans queued, until ctx ends.
func (x *Exporter) Stop(ctx context.Context) error {
	x.mu.Lock()
	t := x.cur
	x.cur = nil
	x.mu.Unlock()
	if t != nil {
		t.shutdown(ctx, x.log)
	}
	return nil
}

// Tracer exports the spans of one settings generation.
type Tracer struct {
	settings settings
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// newTracer builds the OTLP/HTTP exporter and a batching provider: spans
// queue (2,048 at most; past that they are dropped) and leave in batches.
func newTracer(s settings) (*Tracer, error) {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(s.endpoint), otlptracehttp.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("spillway.tracing.otlpEndpoint: %w (fix: give the collector's OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces)", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", s.service))
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(ids{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	return &Tracer{settings: s, provider: provider, tracer: provider.Tracer("github.com/spillwaylb/spillway")}, nil
}

func (t *Tracer) shutdown(ctx context.Context, log *slog.Logger) {
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("tracing: flushing spans at shutdown", "err", err)
	}
}

// Export records rec's span when its trace is sampled. The span is the
// proxy's handling of the request: a child of the client's span, or, for
// a trace the proxy started, the root span whose id the backend got as
// its parent.
func (t *Tracer) Export(rec *proxy.Record) {
	tc := &rec.Trace
	if t == nil || !tc.Valid() || !tc.Sampled {
		return
	}
	var tid trace.TraceID
	if _, err := hex.Decode(tid[:], tc.ID[:]); err != nil {
		return
	}
	var sid trace.SpanID
	for i := range 8 {
		sid[i] = byte(tc.Span >> (56 - 8*i))
	}
	ctx := context.Background()
	if tc.Generated {
		ctx = context.WithValue(ctx, rootIDs{}, [2]any{tid, sid})
	} else {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
		}))
	}
	r := rec.Request
	name := r.Method
	if rec.Route != "" {
		name += " " + rec.Route
	}
	_, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(rec.Start),
		trace.WithAttributes(attributes(rec)...))
	if rec.Status >= 500 || rec.Status == 0 {
		span.SetStatus(codes.Error, rec.Details)
	}
	span.End(trace.WithTimestamp(rec.Start.Add(rec.Latency)))
}

// attributes are the span's OpenTelemetry HTTP semantic-convention
// attributes plus Spillway's decision.
func attributes(rec *proxy.Record) []attribute.KeyValue {
	r := rec.Request
	a := []attribute.KeyValue{
		attribute.String("http.request.method", r.Method),
		attribute.String("url.path", r.URL.Path),
		attribute.String("server.address", r.Host),
		attribute.String("client.address", proxy.RemoteIP(r)),
		attribute.String("network.protocol.version", strconv.Itoa(r.ProtoMajor)+"."+strconv.Itoa(r.ProtoMinor)),
		attribute.Int("http.response.status_code", rec.Status),
		attribute.String("spillway.status_details", rec.Details),
	}
	if rec.Frontend != nil {
		a = append(a, attribute.String("spillway.frontend", rec.Frontend.Name))
	}
	if rec.Service != nil {
		a = append(a, attribute.String("spillway.backend_service", rec.Service.Name))
	}
	if ep := rec.Endpoint; ep != nil {
		a = append(a, attribute.String("spillway.endpoint", ep.Addr))
	}
	return a
}

// rootIDs is the context key of the ids a root span must take (the trace
// the proxy started and the span id it sent the backend).
type rootIDs struct{}

// ids is the provider's IDGenerator: root spans take the ids the proxy
// already chose; child spans get random span ids.
type ids struct{}

// NewIDs implements sdktrace.IDGenerator.
func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(rootIDs{}).([2]any); ok {
		return v[0].(trace.TraceID), v[1].(trace.SpanID)
	}
	var tid trace.TraceID
	for i := range tid {
		tid[i] = byte(rand.Uint32())
	}
	return tid, ids{}.NewSpanID(ctx, tid)
}

// NewSpanID implements sdktrace.IDGenerator.
func (ids) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	for sid.IsValid() == false {
		v := rand.Uint64()
		for i := range sid {
			sid[i] = byte(v >> (56 - 8*i))
		}
	}
	return sid
}
