package h1

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
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
// close, as it does every request after the stream could not be
// followed (framingStream fails closed). Only cleartext listeners can be
// guarded: under TLS the listener sees ciphertext, and net/http needs the
// *tls.Conn itself.

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
	return &guardConn{Conn: c, opened: time.Now()}, nil
}

// guardConn is a connection whose request heads are followed.
type guardConn struct {
	net.Conn
	opened time.Time // accepted
	mu     sync.Mutex
	st     framingStream
}

// h2Opened tells WatchH2 when the connection was accepted.
func (c *guardConn) h2Opened() time.Time { return c.opened }

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
	if !ok {
		return errUnfollowed
	}
	return f.check(r)
}

// headFraming is what a request head said about its body.
type headFraming struct{ cl, te bool }

// framingStream follows a stream of HTTP/1 requests the way net/http
// reads it: up to 4 CR or LF bytes after a POST skipped (net/http's
// conn.readRequest), a head (lines up to an empty one; LF or CRLF ends a
// line), then a chunked body when the head has Transfer-Encoding (net/http
// refuses any other, and a Transfer-Encoding it would ignore, in HTTP/1.0,
// is refused by guardFraming), else Content-Length bytes. Its state is a
// few counters and a short line prefix. Where net/http refuses the input
// the connection ends, so the stream need not agree with it there; where
// net/http accepts it, the stream must read it exactly as net/http does,
// else a request takes another's entry. Anything it cannot parse as
// net/http does (a size that does not fit, a line padded past the prefix
// kept) breaks it, and a request line that is not HTTP/1 (the h2c
// preface: what follows is HTTP/2 frames, or nothing) ends it: every
// request after that is refused (fail closed), and nothing more is read.
type framingStream struct {
	state   int
	n       int64 // body or chunk bytes left, or CRLF bytes after a chunk
	line    [64]byte
	tail    [16]byte // the current line's last bytes, at lineLen%16
	lineLen int      // bytes of the current line (line holds the first ones)
	lines   int      // lines of the current head
	skip    int      // CR/LF bytes net/http may still skip before a request line
	post    bool     // the current request is a POST
	clField bool     // the last field line was a Content-Length
	cur     headFraming
	curLen  int64            // the head's first Content-Length, -1 if none
	queue   [512]headFraming // more than net/http's 4 KiB read-ahead can hold
	qHead   int
	qLen    int
	// broken: the stream could not be followed from some point on (the
	// queue overflowed, a length or size net/http would parse differently,
	// a line padded past line, a request that is not HTTP/1): the heads
	// queued before that point are still popped, every later request is
	// refused.
	broken bool
}

const (
	fsHead = iota
	fsBody
	fsChunkSize
	fsChunkData
	fsChunkEnd
	fsTrailer
	fsDone // not followed any more (broken)
)

// feed follows the next bytes of the stream. It never panics: a bug in
// following fails closed (guardConn.Read runs in goroutines net/http does
// not recover).
func (s *framingStream) feed(p []byte) {
	defer func() {
		if recover() != nil {
			s.stop()
			s.qLen = 0 // a bug: nothing queued is trusted either
		}
	}()
	s.follow(p)
}

// stop gives up following the stream: every request whose head is not
// queued yet is refused.
func (s *framingStream) stop() { s.broken, s.state = true, fsDone }

