// Package h2 is Spillway's HTTP/2 server loop (RFC 9113): it serves an
// http.Handler per stream on connections that speak HTTP/2 (h2 by ALPN,
// h2c with prior knowledge), with frame parsing and writing by
// golang.org/x/net/http2's Framer and header compression by its hpack
// package. It is a shell: it does network I/O and knows nothing of
// routing; internal/proxy plugs it into net/http's TLSNextProto hooks
// (spillway.http2Server: SPILLWAY).
//
// # Design
//
// One goroutine per connection reads frames and applies them: stream
// state, flow control, SETTINGS, PING, RST_STREAM, GOAWAY. Each request
// runs its handler on its own goroutine (the proxy handler blocks on its
// backend). Unlike x/net's server, handlers write their frames
// themselves: a handler takes the connection's write lock, HPACK-encodes
// its response headers with the connection's encoder, appends its frames
// to the connection's buffered writer, and flushes when no other
// goroutine is waiting to write (a pending-writers count), so that
// responses finishing together share one write system call. The reader
// writes its control frames the same way and flushes before it would
// block on the socket. There is no per-frame goroutine, no channel round
// trip per write and no write scheduler: frames go out in the order
// their writers take the lock, DATA bounded by the stream and connection
// send windows.
//
// # Limits
//
// Every buffer is bounded: a connection's request bodies by its receive
// window (Server.ConnWindow, returned as handlers read), a header block
// by Server.MaxHeaderListSize (larger ones are answered 431, far larger
// ones or a CONTINUATION flood close the connection, as x/net's Framer
// decides), streams by Server.MaxConcurrentStreams, handlers still
// running on reset streams by four times that (rapid reset: GOAWAY
// ENHANCE_YOUR_CALM, as x/net), a frame by Server.MaxReadFrameSize.
// Requests are checked as x/net's server checks them (RFC 9113 §8:
// pseudo-header fields, connection-specific fields, :authority and Host)
// and get the same answers: a stream error, or 400/431 from the server.
package h2
