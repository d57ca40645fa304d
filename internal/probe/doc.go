// Package probe is Spillway's active health-check shell: it opens real
// sockets to backend endpoints on a schedule and reports one Result per
// probe. It decides nothing about health; the consecutive-success and
// consecutive-failure thresholds (healthyThreshold, unhealthyThreshold) live
// in the pure health state machine, which consumes these results.
//
// The package is self-contained on purpose: it imports no other Spillway
// package. The composition layer translates a healthCheck resource and the
// endpoints that use it into Targets (resolving the port, including
// USE_SERVING_PORT) and calls Update whenever the configuration changes.
//
// # Probe semantics (Google Cloud healthCheck; docs/semantics.md §4.1)
//
//   - HTTP, HTTPS, HTTP2: GET Path with "User-Agent: GoogleHC/1.0" and a Host
//     header of Spec.Host or, when empty, the target's IP. Success needs
//     status 200 exactly (other 2xx and all 3xx fail; redirects are not
//     followed) and, when Spec.Response is set, that string within the first
//     1024 bytes of the body. HTTPS negotiates ALPN "http/1.1"; HTTP2
//     negotiates ALPN "h2" over TLS and fails if the server does not (h2c is
//     not supported). Certificates are not verified by default, like
//     Google's probers.
//   - TCP: the connection must complete; then Spec.Request, if set, is sent
//     and Spec.Response, if set, must be exactly the next bytes received.
//   - GRPC, GRPC_WITH_TLS: one grpc.health.v1.Health/Check call for
//     Spec.GRPCService through grpc-go's generated health client, over
//     cleartext HTTP/2 (GRPC) or TLS with ALPN "h2" (GRPC_WITH_TLS,
//     certificates not verified by default). Only SERVING succeeds;
//     NOT_SERVING, NOT_FOUND (the service is unknown: SERVICE_UNKNOWN),
//     UNIMPLEMENTED (no health service) and every transport error fail.
//   - PROXY_V1 sends "PROXY UNKNOWN\r\n" right after the TCP connect (before
//     TLS).
//   - Spec.Timeout bounds the whole probe: connect, TLS, request and reading
//     the response.
//
// Every probe uses a fresh connection and closes it, so a listener that
// stops accepting fails the very next probe instead of hiding behind a
// pooled keep-alive connection.
//
// # Scheduling
//
// Each unique Target (identical Addr and Spec, compared field by field) gets
// one goroutine that sleeps on a timer and probes start-to-start every
// Spec.Interval; the same endpoint referenced by several backend services
// with the same check is therefore probed once per interval. The first probe
// of a new target is delayed by a random offset in [0, Interval) drawn from
// the Prober's own random source (WithRand), so a large target set does not
// probe in lockstep. Slots missed because a probe or report overran are
// skipped, not bunched.
//
// A goroutine per target was chosen over a central scheduler (a timer heap
// feeding a worker pool) because a probe never outlives its Timeout, which
// is at most its Interval, so each target has at most one probe in flight
// and a goroutine is exactly that concurrency; a slow or black-holed target
// can never delay another target's probe (a shared worker pool would need
// sizing to guarantee that); and stopping one target is a context cancel.
// An idle goroutine is a few KiB parked on a timer, which is cheap at the
// hundreds to low thousands of targets a Spillway instance probes. Revisit
// if that grows by orders of magnitude.
//
// # Reporting contract
//
// The report function passed to New is called from the probe goroutines,
// concurrently for different targets. It must be safe for concurrent use,
// must return quickly (hand the Result to a channel or a locked queue; a
// slow report delays that target's next probe), and must not call Update or
// Run (both wait for probe goroutines, which would deadlock). Results of
// probes interrupted by Update or by Run's context are dropped, not reported
// as failures. After Update returns, no Result for a removed target is
// reported; after Run returns, no Result at all is reported.
package probe
