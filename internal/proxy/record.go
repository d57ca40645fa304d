package proxy

import (
	"net/http"
	"time"

	"github.com/spillwaylb/spillway/internal/armor"
	"github.com/spillwaylb/spillway/internal/plan"
)

// Record is what the handler learnt about one request, filled as the
// request goes and handed to Config.Record once, when the handler is
// done with it (also when it aborts because the client went away). The
// access log and the request metrics both read it: one observation point
// per request.
//
// Records are pooled: a Record and the *http.Request it points to are
// valid only during the Config.Record call. Strings in it are immutable
// and may be kept; copy the struct to keep the rest.
type Record struct {
	// Start is when the handler started on the request.
	Start time.Time
	// Request is the client's request (valid during the call only).
	Request *http.Request
	// Frontend is the frontend that received the request.
	Frontend *plan.Frontend
	// URLMap is the frontend's URL map; Route names the rule that matched
	// (route.Action.Source), "" when no rule was reached.
	URLMap, Route string
	// Service, Backend and Endpoint are the backend service, the backend
	// (group) and the endpoint of the last attempt; nil when the request
	// got that far.
	Service  *plan.Service
	Backend  *plan.Backend
	Endpoint *plan.Endpoint
	// Attempts is the number of attempts sent to backends (retries are
	// Attempts-1); ConnectErrors and Timeouts count the attempts that
	// failed to connect or timed out.
	Attempts, ConnectErrors, Timeouts int
	// Status is the status sent to the client; 0 when none was (the
	// client left first, or the handler aborted the stream).
	Status int
	// Details is the statusDetails token: Google's vocabulary where it
	// has a word (response_sent_by_backend, failed_to_pick_backend, …),
	// else Spillway's (docs/operations.md lists them).
	Details string
	// Reason is the engine's reason for a decision it could not serve
	// ("no healthy backend in backend service bs"), "" otherwise.
	Reason string
	// RequestSize is the request line and header block (as HTTP/1.1 would
	// send them) plus the body bytes read; ResponseSize is the body bytes
	// written to the client.
	RequestSize, ResponseSize int64
	// Latency is the time from Start to the end of the response;
	// BackendLatency the last attempt's time to response headers.
	Latency, BackendLatency time.Duration
	// Trace is the request's trace context (see trace.go).
	Trace TraceContext
	// Security is what the service's security policies decided: [0] the
	// edge policy, [1] the backend policy (zero when none ran).
	Security [2]armor.Decision
	// ClientIP is the client's address when the request came from a
	// trusted edge (a REGIONAL frontend: the edge's own address is then
	// Request.RemoteAddr), "" otherwise.
	ClientIP string
	// Layer is what the regional layer said, for a request an EDGE
	// frontend forwarded to one (Layer.Address "" when it did not).
	Layer LayerOutcome
	// Bucket is the backend bucket that served the request ("" for
	// none).
	Bucket string
	// CacheLookup, CacheHit, CacheValidated and CacheFillBytes are
	// Google's cacheLookup, cacheHit, cacheValidatedWithOriginServer
	// and cacheFillBytes: whether Cloud CDN's cache was consulted,
	// answered, revalidated with the origin first, and how many body
	// bytes it stored from the origin.
	CacheLookup, CacheHit, CacheValidated bool
	CacheFillBytes                        int64
	// Shard is a small number fixed for this Record's life. Records are
	// pooled per P (sync.Pool), so a P mostly reuses the same few
	// records: sharded counters indexed by Shard stay in that CPU's
	// cache instead of bouncing between CPUs.
	Shard uint32
}

// Retries returns the number of retries (attempts after the first).
func (r *Record) Retries() int {
	if r.Attempts <= 1 {
		return 0
	}
	return r.Attempts - 1
}

// statusDetails tokens that are not load-balancer answers (lbError's are
// in handler.go).
const (
	sdSentByBackend     = "response_sent_by_backend"
	sdRedirect          = "handled_by_url_map_redirect"
	sdClientGone        = "client_disconnected_before_any_response"
	sdClientGoneLater   = "client_disconnected_after_partial_response"
	sdBackendGoneLater  = "backend_connection_closed_after_partial_response_sent"
	sdBackendTimeoutMid = "backend_timeout_after_partial_response_sent" // Spillway's
)

// record starts the request's record, nil when no one wants records.
func (h *handler) record(r *http.Request, start time.Time) *Record {
	if h.cfg.Record == nil {
		return nil
	}
	rec := h.records.Get().(*Record)
	rec.Start = start
	rec.Request = r
	rec.Frontend = h.cfg.Frontend
	rec.URLMap = h.urlMap
	return rec
}

// finish hands the record to Config.Record and returns it to the pool.
// It runs deferred, so it also sees requests whose handler aborts
// (panic(http.ErrAbortHandler)).
func (h *handler) finish(rec *Record) {
	if rec == nil {
		return
	}
	if rec.Details == "" {
		// Nothing was sent: the handler aborted without a word (the
		// client left during a fault delay, say).
		rec.Details = sdClientGone
	}
	rec.Latency = time.Since(rec.Start)
	h.cfg.Record(rec)
	*rec = Record{Shard: rec.Shard}
	h.records.Put(rec)
}

// lbAnswer writes a response generated by the load balancer (lbError)
// and notes it in rec.
func lbAnswer(rec *Record, w http.ResponseWriter, code int, details, message string) {
	n := lbError(w, code, details, message)
	if rec != nil {
		rec.Status, rec.Details, rec.ResponseSize = code, details, int64(n)
	}
}

// noteAttempt adds an attempt's outcome to rec.
func (rec *Record) noteAttempt(o *Outcome) {
	rec.Attempts++
	if !o.Regional {
		// The regional layer names its endpoint (readRegional).
		rec.Endpoint = o.Endpoint
	}
	rec.BackendLatency = o.Latency
	if o.ConnectFailure {
		rec.ConnectErrors++
	} else if o.Timeout {
		rec.Timeouts++
	}
}

// ClientAddr returns the client's IP address: the one a trusted edge
// gave (ClientIP), else the request's source.
func (r *Record) ClientAddr() string {
	if r.ClientIP != "" {
		return r.ClientIP
	}
	return RemoteIP(r.Request)
}

// RemoteIP returns the client's IP address: r.RemoteAddr without the
// port.
func RemoteIP(r *http.Request) string { return hostOnly(r.RemoteAddr) }

// ServerIP returns the IP address the request arrived on ("" when
// unknown).
func ServerIP(r *http.Request) string { return localIP(r) }
