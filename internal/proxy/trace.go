package proxy

import (
	"net/http"
	"strconv"

	"github.com/spillwaylb/spillway/internal/h1"
)

// Trace context headers (docs/operations.md, Tracing). A request that
// carries a valid W3C traceparent, or an X-Cloud-Trace-Context, is
// forwarded with it unchanged; the proxy adds the other header with the
// same trace and span, and generates both when the request has neither
// (Google's load balancer adds X-Cloud-Trace-Context when it is absent).
// An invalid traceparent is replaced (W3C: restart the trace).
const (
	traceparentHeader = "Traceparent"
	cloudTraceHeader  = "X-Cloud-Trace-Context"
)

// TraceContext is a request's trace: the trace id as 32 lower-case hex
// digits and the span id, as forwarded to the backend.
type TraceContext struct {
	ID      [32]byte
	Span    uint64
	Sampled bool
	// Generated: the request had no trace context; the proxy made one.
	Generated bool
}

// Valid reports whether the trace has an id.
func (t *TraceContext) Valid() bool { return t.ID[0] != 0 }

// traceHeaders is what the handler adds to the outbound request.
type traceHeaders struct {
	add [2]h1.Field
	// replace: the client's traceparent is invalid and must not be
	// forwarded (the fast header writer cannot drop it).
	replace bool
}

const hexDigits = "0123456789abcdef"

// isLowerHex reports whether s is lower-case hex digits only and not all
// zeros (W3C forbids the all-zero ids).
func isLowerHex(s string) bool {
	nonzero := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			nonzero = nonzero || c != '0'
		default:
			return false
		}
	}
	return nonzero
}

// parseTraceparent parses a W3C traceparent ("00-<32 hex trace>-<16 hex
// span>-<2 hex flags>"; later versions may append fields).
func parseTraceparent(v string, t *TraceContext) bool {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	ver := v[:2]
	if !isHex(ver) || ver == "ff" || ver == "00" && len(v) != 55 || len(v) > 55 && v[55] != '-' {
		return false
	}
	if !isLowerHex(v[3:35]) || !isLowerHex(v[36:52]) || !isHex(v[53:55]) {
		return false
	}
	span, err := strconv.ParseUint(v[36:52], 16, 64)
	if err != nil {
		return false
	}
	copy(t.ID[:], v[3:35])
	t.Span = span
	flags, _ := strconv.ParseUint(v[53:55], 16, 8)
	t.Sampled = flags&1 == 1
	return true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// parseCloudTrace parses X-Cloud-Trace-Context "TRACE_ID/SPAN_ID;o=1"
// (the span and options are optional). Upper-case hex is accepted.
func parseCloudTrace(v string, t *TraceContext) bool {
	if len(v) < 32 {
		return false
	}
	var id [32]byte
	nonzero := false
	for i := 0; i < 32; i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			c += 'a' - 'A'
		default:
			return false
		}
		nonzero = nonzero || c != '0'
		id[i] = c
	}
	if !nonzero {
		return false
	}
	rest := v[32:]
	var span uint64
	if len(rest) > 0 && rest[0] == '/' {
		rest = rest[1:]
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		var err error
		if span, err = strconv.ParseUint(rest[:i], 10, 64); err != nil {
			return false
		}
		rest = rest[i:]
	}
	t.ID, t.Span = id, span
	t.Sampled = len(rest) >= 4 && rest[:3] == ";o=" && rest[3]&1 == 1
	return true
}

// trace reads or makes the request's trace context and works out the
// headers to add.
func (h *handler) trace(r *http.Request, t *TraceContext) traceHeaders {
	var th traceHeaders
	tp, hasTP := r.Header[traceparentHeader]
	ct, hasCT := r.Header[cloudTraceHeader]
	switch {
	case hasTP && len(tp) == 1 && parseTraceparent(tp[0], t):
		if !hasCT {
			th.add[0] = h1.Field{Name: cloudTraceHeader, Value: formatCloudTrace(t)}
		}
		return th
	case hasCT && len(ct) > 0 && parseCloudTrace(ct[0], t):
		if t.Span == 0 {
			t.Span = h.traceRand() | 1
		}
	default:
		t.Generated = true
		t.Sampled = true
		hi, lo := h.traceRand(), h.traceRand()
		for i := 0; i < 16; i++ {
			t.ID[i] = hexDigits[hi>>(60-4*i)&0xf]
			t.ID[16+i] = hexDigits[lo>>(60-4*i)&0xf]
		}
		if hi == 0 && lo == 0 {
			t.ID[31] = '1'
		}
		t.Span = h.traceRand() | 1
	}
	th.replace = hasTP
	// One allocation for both values: "00-trace-span-01" and
	// "trace/span;o=1".
	var buf [55 + 1 + 32 + 1 + 20 + 4]byte
	b := appendTraceparent(buf[:0], t)
	n := len(b)
	if !hasCT {
		b = appendCloudTrace(b, t)
	}
	s := string(b)
	th.add[0] = h1.Field{Name: traceparentHeader, Value: s[:n]}
	if !hasCT {
		th.add[1] = h1.Field{Name: cloudTraceHeader, Value: s[n:]}
	}
	return th
}

// traceRand draws from Config.TraceRand.
func (h *handler) traceRand() uint64 { return h.traceRnd() }

func appendTraceparent(b []byte, t *TraceContext) []byte {
	b = append(b, "00-"...)
	b = append(b, t.ID[:]...)
	b = append(b, '-')
	for i := 0; i < 16; i++ {
		b = append(b, hexDigits[t.Span>>(60-4*i)&0xf])
	}
	if t.Sampled {
		return append(b, "-01"...)
	}
	return append(b, "-00"...)
}

func appendCloudTrace(b []byte, t *TraceContext) []byte {
	b = append(b, t.ID[:]...)
	b = append(b, '/')
	b = strconv.AppendUint(b, t.Span, 10)
	if t.Sampled {
		return append(b, ";o=1"...)
	}
	return append(b, ";o=0"...)
}

func formatCloudTrace(t *TraceContext) string {
	var buf [32 + 1 + 20 + 4]byte
	return string(appendCloudTrace(buf[:0], t))
}

// apply puts the trace headers into an outbound header map.
func (th *traceHeaders) apply(hdr http.Header) {
	if th.replace {
		delete(hdr, traceparentHeader)
	}
	for _, f := range th.add {
		if f.Name != "" {
			hdr[f.Name] = []string{f.Value}
		}
	}
}
