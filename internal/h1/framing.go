package h1

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// Ambiguous framing on net/http's HTTP/1 server.
//
// http.ReadRequest removes Content-Length from a request that also has
// "Transfer-Encoding: chunked", and Transfer-Encoding from an HTTP/1.0
// request, so a handler cannot tell that the request was ambiguous (RFC
// 9112 §6.1, §6.3), and net/http keeps the connection. Server scans the
// heads itself (framingScan). For net/http, GuardListener's connections
// follow the request stream as net/http reads it (heads, then bodies by
// the same framing rules) and queue, per request head, whether it had
// Content-Length and Transfer-Encoding; the server's ConnContext records
// the connection (GuardContext) and its handler calls CheckGuard once
// per HTTP/1 request, in order (net/http serves a connection's requests
// one after the other), answering an ambiguous one 400 with Connection:
// close. Only cleartext listeners can be guarded: under TLS the listener
// sees ciphertext, and net/http needs the *tls.Conn itself.

// GuardListener wraps a cleartext listener served by a net/http
// *http.Server whose ConnContext calls GuardContext and whose handler
// calls CheckGuard, so that requests with ambiguous framing can be
// refused. Connections that are not from a guarded listener are served
// as net/http does.
func GuardListener(ln net.Listener) net.Listener { return guardListener{ln} }

type guardListener struct{ net.Listener }

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err //nolint:wrapcheck // net/http inspects the listener's errors
	}
	return &guardConn{Conn: c}, nil
}

// guardConn is a connection whose request heads are followed.
type guardConn struct {
	net.Conn
	mu sync.Mutex
	st framingStream
}

func (c *guardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.st.feed(p[:n])
		c.mu.Unlock()
	}
	return n, err //nolint:wrapcheck // io.EOF must stay io.EOF
}

// CloseWrite half-closes the connection when it can (net/http does so
// before closing after an error response, so that it is not reset away).
func (c *guardConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite() //nolint:wrapcheck
	}
	return nil
}

// next returns the framing of the next request head net/http read, and
// false when the stream could not be followed.
func (c *guardConn) next() (headFraming, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.pop()
}

// guardKey is the context key of a request's guardConn.
type guardKey struct{}

// errUnfollowed is CheckGuard's error when a guarded connection's
// request stream could not be followed.
var errUnfollowed = errors.New("request framing could not be followed")

// GuardContext returns ctx recording c when c is a GuardListener
// connection, else ctx itself: call it from the *http.Server's
// ConnContext.
func GuardContext(ctx context.Context, c net.Conn) context.Context {
	if gc, ok := c.(*guardConn); ok {
		return context.WithValue(ctx, guardKey{}, gc)
	}
	return ctx
}

// CheckGuard returns an error when r is an HTTP/1 request on a
// connection GuardContext recorded and its head had ambiguous framing
// (the error wraps ErrAmbiguousFraming), or the connection's request
// stream could not be followed; then the request should be answered 400
// and the connection closed. Requests on other connections (HTTP/2, TLS, not
// guarded) pass. Call it exactly once per request, before reading the
// body: each call takes the next request head of the connection.
func CheckGuard(r *http.Request) error {
	if r.ProtoMajor != 1 {
		return nil
	}
	gc, ok := r.Context().Value(guardKey{}).(*guardConn)
	if !ok {
		return nil
	}
	f, ok := gc.next()
	switch {
	case !ok:
		return errUnfollowed
	case f.te && !r.ProtoAtLeast(1, 1):
		return fmt.Errorf("%w: Transfer-Encoding in an HTTP/1.0 request", ErrAmbiguousFraming)
	case f.te && f.cl:
		return fmt.Errorf("%w: both Transfer-Encoding and Content-Length", ErrAmbiguousFraming)
	}
	return nil
}

// headFraming is what a request head said about its body.
type headFraming struct{ cl, te bool }

// framingStream follows a stream of HTTP/1 requests the way net/http
// reads it: a head (lines up to an empty one; LF or CRLF ends a line),
// then a chunked body when the head has Transfer-Encoding (net/http
// refuses any other, and a Transfer-Encoding it would ignore, in HTTP/1.0,
// is refused by guardFraming), else Content-Length bytes. Its state is a
// few counters and a short line prefix; input net/http would refuse ends
// the connection, so what the stream makes of it does not matter.
type framingStream struct {
	state   int
	n       int64 // body or chunk bytes left, or CRLF bytes after a chunk
	line    [64]byte
	lineLen int // bytes of the current line (line holds the first ones)
	lines   int // lines of the current head
	cur     headFraming
	curLen  int64            // the head's first Content-Length, -1 if none
	queue   [512]headFraming // more than net/http's 4 KiB read-ahead can hold
	qHead   int
	qLen    int
	// broken: the stream could not be followed (the queue overflowed, or
	// a Content-Length or chunk-size line was padded past line), so
	// every request after it is refused.
	broken bool
}

