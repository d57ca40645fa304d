// Package proxy is Spillway's HTTP data plane: the handler a frontend
// serves, the server and backend transports, retries, timeouts, header
// rewriting, redirects, fault injection, mirroring and protocol upgrades.
// It is a shell: it does I/O and asks the pure packages what to do (route
// for the URL map, engine for the backend and endpoint).
//
// # Hot path
//
// Frontends run on h1.Server (NewH1Server; cleartext and TLS, HTTP/2
// handed to NewServer's http.Server, which serves it with
// golang.org/x/net/http2 on a connection wrapped by h1.WatchH2: a frame
// follower that applies the header timeout, a few atomic stores and a
// clock read per header block), and HTTP backends are
// reached through h1.Transport; internal/h1 documents that wire code and
// how it differs from net/http. A request loads the current Snapshot once
// (an atomic pointer load in serve), matches the URL map through a pooled
// route.Request adapter, picks a backend service and endpoint with the
// splits' Weyl draws (lock-free, allocation-free in engine), and goes to
// an HTTP backend with h1.Transport.Do: an h1.Request whose Forward
// fields let the outbound header be written without building it as a
// map. Body copies use pooled 32 KiB buffers. There are no per-request
// locks on shared state beyond the idle pool's, and no fmt on the
// success path. The pools live in the handler and transport, not at
// package level. The per-connection information the handler reads (the
// local IP) comes from connContext, which both server loops call once
// per connection.
//
// # Behaviour (docs/security.md; retries and paths: docs/semantics.md §5, §6)
//
//   - '#' in the request path → 400; request line + headers over 60 KiB → 431.
//   - HTTP/2 requests whose :method is not a token, whose :path is not
//     origin-form (or "*" for OPTIONS) or has whitespace or control
//     bytes, or whose :authority is missing, not a valid Host or
//     contradicted by a Host field → 400 invalid_request before routing
//     (badH2Request): the rules the HTTP/1.1 parsers apply. A request
//     the backend transport refuses for what it holds (h1.CheckRequest,
//     h1.ErrInvalidRequest) → 400 invalid_request, a ClientFault.
//   - Ambiguous framing (Content-Length together with Transfer-Encoding,
//     or Transfer-Encoding in HTTP/1.0) and header names that are not
//     tokens → 400 and the connection closed. net/http's server (NewServer)
//     checks framing only on h1.GuardListener's (cleartext) connections.
//   - The path is normalised before matching and forwarding
//     (route.NormalizePath, route.MatchPath: dot segments removed,
//     escaped unreserved characters decoded, slashes merged, %2F/%5C per
//     spillway.pathWithEscapedSlashesAction); a malformed one → 400.
//   - No healthy backend → the engine's status (503).
//   - Responses the load balancer makes itself have a short neutral
//     text/plain body and a statusDetails token (Google's vocabulary,
//     e.g. failed_to_pick_backend, failed_to_connect_to_backend,
//     backend_timeout) in the body and in X-Spillway-Status-Details.
//     Endpoint addresses, config names and error text go to the log only.
//   - Timeout: the route's timeout, else the backend service's timeoutSec
//     (default 30 s), over the whole exchange including retries and the
//     response body, both reading it from the backend and writing it to
//     the client (a client that stops reading is cut off at the deadline,
//     releasing the backend connection). No response headers yet → 504;
//     otherwise the stream is aborted (the client sees a truncated
//     response).
//   - Connect failures and resets after the last try → 503.
//   - A request body the client fails to deliver (malformed chunking, an
//     upload cut short by a half-close or reset) → 400 with "Connection:
//     close", also when the request context has already ended (a client
//     that half-closed can still read it): nothing after a broken body
//     is read as a request, on either server loop (net/http's, with
//     EnableFullDuplex, would read on otherwise). The attempt's
//     Outcome has ClientFault set; it is not retried, and outlier
//     detection and passive health ignore it (Outcome.BackendSignal).
//   - Cloud CDN (cdn.go; docs/cdn.md): for a CDN-enabled service or
//     backend bucket, after the security policies and before the
//     endpoint pick, a signed URL or cookie that does not verify → 403
//     signed_request_invalid; a hit is answered by internal/cdn (no
//     endpoint, no demand counted); a miss goes on as below, through
//     the cache's capturing writer. A backend bucket is served from its
//     directory (cdn.Bucket).
//   - Security policies (enforce) run after the backend service is chosen
//     and before a backend is picked. A policy whose rules call the
//     preconfigured WAF (armor.Policy.NeedsBody) has the start of the
//     body read first (inspectBody, at most its BodyInspectionSize,
//     within the exchange timeout, which starts there), then forwarded
//     with the rest, framing unchanged; a body that does not arrive →
//     408 (stalled) or 400 (broken) malformed_request_body with
//     "Connection: close", and no attempt. Other policies read nothing.
//   - A client that is gone for any other reason before the handler has
//     answered (its context ended during the exchange or a fault delay)
//     gets no answer: the handler panics with http.ErrAbortHandler, and
//     both server loops close the connection, so that net/http's server
//     cannot send an implicit 200.
//   - A response the proxy refuses → 502 (a failed attempt: a backend
//     fault for outlier detection and passive health, retried like a
//     reset, i.e. under the 5xx and gateway-error conditions): a
//     response's heads over 128 KiB together, 1xx included (HTTP/2
//     backends: 128 KiB per header list, and for the 1xx ones
//     together), malformed status lines, headers or framing (HTTP/2:
//     protocol errors), field names that are not tokens in the final
//     head, a status code below 100, and a 101 not asked for
//     or to another protocol than the one asked for.
//   - Retries stay in the backend service, go to a different endpoint
//     (engine PickExcept) and read a fresh Snapshot. Without a retry policy
//     a body-less request is retried once after 502/503/504 only when its
//     method is idempotent (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE,
//     PUT, DELETE; a POST the backend answered may have been acted on),
//     and any request once after a connect failure (nothing was sent;
//     docs/semantics.md §5). An explicit policy retries every method
//     (config.Warnings names a policy that can replay a POST). A
//     request with a body is retried only after a connect
//     failure that happened before any body byte was read (its body cannot
//     be replayed otherwise). There is no back-off between tries (Google
//     documents none; the retry goes to another endpoint). gRPC conditions
//     look at a trailers-only response's grpc-status header. A per-try
//     timeout that fires counts as "no response" (retried by 5xx and
//     gateway-error).
//   - Headers towards the backend: hop-by-hop headers removed (Connection
//     and what it lists, Keep-Alive, Proxy-*, TE except "trailers",
//     Transfer-Encoding, HTTP2-Settings, Upgrade unless upgrading), and
//     Expect: the proxy answers "Expect: 100-continue" itself (100
//     Continue once it starts sending the body to a backend), so uploads
//     never wait for a backend's 100. Towards the client likewise, also
//     when the backend's Connection header says "close" too (net/http
//     deletes that header while parsing; h1.Transport and
//     NewTransport's HTTP/1.1 connections, h1.SniffConns, keep a copy).
//     X-Forwarded-For gets "<client>,<lb-ip>" appended;
//     X-Forwarded-Proto is set; Via gets "1.1 spillway" (responses too).
//     Host is preserved unless hostRewrite. A response without
//     Content-Type gets none: the frontends' sniffing is suppressed (a
//     nil Content-Type entry, net/http's convention, which h1.Server
//     follows), so the proxy never invents one.
//   - Header actions: the backend service's custom headers first, then
//     the weighted service's headerAction, then the route's actions in
//     route.Action order, so URL-map actions win on a clash. Per action,
//     removals come before additions; replace (default true) sets, false
//     appends. In custom header values, the variables Spillway knows
//     (TLS version, cipher suite and SNI, client protocol, encryption,
//     client certificate presence and fingerprint) are filled in, the
//     other Google Cloud variables ({client_region}, …) expand to empty,
//     and any other {text} is sent as written (config.HeaderVariable).
//   - Fault injection: delay then abort; an unset percentage means 100.
//     Aborts are not retried. The delay does not count towards the route
//     timeout.
//   - Mirroring: body-less requests only, fire-and-forget, bounded
//     concurrency, Host "<host>-shadow"; an unset mirrorPercent means 100.
//   - Upgrades (WebSocket): forwarded with Connection/Upgrade, never
//     retried; on 101 the client connection is hijacked and bytes are
//     copied both ways until either side closes or the tunnel is idle for
//     the request timeout. "Upgrade: h2c" is not an upgrade: like
//     net/http, the request is answered as plain HTTP/1.1.
//   - Two proxy layers (layers.go, layerpool.go; docs/global.md): an
//     EDGE frontend forwards what it decided (service, region) to the
//     region's regional layer over pooled HTTP/2 connections, with the
//     internal X-Spillway-Edge-* request headers, and removes the
//     X-Spillway-Regional-* response headers after recording them; it
//     retries in another region (engine PickAvoiding). A REGIONAL
//     frontend believes the internal headers from trustedEdges or a
//     verified client certificate only, picks inside its region (engine
//     PickInRegion) and retries there. The edge checks each regional
//     endpoint with HTTP/2 PINGs (layercheck.go), re-reads its TLS files
//     when they change (layertls.go), and sends a WebSocket upgrade to
//     the regional layer over an HTTP/1.1 connection of its own
//     (layerupgrade.go).
//
// Left out: lower-casing header names towards HTTP/1.1 backends (Go's
// transport writes the map keys as given and inspects canonical names),
// custom error response policies, CORS policies, STRONG_COOKIE_AFFINITY,
// and HTTP/3.
package proxy
