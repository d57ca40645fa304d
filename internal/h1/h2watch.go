package h1

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"time"
)

// HTTP/2 header timeouts.
//
// net/http's and x/net's HTTP/2 servers bound a connection only by the
// idle timeout (IdleTimeout, while no stream is open), so a client that
// sends the preface and nothing more, or opens a header block (HEADERS
// without END_HEADERS) and trickles CONTINUATION frames or the HEADERS
// payload, keeps its connection for that long (610 s) where HTTP/1.1
// gets 30 s. WatchH2 applies the header timeout to HTTP/2 by following
// the byte stream the server reads (RFC 9113 §3.4 preface, §4.1 frame
// headers, §4.3 header blocks) and closing the connection:
//   - when no header block has been read whole within the timeout of
//     the start (accept, or the end of the TLS handshake);
//   - when a header block stays open for the timeout: from its HEADERS
//     frame's header until the END_HEADERS frame (the HEADERS frame
//     itself, or the last CONTINUATION) has been read whole.
//
// Between header blocks the HTTP/2 server's idle timeout governs.

// WatchH2 returns c, the plaintext side of a connection an HTTP/2
// server is about to serve, wrapped so that it is closed when its client
// is slow with its headers (see above), timeout being the header timeout;
// sawPreface says that the client preface was already read from c. The
// first-request clock starts now, or earlier for a connection that
// Server handed off or GuardListener accepted: at accept. The wrapper
// implements ConnectionState when c does (a *tls.Conn), so that the
// HTTP/2 server sees TLS, and not otherwise. Closing it stops its timer.
// With timeout <= 0 it returns c.
//
// The follower parses frame headers only, skipping payloads by their
// length: O(frames) work and no allocation per Read. Read must not be
// called concurrently (an HTTP/2 server reads on one goroutine).
func WatchH2(c net.Conn, timeout time.Duration, sawPreface bool) net.Conn {
	if timeout <= 0 {
		return c
	}
	start := time.Now()
	if o, ok := c.(interface{ h2Opened() time.Time }); ok {
		if t := o.h2Opened(); !t.IsZero() && t.Before(start) {
			start = t
		}
	}
	w := &h2Watch{Conn: c, timeout: timeout, base: start}
	if !sawPreface {
		w.skip = uint32(len(h2Preface))
	}
	// Armed only once w.timer is set, since fire Resets it.
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Reset(timeout - time.Since(start))
	if cs, ok := c.(interface{ ConnectionState() tls.ConnectionState }); ok {
		return &h2WatchTLS{h2Watch: w, cs: cs}
	}
	return w
}

// h2Watch is WatchH2's wrapper. The read side (Read's goroutine) owns
// the parser fields; the timer's goroutine shares only the atomics.
type h2Watch struct {
	net.Conn
	timeout time.Duration
	base    time.Time // the start; the clock for blockAt
	timer   *time.Timer

	h2Frames
	seen bool // a header block has ended (the read side's copy of complete)

	// blockAt is 1 + the time (since base) the open header block began,
	// 0 when none is open; complete is set once a header block has been
	// read whole; parked says the timer is not running (no block was
	// open when it last fired); closed is set by Close.
	blockAt  atomic.Int64
	complete atomic.Bool
	parked   atomic.Bool
	closed   atomic.Bool
}

// h2WatchTLS is h2Watch for a TLS connection.
type h2WatchTLS struct {
	*h2Watch
	cs interface{ ConnectionState() tls.ConnectionState }
}

// ConnectionState returns the TLS connection's state.
func (w *h2WatchTLS) ConnectionState() tls.ConnectionState { return w.cs.ConnectionState() }

func (w *h2Watch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 {
		w.follow(p[:n])
	}
	return n, err //nolint:wrapcheck // io.EOF must stay io.EOF
}

// Close stops the timer and closes the connection.
func (w *h2Watch) Close() error {
	w.closed.Store(true)
	w.timer.Stop()
	return w.Conn.Close() //nolint:wrapcheck // the connection's own error
}

