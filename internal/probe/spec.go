package probe

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Probe types, spelled as in the healthCheck resource's type field.
const (
	TypeHTTP  = "HTTP"
	TypeHTTPS = "HTTPS"
	TypeHTTP2 = "HTTP2"
	TypeTCP   = "TCP"
	// TypeGRPC calls grpc.health.v1.Health/Check over cleartext HTTP/2,
	// TypeGRPCTLS over TLS.
	TypeGRPC    = "GRPC"
	TypeGRPCTLS = "GRPC_WITH_TLS"
)

// Proxy header values, spelled as in the healthCheck proxyHeader field.
const (
	ProxyHeaderNone = "NONE"
	ProxyHeaderV1   = "PROXY_V1"
)

const (
	// DefaultInterval is used when Spec.Interval is zero: checkIntervalSec
	// defaults to 5 in Google Cloud.
	DefaultInterval = 5 * time.Second
	// DefaultTimeout is used when Spec.Timeout is zero (capped at the
	// interval): timeoutSec defaults to 5 in Google Cloud.
	DefaultTimeout = 5 * time.Second
	// UserAgent is sent by HTTP-family probes; it is the User-Agent of
	// Google's health-check probers, which backends may match on.
	UserAgent = "GoogleHC/1.0"
	// MaxResponseLen is both the longest allowed Spec.Response and Spec.Request
	// and, for the HTTP family, how many leading body bytes are searched for
	// Spec.Response (Google Cloud: "within the first 1024 bytes").
	MaxResponseLen = 1024
)

// proxyV1Header is what PROXY_V1 sends: the PROXY protocol v1 header for a
// connection whose addresses are not disclosed.
const proxyV1Header = "PROXY UNKNOWN\r\n"

// Spec describes how to probe; there is one per health check definition.
// Spec is comparable: Targets are deduplicated by plain equality, so the
// composition layer should translate one health check into one Spec value
// (defaults applied or not, but consistently).
type Spec struct {
	// Type is TypeHTTP, TypeHTTPS, TypeHTTP2 or TypeTCP.
	Type string
	// Interval is the time from the start of one probe to the start of the
	// next (checkIntervalSec). Zero means DefaultInterval.
	Interval time.Duration
	// Timeout bounds a whole probe (timeoutSec); it must not exceed
	// Interval. Zero means DefaultTimeout, capped at Interval.
	Timeout time.Duration
	// Path is the request path, optionally with a query (requestPath; HTTP
	// family only). Empty means "/".
	Path string
	// Host is the Host header (host; HTTP family only) and, for TLS, the
	// server name sent in SNI. Empty means the target's IP address.
	Host string
	// Response is optional. HTTP family: it must occur within the first
	// MaxResponseLen bytes of the body. TCP: it must be exactly the first
	// bytes received after Request is sent (bytes past len(Response) are
	// not read). At most MaxResponseLen bytes.
	Response string
	// Request is sent right after connecting (TCP only). At most
	// MaxResponseLen bytes.
	Request string
	// ProxyHeader is ProxyHeaderNone or ProxyHeaderV1. Empty means
	// ProxyHeaderNone.
	ProxyHeader string
	// GRPCService is the service a GRPC or GRPC_WITH_TLS probe asks about
	// (grpcServiceName; "" means the server as a whole).
	GRPCService string
}

// Target is one endpoint to probe with one Spec. Addr is "ip:port" (IPv6 in
// brackets); the caller has already resolved the port, including
// USE_SERVING_PORT. Target is comparable and is the deduplication key.
type Target struct {
	Addr string
	Spec Spec
}

// Result is the outcome of one probe.
type Result struct {
	// Target is the probed target, exactly as passed to Update or Check.
	Target Target
	// OK reports whether the probe succeeded.
	OK bool
	// Detail says what happened, for logs and status pages: "HTTP 200",
	// "HTTP 500", "dial tcp 10.0.0.1:80: connect: connection refused",
	// "timeout after 1s (await response)",
	// `response did not contain "ok"`.
	Detail string
	// Latency is how long the probe took (monotonic, real time).
	Latency time.Duration
	// At is when the probe started, according to the Prober's clock.
	At time.Time
}

// withDefaults returns s with its zero fields replaced by the documented
// defaults.
func (s Spec) withDefaults() Spec {
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	if s.Timeout == 0 {
		s.Timeout = min(DefaultTimeout, s.Interval)
	}
	if s.Path == "" {
		s.Path = "/"
	}
	if s.ProxyHeader == "" {
		s.ProxyHeader = ProxyHeaderNone
	}
	return s
}