func (s *framingStream) follow(p []byte) {
	for len(p) > 0 {
		switch s.state {
		case fsDone:
			return
		case fsBody, fsChunkData, fsChunkEnd:
			k := int64(len(p))
			if k > s.n {
				k = s.n
			}
			if k <= 0 {
				s.stop()
				return
			}
			s.n -= k
			p = p[k:]
			if s.n == 0 {
				switch s.state {
				case fsBody:
					s.endMessage()
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
		if s.skip > 0 {
			// net/http's conn.readRequest: after a POST, "RFC 7230
			// section 3 tolerance for old buggy clients": it peeks 4
			// bytes and discards the leading CR and LF bytes among them.
			if b == '\r' || b == '\n' {
				s.skip--
				continue
			}
			s.skip = 0
		}
		if b != '\n' {
			if s.lineLen < len(s.line) {
				s.line[s.lineLen] = b
			}
			s.tail[s.lineLen%len(s.tail)] = b
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
				s.endMessage()
			}
		}
		s.lineLen = 0
	}
}

// endMessage ends a request (head and body).
func (s *framingStream) endMessage() {
	s.state = fsHead
	if s.post {
		s.skip = 4
	}
}

// http1Line reports whether the current line (a request line) ends with
// an HTTP/1 version, the only ones net/http's HTTP/1 server serves as
// HTTP/1 (http.ParseHTTPVersion after textproto strips CRLF or LF).
func (s *framingStream) http1Line() bool {
	n := s.lineLen
	if n > 0 && s.tail[(n-1)%len(s.tail)] == '\r' {
		n--
	}
	const v = "HTTP/1."
	if n < len(v)+1 {
		return false
	}
	for i := range len(v) {
		if s.tail[(n-len(v)-1+i)%len(s.tail)] != v[i] {
			return false
		}
	}
	d := s.tail[(n-1)%len(s.tail)]
	return '0' <= d && d <= '9'
}

// headLine takes one line of a head (without its LF).
func (s *framingStream) headLine(line []byte, empty bool) {
	if s.lines == 0 {
		s.cur, s.curLen, s.clField = headFraming{}, -1, false
	}
	s.lines++
	if s.lines == 1 {
		if !s.http1Line() {
			s.stop() // h2c prior knowledge, or a request net/http refuses
			return
		}
		s.post = len(line) >= 5 && string(line[:5]) == "POST "
		return
	}
	if !empty {
		if line[0] != ' ' && line[0] != '\t' {
			s.field(line)
		} else if s.clField {
			s.stop() // a folded Content-Length: not followed
		}
		return
	}
	// The end of the head.
	s.lines = 0
	if s.qLen == len(s.queue) {
		s.stop()
		return
	}
	s.queue[(s.qHead+s.qLen)%len(s.queue)] = s.cur
	s.qLen++
	switch {
	case s.cur.te:
		s.state = fsChunkSize
	case s.curLen > 0:
		s.state, s.n = fsBody, s.curLen
	default:
		s.endMessage()
	}
}

// field notes a head's Content-Length and Transfer-Encoding fields.
func (s *framingStream) field(line []byte) {
	name, value, ok := cutByte(line, ':')
	s.clField = false
	switch {
	case !ok:
	case asciiEqualFold(name, "transfer-encoding"):
		s.cur.te = true
	case asciiEqualFold(name, "content-length"):
		s.cur.cl, s.clField = true, true
		if s.lineLen > len(s.line) {
			s.stop() // padded past the prefix kept: not followed
			return
		}
		if s.curLen < 0 {
			s.curLen = parseContentLength(value)
			if s.curLen < 0 {
				s.stop() // net/http refuses it, or it is not followed
			}
		}
	}
}

// chunkSize takes a chunk-size line: "size[;extensions]" (CR included),
// as net/http's chunked reader does (readChunkLine, removeChunkExtension,
// parseHexUint): CRLF-terminated, trailing SP/HT trimmed, 1 to 16 hex
// digits. What net/http refuses, or a size over 1<<63-1, stops the stream.
func (s *framingStream) chunkSize(line []byte) {
	size, _, ext := cutByte(line, ';')
	if !ext {
		if s.lineLen > len(s.line) {
			s.stop() // a size padded past the prefix kept: not followed
			return
		}
		if len(line) == 0 || line[len(line)-1] != '\r' {
			s.stop() // a bare LF: net/http refuses it
			return
		}
		size = line[:len(line)-1]
		for len(size) > 0 && (size[len(size)-1] == ' ' || size[len(size)-1] == '\t') {
			size = size[:len(size)-1]
		}
	}
	if len(size) == 0 || len(size) > 16 {
		s.stop()
		return
	}
	var n uint64
	for _, c := range size {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | uint64(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | uint64(c-'a'+10)
		case 'A' <= c && c <= 'F':
			n = n<<4 | uint64(c-'A'+10)
		default:
			s.stop()
			return
		}
	}
	if n > 1<<63-1 {
		s.stop() // net/http takes it, but it is no length to follow
		return
	}
	if n == 0 {
		s.state = fsTrailer
		return
	}
	s.state, s.n = fsChunkData, int64(n)
}

// parseContentLength parses a Content-Length value as net/http does
// (textproto.TrimString, then strconv.ParseUint(v, 10, 63)); -1 if it
// does not.
func parseContentLength(v []byte) int64 {
	for len(v) > 0 && isASCIISpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isASCIISpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	if len(v) == 0 {
		return -1
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' || n > (1<<63-1-int64(c-'0'))/10 {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

func isASCIISpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// pop returns the oldest queued head, and false when there is none (the
// head was not read yet, or the stream was not followed up to it).
func (s *framingStream) pop() (headFraming, bool) {
	if s.qLen == 0 {
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