const (
	fsHead = iota
	fsBody
	fsChunkSize
	fsChunkData
	fsChunkEnd
	fsTrailer
)

// feed follows the next bytes of the stream.
func (s *framingStream) feed(p []byte) {
	for len(p) > 0 {
		switch s.state {
		case fsBody, fsChunkData, fsChunkEnd:
			k := int64(len(p))
			if k > s.n {
				k = s.n
			}
			s.n -= k
			p = p[k:]
			if s.n == 0 {
				switch s.state {
				case fsBody:
					s.state = fsHead
				case fsChunkData:
					s.state, s.n = fsChunkEnd, 2
				default:
					s.state = fsChunkSize
				}
			}
			continue
		}
		b := p[0]
		p = p[1:]
		if b != '\n' {
			if s.lineLen < len(s.line) {
				s.line[s.lineLen] = b
			}
			s.lineLen++
			continue
		}
		line := s.line[:min(s.lineLen, len(s.line))]
		empty := s.lineLen == 0 || s.lineLen == 1 && line[0] == '\r'
		switch s.state {
		case fsHead:
			s.headLine(line, empty)
		case fsChunkSize:
			s.chunkSize(line)
		case fsTrailer:
			if empty {
				s.state = fsHead
			}
		}
		s.lineLen = 0
	}
}

// headLine takes one line of a head (without its LF).
func (s *framingStream) headLine(line []byte, empty bool) {
	if s.lines == 0 {
		s.cur, s.curLen = headFraming{}, -1
	}
	s.lines++
	if s.lines == 1 || !empty {
		if s.lines > 1 && line[0] != ' ' && line[0] != '\t' {
			s.field(line)
		}
		return
	}
	// The end of the head.
	s.lines = 0
	if s.qLen == len(s.queue) {
		s.broken = true
	} else {
		s.queue[(s.qHead+s.qLen)%len(s.queue)] = s.cur
		s.qLen++
	}
	switch {
	case s.cur.te:
		s.state = fsChunkSize
	case s.curLen > 0:
		s.state, s.n = fsBody, s.curLen
	}
}

// field notes a head's Content-Length and Transfer-Encoding fields.
func (s *framingStream) field(line []byte) {
	name, value, ok := cutByte(line, ':')
	switch {
	case !ok:
	case asciiEqualFold(name, "transfer-encoding"):
		s.cur.te = true
	case asciiEqualFold(name, "content-length"):
		s.cur.cl = true
		if s.lineLen > len(s.line) {
			s.broken = true // padded past the prefix kept: not followed
		}
		if s.curLen < 0 {
			s.curLen = parseLength(string(trimOWSBytes(value)))
		}
	}
}

// chunkSize takes a chunk-size line: "size[;extensions]" (CR included).
func (s *framingStream) chunkSize(line []byte) {
	line, _, ext := cutByte(line, ';')
	if !ext && s.lineLen > len(s.line) {
		s.broken = true // a size padded past the prefix kept: not followed
	}
	line = trimOWSBytes(line)
	var n int64
	for _, c := range line {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | int64(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | int64(c-'a'+10)
		case 'A' <= c && c <= 'F':
			n = n<<4 | int64(c-'A'+10)
		}
	}
	if n == 0 {
		s.state = fsTrailer
		return
	}
	s.state, s.n = fsChunkData, n
}

// pop returns the oldest queued head, and false when there is none or
// the queue overflowed.
func (s *framingStream) pop() (headFraming, bool) {
	if s.broken || s.qLen == 0 {
		return headFraming{}, false
	}
	f := s.queue[s.qHead]
	s.qHead = (s.qHead + 1) % len(s.queue)
	s.qLen--
	return f, true
}

func cutByte(b []byte, sep byte) (before, after []byte, found bool) {
	for i, c := range b {
		if c == sep {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}

// trimOWSBytes trims spaces, tabs and a CR (the end of a CRLF line).
func trimOWSBytes(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