// isHTTP reports whether s is of the HTTP family.
func (s Spec) isHTTP() bool {
	return s.Type == TypeHTTP || s.Type == TypeHTTPS || s.Type == TypeHTTP2
}

// isGRPC reports whether s is a gRPC health check.
func (s Spec) isGRPC() bool { return s.Type == TypeGRPC || s.Type == TypeGRPCTLS }

// Validate reports every problem with s, after applying defaults, joined
// with errors.Join; it returns nil when s can be probed.
func (s Spec) Validate() error {
	s = s.withDefaults()
	var errs []error
	switch s.Type {
	case TypeHTTP, TypeHTTPS, TypeHTTP2, TypeTCP, TypeGRPC, TypeGRPCTLS:
	default:
		errs = append(errs, fmt.Errorf("type %q: want one of HTTP, HTTPS, HTTP2, TCP, GRPC, GRPC_WITH_TLS", s.Type))
	}
	if s.GRPCService != "" && !s.isGRPC() {
		errs = append(errs, fmt.Errorf("gRPC service %q: only valid for GRPC and GRPC_WITH_TLS, not %s", s.GRPCService, s.Type))
	}
	if s.isGRPC() && (s.Request != "" || s.Response != "" || s.ProxyHeader != ProxyHeaderNone) {
		errs = append(errs, fmt.Errorf("request, response and proxy header: not valid for %s", s.Type))
	}
	if s.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval %s: must be positive", s.Interval))
	}
	switch {
	case s.Timeout < 0:
		errs = append(errs, fmt.Errorf("timeout %s: must be positive", s.Timeout))
	case s.Interval > 0 && s.Timeout > s.Interval:
		errs = append(errs, fmt.Errorf("timeout %s: must not exceed interval %s", s.Timeout, s.Interval))
	}
	if s.ProxyHeader != ProxyHeaderNone && s.ProxyHeader != ProxyHeaderV1 {
		errs = append(errs, fmt.Errorf("proxy header %q: want NONE or PROXY_V1", s.ProxyHeader))
	}
	if len(s.Response) > MaxResponseLen {
		errs = append(errs, fmt.Errorf("response: %d bytes, at most %d allowed", len(s.Response), MaxResponseLen))
	}
	if len(s.Request) > MaxResponseLen {
		errs = append(errs, fmt.Errorf("request: %d bytes, at most %d allowed", len(s.Request), MaxResponseLen))
	}
	if s.isHTTP() {
		errs = append(errs, s.httpProblems()...)
	}
	return errors.Join(errs...)
}

// httpProblems are Validate's checks of an HTTP, HTTPS or HTTP2 check.
func (s Spec) httpProblems() []error {
	var errs []error
	if s.Request != "" {
		errs = append(errs, fmt.Errorf("request: only valid for TCP, not %s", s.Type))
	}
	if !strings.HasPrefix(s.Path, "/") {
		errs = append(errs, fmt.Errorf("path %q: must start with /", s.Path))
	} else if _, err := url.ParseRequestURI(s.Path); err != nil {
		errs = append(errs, fmt.Errorf("path %q: %w", s.Path, err))
	}
	if strings.ContainsAny(s.Host, " \r\n\t/") {
		errs = append(errs, fmt.Errorf("host %q: not a valid Host header", s.Host))
	}
	return errs
}

// Validate reports whether t can be probed: Addr must be a literal
// "ip:port" with a non-zero port, and Spec must be valid.
func (t Target) Validate() error {
	var errs []error
	ap, err := netip.ParseAddrPort(t.Addr)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("addr: %w", err))
	case ap.Port() == 0:
		errs = append(errs, fmt.Errorf("addr %q: port must not be 0", t.Addr))
	}
	if err := t.Spec.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// hostHeader returns the Host header for a probe of addr: host if set,
// otherwise the address's IP (bracketed if IPv6), without the port.
func hostHeader(host, addr string) string {
	if host != "" {
		return host
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr // unreachable for validated targets
	}
	if ap.Addr().Is6() {
		return "[" + ap.Addr().String() + "]"
	}
	return ap.Addr().String()
}

// serverName returns the TLS server name for a probe: the Host header's
// host part if set, otherwise the target's IP (which crypto/tls uses for
// verification but does not send as SNI).
func serverName(host, addr string) string {
	if host == "" {
		if ap, err := netip.ParseAddrPort(addr); err == nil {
			return ap.Addr().String()
		}
		return ""
	}
	if u, err := url.Parse("//" + host); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return host
}
