// Package h1 is Spillway's HTTP/1.1 wire code: a server loop (Server),
// message-head parsing, a synchronous keep-alive backend client with its
// connection pool (Transport), a framing guard for net/http's server
// (GuardListener), and a header-timeout watch for HTTP/2 connections
// (WatchH2). It is a shell: it does network I/O. It knows nothing
// of routing or backends; internal/proxy's handler runs on Server and
// sends to backends through Transport, and a differential harness can
// drive both against net/http through this API alone.
//
// # Contract
//
// Server serves any http.Handler and Transport is an http.RoundTripper:
// what goes in and comes out is net/http's types (*http.Request,
// http.ResponseWriter with http.Flusher, http.Hijacker and
// http.ResponseController's SetWriteDeadline, SetReadDeadline and
// EnableFullDuplex,
// *http.Response). Request heads are parsed as http.ReadRequest parses
// them and response heads as http.ReadResponse does: the fast parsers
// (readRequestFast, readResponseFast) take the common shape of a message
// (the whole head buffered, CRLF line ends, token names, no framing
// beyond Content-Length) and build the same values; anything else makes
// them decline without consuming a byte and the standard library parses
// it, with its usual errors. FuzzRequestHead and FuzzResponseHead check
// that whatever the fast parsers accept, they parse exactly as net/http
// does. Request.Write writes what http.Request.Write would, except that
// header fields are not sorted by name.
//
// # Hot path
//
// Server parses common request heads itself and keeps one goroutine per
// busy connection. A cleartext keep-alive connection gives its buffers
// back while it waits for its next request, and after Server.ParkAfter of
// waiting its goroutine too: it is parked in an epoll set shared by the
// server's connections (internal/park) and gets a new goroutine when its
// socket is readable, so an idle client costs about what nginx and
// HAProxy spend on one (docs/performance.md, "Idle connections"). Transport's caller goroutine writes a request head
// straight into a pooled keep-alive connection's buffer (Transport.Do
// takes a Request, so no *http.Request or url.URL is built) and reads
// the response once its head is buffered whole. Connection deadlines are
// set only when they change; a caller's context is watched only once an
// attempt has waited 100 ms for its response, so short requests register
// no cancellation callback. There are no per-request locks beyond the
// idle pool's, no fmt on the success path and no package-level mutable
// state: the pools live in the Transport.
//
// # Differences from net/http, all deliberate
//
// Server:
//   - Request contexts are per connection: cancelled when the connection
//     ends, when a response write fails, or when the client is seen to go
//     away. The client is only watched (a one-byte background read, as
//     net/http does for every request) once a request has been running
//     for WatchAfter with its body fully read, so fast requests never pay
//     for it and slow ones notice a vanished client within WatchAfter.
//     A byte a watch reads is the start of the next request and is kept
//     for it; while one is kept there is no watch (as in net/http).
//   - There is no server-wide write timeout (net/http's WriteTimeout is
//     unset too): a handler bounds its response with
//     http.ResponseController's SetWriteDeadline, which lasts until the
//     response is finished and may be applied up to 250 ms late (so that
//     a busy connection does not move its deadline for every response).
//   - Handlers may always read the request body while writing the
//     response (EnableFullDuplex is a no-op); an unread body is drained
//     (up to 256 KiB) after the response, else the connection is closed.
//     The body has no read deadline unless the handler sets one
//     (SetReadDeadline, until the body's end); a body whose read failed
//     (a deadline, malformed chunking, a cut upload) is not drained: the
//     connection closes after the response.
//   - Cleartext connections that start with the HTTP/2 preface (h2c
//     with prior knowledge), and TLS ones that negotiated h2, are handed,
//     with the bytes already read, to Server.H2C. A TLS connection that
//     did not negotiate h2 is HTTP/1.1 whatever it sends (RFC 9113 §3.2),
//     as in net/http: its preface gets an HTTP/1.1 answer. "Upgrade: h2c" on an HTTP/1.1
//     request is not acted on: the request is answered as HTTP/1.1, like
//     net/http.
//   - Ambiguous framing is refused: net/http's server reads a request
//     with both Content-Length and "Transfer-Encoding: chunked" as
//     chunked and ignores Transfer-Encoding in HTTP/1.0; Server answers
//     such a request 400 and closes the connection (RFC 9112 §6.1, §6.3)
//     before the handler runs. Header names that are not tokens get the
//     same answer (net/http's server refuses them too; textproto alone
//     would accept "X A" and "Content-Length :"). net/http's server does
//     the framing check on GuardListener's connections when
//     its ConnContext calls GuardContext and its handler CheckGuard.
//   - Host is checked as net/http's server checks it (the Host field,
//     not an absolute-form target's authority: none → 400; bytes
//     outside httpguts.ValidHostHeader's set, '@' included → 400), and
//     an HTTP/1.1 request whose Host is empty with no authority in its
//     target is refused too (net/http accepts it).
//   - Expect: anything but a single "100-continue" on an HTTP/1.1
//     request is answered 417 and the connection closed; net/http
//     ignores Expect on HTTP/1.0 and looks only at the first value.
//   - Request line plus headers over MaxHeaderBytes (60 KiB, with
//     net/http's 4 KiB of read slop) → 431. Error responses the server
//     makes itself are short text/plain bodies, and close the connection.
//
// Transport:
//   - The synchronous path takes body-less, non-upgrade requests to
//     cleartext backends (RoundTrip sends every other request to its
//     fallback). A body-less request that fails on a pooled connection
//     before any response byte is replayed once on a fresh connection
//     when its method is idempotent, as net/http does. A request whose
//     writing the 100 ms probe deadline (when to start watching the
//     context) cut, its goroutine not scheduled for that long on a
//     starved CPU, is sent again on a fresh connection whatever its
//     method (the backend never got it whole), watching the context
//     from the start: no backend timeout.
//   - All heads of one response (1xx included) share
//     MaxResponseHeaderBytes (128 KiB), as in net/http's Transport (the
//     fallback installs no Got1xxResponse hook, which would reset that
//     budget per 1xx), and at most one 16 KiB buffer fill is read past
//     it. 1xx heads are discarded whatever their fields.
//   - A response refused for what the backend sent (over a limit,
//     malformed status line, headers or framing, header names that are
//     not tokens) fails with an error IsBadResponse reports, also on the
//     fallback; the caller can tell it from a connection failure.
//   - Request.Write refuses (ErrInvalidRequest) what would not parse
//     back as written: a method that is not a token, a target with
//     whitespace or that is neither origin-form nor a query-less "*",
//     and an ASCII Host with bytes outside ValidHost's set. net/http
//     writes "GET /x?a b HTTP/1.1" as given and sends an empty Host for
//     an invalid one. CheckRequest applies the same rules to requests
//     bound for the fallback, whose refusals do not say whose fault they
//     are. FuzzWriteRequest checks that whatever Write accepts parses
//     back to the same method, target, Host and fields.
//   - The Connection header http.ReadResponse deletes when it says
//     "close" is put back, so that a proxy can strip what it lists (on
//     the fallback too when its connections are SniffConns).
//   - An HTTP/1.0 response with a Transfer-Encoding field is refused
//     (IsBadResponse; RFC 9112 §6.1: its framing is faulty, and the
//     connection is closed), on the fallback too when its connections
//     are SniffConns; net/http ignores the field there and reads the
//     body by Content-Length or until close, chunk framing included.
package h1