// follow advances the parser over b and starts and ends header blocks.
func (w *h2Watch) follow(b []byte) {
	for len(b) > 0 {
		var ev h2Event
		b, ev = w.next(b)
		switch ev {
		case h2BlockOpened:
			if !w.seen {
				break // the first-request deadline covers it
			}
			w.blockAt.Store(int64(time.Since(w.base)) + 1)
			if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
				w.timer.Reset(w.timeout)
			}
		case h2BlockEnded:
			if !w.seen {
				w.seen = true
				w.complete.Store(true)
			} else {
				w.blockAt.Store(0)
			}
		}
	}
}

// fire runs when the timer expires: past the first-request deadline, or
// when an open header block may have run out of time.
func (w *h2Watch) fire() {
	if w.closed.Load() {
		return
	}
	if !w.complete.Load() {
		w.Conn.Close()
		return
	}
	if at := w.blockAt.Load(); at != 0 {
		left := w.timeout - (time.Since(w.base) - time.Duration(at-1))
		if left <= 0 {
			w.Conn.Close()
			return
		}
		w.timer.Reset(left)
		return
	}
	// No block open: park until one opens. A block that opened since
	// the load above is seen either here or by follow, which re-arms.
	w.parked.Store(true)
	if w.blockAt.Load() != 0 && w.parked.CompareAndSwap(true, false) {
		w.timer.Reset(0)
	}
}

// h2Frames follows a client's HTTP/2 byte stream: the preface, then
// frames, each a 9-byte header (RFC 9113 §4.1: 24-bit length, type,
// flags, stream) and a payload of that length, which it skips. A header
// block opens with a HEADERS frame whose header has been read, while no
// block is open, and ends once a HEADERS or CONTINUATION frame with
// END_HEADERS has been read whole (§4.3, §6.2, §6.10), as
// golang.org/x/net/http2.Framer reads them. Frames that break the
// ordering rules (a CONTINUATION outside a block, any other frame inside
// one) change nothing: the server ends the connection on them.
type h2Frames struct {
	skip  uint32  // bytes left of the preface or of the current payload
	hdrN  uint8   // bytes of the current frame header read
	hdr   [9]byte // the current frame header
	ends  bool    // the current frame ends the open header block
	open  bool    // a header block is open
	frame bool    // skip is a frame payload (not the preface)
}

// h2Event is what next saw.
type h2Event uint8

const (
	h2Nothing     h2Event = iota
	h2BlockOpened         // a HEADERS frame's header opened a header block
	h2BlockEnded          // the frame that ends the header block was read whole
)

// HTTP/2 frame types and the END_HEADERS flag (RFC 9113 §6.2, §6.10).
const (
	h2FrameHeaders      = 0x1
	h2FrameContinuation = 0x9
	h2FlagEndHeaders    = 0x4
)

// next consumes b up to the first event (or all of it) and returns the
// rest and the event.
func (f *h2Frames) next(b []byte) ([]byte, h2Event) {
	for len(b) > 0 {
		if f.skip > 0 {
			k := min(uint32(len(b)), f.skip)
			f.skip -= k
			b = b[k:]
			if f.skip == 0 && f.frame {
				if ev := f.frameEnd(); ev != h2Nothing {
					return b, ev
				}
			}
			continue
		}
		k := copy(f.hdr[f.hdrN:], b)
		f.hdrN += uint8(k)
		b = b[k:]
		if f.hdrN < uint8(len(f.hdr)) {
			break
		}
		f.hdrN = 0
		f.frame = true
		f.skip = uint32(f.hdr[0])<<16 | uint32(f.hdr[1])<<8 | uint32(f.hdr[2])
		typ, endHeaders := f.hdr[3], f.hdr[4]&h2FlagEndHeaders != 0
		var ev h2Event
		switch {
		case typ == h2FrameHeaders && !f.open:
			f.open, f.ends = true, endHeaders
			ev = h2BlockOpened
		case typ == h2FrameContinuation && f.open:
			f.ends = endHeaders
		default:
			f.ends = false
		}
		if f.skip == 0 {
			if end := f.frameEnd(); end != h2Nothing {
				// An empty HEADERS frame with END_HEADERS opens and
				// ends its block at once: report the end alone.
				return b, end
			}
		}
		if ev != h2Nothing {
			return b, ev
		}
	}
	return b, h2Nothing
}

// frameEnd is called when the current frame has been read whole.
func (f *h2Frames) frameEnd() h2Event {
	if f.ends {
		f.open, f.ends = false, false
		return h2BlockEnded
	}
	return h2Nothing
}
